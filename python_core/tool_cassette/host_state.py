"""Host state of a recorded call: what DSH tracked while its body ran, and what a replay restores.

Rule: while a selected call's real body runs, the shim collects the file observations DSH's
filesystem tools emit (``fs/observed``) and the session events the tool appends
(``session/event``). Python keeps what later calls depend on and DSH can reproduce:

- each observed path, relative to the session cwd when below it: a replay observes the file
  again *as it is then* (the version token is the backend's own and never replays), so an
  unselected ``edit`` after a replayed ``read`` is guarded like after a real read;
- the appended events of the types in ``RESTORED_EVENTS`` (``todo/write``: the session's task
  list), verbatim.

It is stored as the optional ``host`` member of ``call/result`` (format version 2) and left out
when empty. Outside effects (file contents written, processes and jobs started) are not host
state: ``dependencies`` names them.
"""

from __future__ import annotations

import json
import os

import msgspec
from msgspec import UNSET, Raw, UnsetType

from dsh_sidecar.python_core.tool_cassette.format import (
    HostEvent,
    HostState,
    ResultFrame,
    canonical_payload,
    canonical_text,
)

__all__ = ["RESTORED_EVENTS", "HostCapture", "HostEvent", "HostState", "Observed", "kept", "relocated", "restored"]

# Session events a built-in appends that DSH reads back later (the todo list of todo_write).
RESTORED_EVENTS = frozenset({"todo/write"})


class Observed(msgspec.Struct, frozen=True, gc=False):
    """One ``fs/observed`` event during a body: the display path and ``present``/``absent``."""

    path: str
    kind: str


class HostCapture(msgspec.Struct, frozen=True, gc=False):
    """What the shim saw DSH track while one real body ran (``tools/post-execute``'s ``host``)."""

    observed: tuple[Observed, ...] = ()
    events: tuple[HostEvent, ...] = ()


def _relative(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when below it (a cassette moves with its project)."""
    if os.path.isabs(path) and (path == cwd or path.startswith(cwd.rstrip(os.sep) + os.sep)):
        return os.path.relpath(path, cwd)
    return path


def _escaped(cwd: str) -> bytes:
    """``cwd`` plus a separator as it appears inside a JSON string."""
    return json.dumps(cwd.rstrip(os.sep) + os.sep, ensure_ascii=False)[1:-1].encode()


def kept(capture: HostCapture | None, cwd: str, outcome: bytes = b"") -> HostState | None:
    """Return the host state to record for a call, or ``None`` when there is none.

    ``outcome``: the result's JSON; when it names paths below ``cwd``, ``cwd`` is kept so a
    replay in another folder reports its own paths (``relocated``).

    Raises:
        CanonicalJsonError: an event's data has no canonical form.
    """
    located = cwd if cwd and _escaped(cwd) in outcome else ""
    observed = () if capture is None else capture.observed
    observe = tuple(dict.fromkeys(_relative(o.path, cwd) for o in observed))
    events = () if capture is None else tuple(
        HostEvent(type=e.type, data=canonical_text(bytes(e.data))) for e in capture.events if e.type in RESTORED_EVENTS)
    if not observe and not events and not located:
        return None
    return HostState(observe=observe, events=events, cwd=located)


def relocated(frame: ResultFrame, cwd: str) -> ResultFrame:
    """``frame`` with the recording's cwd replaced by ``cwd`` in its value, content and meta."""
    host = frame.host
    if host is UNSET or not host.cwd or host.cwd == cwd or not cwd:
        return frame
    old, new = _escaped(host.cwd), _escaped(cwd)

    def moved(raw: Raw | UnsetType) -> Raw | UnsetType:
        return raw if raw is UNSET else Raw(bytes(raw).replace(old, new))

    return msgspec.structs.replace(frame, value=moved(frame.value), content=moved(frame.content),
                                   meta=moved(frame.meta))


def restored(state: HostState, cwd: str) -> Raw:
    """The ``host`` the shim applies for a served call: absolute paths below ``cwd``."""
    observe = [os.path.join(cwd, path) for path in state.observe]
    events = [{"type": e.type, "data": msgspec.json.decode(e.data)} for e in state.events]
    return canonical_payload({"events": events, "observe": observe})
