"""A dsh-llm-replay ``replay.override.json`` beside a fixture: read as that package reads it, and
carried only where it agrees with the log.

Rule: ``@deepseek-ai/dsh-llm-replay`` 0.0.1-rc.1 (``lib/index.js`` ``readOverrideDoc``,
``loadReplayScript``) reads either a bare ``ReplayEntry[]`` that replaces the primary session's
derived script, or ``{"patches": [{"at", "entry"}]}`` that swaps the 0-based call ``at`` of it
(``at`` equal to its length appends; indexes unique). An entry is ``{"kind": "chunks", "chunks"}``,
``{"kind": "throw", "chunks", "message", "code"}`` or ``{"kind": "hang", "readyFile"?}``, with
exactly those keys. Its derived script is one entry per loop ``stream()`` call of the primary log
(and per ``compact/summary`` marked as one, an event rc.8 names ``compaction/summary``, so none
for an rc.8 log). A model cassette matches each call by the request the log rebuilds, so an
entry is carried when it is the log's own call; anything else is refused by name:

- a ``{{fromRequest:<regex>}}`` placeholder: its text is resolved against the live request;
- a ``throw`` (``stream()`` throwing: rc.8 logs a provider failure as an error ``finish``, which
  imports) or a ``hang`` (a cancellation): a cassette holds what a stream yielded;
- chunks the log does not hold, or an appended call: the requests after it, rebuilt from the
  log, would not be the ones the replay makes (the log is of the run without the override).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from dsh_sidecar.python_core.cassette_io import schema_location
from dsh_sidecar.python_core.session_import.log_calls import ImportUnfaithful, LogCall

__all__ = ["OVERRIDE_NAME", "check_override"]

OVERRIDE_NAME: Final = "replay.override.json"
_PLACEHOLDER: Final = "{{fromRequest:"
_FIX: Final = "record the task through the sidecar (modelCassette.mode: record), or import the log without its override"


class _Entry(msgspec.Struct, forbid_unknown_fields=True, tag_field="kind"):
    pass


class _Chunks(_Entry, tag="chunks"):
    chunks: list[dict[str, Any]]


class _Throw(_Entry, tag="throw"):
    chunks: list[dict[str, Any]]
    message: str
    code: str


class _Hang(_Entry, tag="hang"):
    readyFile: str | None = None


Entry = _Chunks | _Throw | _Hang


class _Patch(msgspec.Struct, forbid_unknown_fields=True):
    at: int
    entry: Entry


class _Patches(msgspec.Struct, forbid_unknown_fields=True):
    patches: list[_Patch]


def _refused(reason: str) -> ImportUnfaithful:
    return ImportUnfaithful("override", f"{OVERRIDE_NAME}: {reason}", _FIX)


def _read(data: bytes) -> list[Entry] | _Patches:
    try:
        # msgspec refuses what no JSON text of a string can hold (a lone surrogate), as rc.8 would.
        decoded = msgspec.json.decode(data)
    except msgspec.DecodeError:
        raise _refused("not JSON") from None
    try:
        if isinstance(decoded, list):
            return msgspec.convert(decoded, list[Entry])
        return msgspec.convert(decoded, _Patches)
    except msgspec.ValidationError as exc:
        # As dsh-llm-replay refuses it: neither a ReplayEntry[] nor { patches: [...] }.
        raise _refused(f"not a ReplayEntry[] or {{patches: [...]}} ({schema_location(exc)})") from None


def check_override(data: bytes, calls: Sequence[LogCall]) -> int:
    """Check the override ``data`` against the primary log's calls; return how many entries it holds.

    Raises:
        ImportUnfaithful: ``field`` ``override``: the document is not one dsh-llm-replay reads, or
            an entry is not the log's own call (named by its index, never its content).
    """
    doc = _read(data)
    loop = [call for call in calls if call.lane == "model"]
    placed: list[tuple[str, int, Entry]]
    if isinstance(doc, list):
        if len(doc) != len(loop):
            raise _refused(f"replaces the script of {len(loop)} call(s) with {len(doc)}; the calls the log does "
                           "not hold have no request in it")
        placed = [(f"entry {index}", index, entry) for index, entry in enumerate(doc)]
    else:
        seen: set[int] = set()
        placed = []
        for index, patch in enumerate(doc.patches):
            if patch.at < 0 or patch.at > len(loop) or patch.at in seen:
                raise _refused(f"patch {index}: at {patch.at} is out of range or repeated (the log holds "
                               f"{len(loop)} call(s))")
            seen.add(patch.at)
            placed.append((f"patch {index}", patch.at, patch.entry))
    for where, at, entry in placed:
        if _PLACEHOLDER in msgspec.json.encode(entry).decode():
            raise _refused(f"{where} holds a {{{{fromRequest:...}}}} placeholder, resolved against the live request "
                           "at replay; a cassette holds the chunks a stream yielded")
        if not isinstance(entry, _Chunks):
            kind = "throw" if isinstance(entry, _Throw) else "hang"
            raise _refused(f"{where} is a {kind} entry (a stream that throws or never ends); a cassette holds what a "
                           "stream yielded")
        if at == len(loop):
            raise _refused(f"{where} appends a call the log does not hold; its request is not in the log")
        if entry.chunks != loop[at].chunks:
            raise _refused(f"{where} gives call {at} chunks the log does not hold; the requests after it, rebuilt "
                           "from the log, would not be the replay's")
    return len(placed)

