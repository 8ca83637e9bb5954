"""A session log's provider calls as a model cassette, matched like a recording.

Rule: each imported call's ``request`` parts and fingerprint are computed by the recorder's own
functions (``model_request.normalize``, ``filter_view``, ``parts_of``) over the request rebuilt
from the log (``log_calls``), so a replay through real DSH computes the same fingerprint and an
imported cassette fails closed on a changed prompt, tool set, option or tool result exactly as a
recorded one does. The lines are checked with ``verify``'s rules before anything is written, and
the file is published create-only like a recording (``Recorder``: ``<file>.partial``, then a link).

Privacy, as recording: the filters (``credentials`` by default) run over the request view before
it is digested or kept, endpoints leave failure texts (``scrub_endpoints``), the working
directory is ``<cwd>`` in the view; an answer (the chunks, never rewritten) that names the
absolute working directory is refused (``IMPORT_PRIVATE``) rather than written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Raw

from dsh_sidecar.python_core.canonical import canonical_bytes
from dsh_sidecar.python_core.cassette_io import GENESIS, Chain, PartialFile
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.filters import FilterRule, Filters, rules_digest
from dsh_sidecar.python_core.model_cassette.endpoints import scrub_endpoints
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteInvalid
from dsh_sidecar.python_core.model_cassette.format import (
    IMPORTED,
    PROTOCOL,
    VERSION,
    CallFrame,
    CompleteFrame,
    HeaderFrame,
    chunk_facts,
)
from dsh_sidecar.python_core.model_cassette.store import Recorder, check_lines
from dsh_sidecar.python_core.model_request import filter_view, normalize, parts_of
from dsh_sidecar.python_core.session_import.log_calls import ImportUnfaithful, LogCalls

__all__ = ["IMPORTED_HOST", "ImportPrivate", "model_lines", "write_lines"]

IMPORTED_HOST: Final = IMPORTED
"""The header's ``host``: a log does not name the ``@deepseek-ai/dsh-llm`` that streamed it, and
this value says the file was imported (``inspect`` and ``verify`` say so)."""
_NOT_CAPTURED: Final = frozenset({"mock"})  # the sidecar's own route: a replay passes it, never matches


class ImportPrivate(SidecarError):
    """What would be written holds what a cassette never holds (names where, never the value)."""

    code = "IMPORT_PRIVATE"
    hint = "a cassette never holds it: record the task through the sidecar (modelCassette.mode: record)"

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where}: {reason}; nothing was written; fix: {self.hint}")


def _chunk_bytes(chunks: list[dict[str, Any]], where: str, cwd: str) -> bytes:
    # msgspec keeps the decoded key order: the array is the host's serialization (JSON.stringify).
    data = scrub_endpoints(msgspec.json.encode(chunks))
    if len(cwd) > 1 and cwd.encode() in data:
        raise ImportPrivate(where, "the model's answer names the session's absolute working directory")
    return data


def model_lines(log: LogCalls, *, filters: Sequence[FilterRule] = (),
                request_view: Literal["metadata", "full"] = "metadata") -> list[bytes]:
    """The cassette lines (each with its newline) of ``log``'s calls, checked as ``verify`` checks a file.

    Raises:
        ImportUnfaithful: a call of a route a replay never captures (the sidecar's ``mock``), a
            chunk of no stream's shape, or calls that would fail ``verify``.
        ImportPrivate: an answer names the absolute working directory.
        ModelRequestInvalid, CanonicalJsonError: a rebuilt request has a field of the wrong shape.
        FilterRaised: a filter function raised.
    """
    compiled = Filters(filters)
    chain = Chain()
    lines = [chain.link(HeaderFrame(seq=0, prev=GENESIS, protocol=PROTOCOL, version=VERSION, requestView=request_view,
                                    host=IMPORTED_HOST, filters=rules_digest(filters) if filters else UNSET))[1]]
    for ordinal, call in enumerate(log.calls):
        where = f"model call {call.lane}#{call.position} (turn {call.turn}, step {call.step})"
        if call.request.get("provider") in _NOT_CAPTURED:
            raise ImportUnfaithful("route", f"{where} went to the sidecar's mock route, which a model cassette never "
                                            "captures (replay the mock script instead)")
        view = normalize(call.request, cwd=log.cwd)
        if compiled:
            view = filter_view(view, lambda value: compiled.apply(value, tool="", where="args"))
        try:
            parts = parts_of(view)
        except msgspec.ValidationError:
            # rc.8 never logs these; a live request would never carry them either.
            raise ImportUnfaithful("request", f"{where} has a message role or tool name that is not a string") from None
        chunks = _chunk_bytes(call.chunks, where, log.cwd)
        try:
            facts = chunk_facts(chunks)
        except msgspec.ValidationError:
            raise ImportUnfaithful("chunks", f"{where} holds a chunk of a shape no stream yields") from None
        start = call.times[0]
        frame = CallFrame(
            seq=0, prev="", ordinal=ordinal, lane=call.lane, position=call.position,
            fingerprint=parts.fingerprint(), request=parts,
            view=Raw(canonical_bytes(view)) if request_view == "full" else UNSET,
            chunks=Raw(chunks), atMs=tuple(max(0, t - start) for t in _monotone(call.times)),
            finish=facts.finish, toolCalls=facts.tool_calls,
        )
        lines.append(chain.link(frame)[1])
    lines.append(chain.link(CompleteFrame(seq=0, prev="", calls=len(log.calls), leftOut=tuple(log.left_out)))[1])
    try:
        check_lines(lines)
    except ModelCassetteInvalid as error:
        # The calls as the log holds them would make a file verify refuses (a finish chunk that
        # is not the last, an empty call): what the recorder would never have written.
        raise ImportUnfaithful("chunks", f"the imported calls fail verify ({error.message})") from None
    return lines


def _monotone(times: list[int]) -> list[int]:
    out: list[int] = []
    for t in times:
        out.append(max(t, out[-1]) if out else t)
    return out


def write_lines(path: str, lines: Sequence[bytes], kind: type[PartialFile] = Recorder) -> None:
    """Publish ``lines`` at ``path`` create-only, as a recording of ``kind`` is published.

    Raises:
        ModelCassetteExists: the file or its partial exists (an import never overwrites); the
            tool cassette's ``CassetteExists`` for its ``kind``.
        ModelCassetteIOError: the file cannot be written (``CassetteIOError``).
    """
    recorder = kind.create(path)
    try:
        recorder.write_lines(lines)
        recorder.publish()
    except SidecarError:
        recorder.discard()
        raise
