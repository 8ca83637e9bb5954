"""The provider ``stream()`` calls a DSH rc.8 session log holds, each with the request it answered.

Rule: a call is rebuilt only from what the log holds, the way the host built it; what the log
lacks is refused by name (``ImportUnfaithful``), never guessed.

- Chunks: the ``assistant/chunk`` events of one ``(turn, step)``, split after each ``finish``
  (a retried stream is a second call of the same step). The storage rows rc.8 packs delta runs
  into (``text-chunks``, ``reasoning-chunks``, ``tool-call-chunks``,
  ``@deepseek-ai/dsh-session/lib/types/chunk-rows.js``) are expanded back to the exact chunks,
  in rc.8's key order.
- Request: the last ``request/header`` before the call's first chunk (its ``config``: route and
  options; its ``system`` and ``tools``), and the messages on the log's ordered surface at that
  moment, folded as rc.8 folds it (``@deepseek-ai/dsh-session/lib/types/surface.js``): a
  ``user/message``, ``assistant/message`` or ``tool/result`` with ``surfaceOp: append`` joins the
  tail; one with ``{op: replace, start, end}`` takes the place of the surface nodes whose event
  seqs run from ``start`` to ``end``. A ``tool/result`` replacement is the model-free tool-result
  pruner's (``dsh-compaction-tool-result-pruner``: only the content changes); a ``user/message``
  replacing the range a ``compaction/summary`` names is its checkpoint. Any other replacement is
  refused.
- A compaction: its summarization call is rebuilt from its ``compaction/summary`` event
  (``compaction.py``), in the ``compaction`` lane; a failed one (``compaction/end`` with an
  ``error``) left no answer in the log and is refused.
- The session title: ``session/title-llm-request`` holds its request but the log never holds its
  stream (only the title text), so each title call is *left out*, as a recording leaves out a
  title that had not settled (``docs/model-cassette-format.md``, "The session-title call").
- Timing: an event time is a millisecond per event, not per chunk arrival at the provider
  route; ``atMs`` counts from the call's first chunk (the wait before it is not in the log).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.session_import.compaction import COMPACTION_LANE, compaction_request, summary_chunks

__all__ = ["TITLE_LANE", "ImportUnfaithful", "LogCall", "LogCalls", "calls_of", "merged", "one_turn"]

TITLE_LANE: Final = "session-title"
_LOOP_LANE: Final = "model"
_SURFACE: Final = frozenset({"user/message", "assistant/message", "tool/result"})
_ROWS: Final = {
    "text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta", "tool-call-chunks": "tool-call-delta",
}


class ImportUnfaithful(SidecarError):
    """The log lacks what a faithful import needs: names the field and why, never a value."""

    code = "IMPORT_UNFAITHFUL"
    hint = "record the task through the sidecar instead (modelCassette.mode: record); docs/import.md"

    def __init__(self, field: str, reason: str, fix: str = "") -> None:
        # The fix is part of the one line: the CLI prints no hint line.
        super().__init__(f"{field}: {reason}; nothing was written; fix: {fix or self.hint}")
        self.field = field


class LogCall(msgspec.Struct, frozen=True, kw_only=True):
    """One loop ``stream()`` call: the request as ``GenerateOptions`` (no ids), its chunks and times."""

    lane: str
    position: int
    turn: int
    step: int
    request: dict[str, Any]
    chunks: list[dict[str, Any]]
    times: list[int]


class LogCalls(msgspec.Struct, frozen=True, kw_only=True):
    """Every call of a log: the answered ones (completion order) and the title calls left out."""

    cwd: str
    calls: list[LogCall]
    left_out: list[str]


def _where(index: int, event: Mapping[str, Any]) -> str:
    return f"event {index + 1} ({str(event.get('type'))[:40]})"


def _int(value: object, field: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ImportUnfaithful(field, f"{where} has no integer {field}")
    return value


def _expand(events: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """The events with each storage row expanded into its ``assistant/chunk`` events (original index kept)."""
    out: list[tuple[int, Mapping[str, Any]]] = []
    for index, event in enumerate(events):
        kind = event.get("type")
        if not isinstance(kind, str) or kind not in _ROWS:
            out.append((index, event))
            continue
        where = _where(index, event)
        data = event.get("data")
        if not isinstance(data, Mapping):
            raise ImportUnfaithful("chunks", f"{where} has no data object")
        members = data.get("args" if kind == "tool-call-chunks" else "texts")
        gaps = data.get("dt")
        # rc.8's own decoder (chunk-rows.js validateRow) refuses what this refuses.
        if (not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members)
                or not isinstance(gaps, list) or len(gaps) != len(members) - 1
                or (kind == "tool-call-chunks" and (not isinstance(data.get("id"), str)
                                                    or not isinstance(data.get("name", ""), str)))):
            raise ImportUnfaithful("chunks", f"{where} is not a storage row rc.8 writes")
        time = _int(event.get("time0"), "time0", where)
        turn, step, block = (_int(data.get(k), k, where) for k in ("turn", "step", "index"))
        for k, member in enumerate(members):
            if k:
                time += _int(gaps[k - 1], "dt", where)
            chunk: dict[str, Any]
            if kind == "tool-call-chunks":
                chunk = {"type": "tool-call-delta", "index": block, "id": data.get("id")}
                if "name" in data:
                    chunk["name"] = data["name"]
                chunk["argumentsDelta"] = member
            else:
                chunk = {"type": _ROWS[kind], "index": block, "text": member}
            out.append((index, {"type": "assistant/chunk", "time": time,
                                "data": {"turn": turn, "step": step, "chunk": chunk}}))
    return out


def _message(data: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The message a surface event carries (``user/message`` is the message itself)."""
    message = data if kind == "user/message" else data.get("message")
    return message if isinstance(message, Mapping) else {}


def _fold(surface: list[tuple[int, Mapping[str, Any]]], event: Mapping[str, Any], kind: str, where: str,
          checkpoint: tuple[object, object] | None = None) -> None:
    """Apply one surface event to ``surface`` (``(seq, message)`` nodes), as rc.8 does;
    ``checkpoint``: the range the last compaction summary replaces."""
    op = event["surfaceOp"]
    replaces = isinstance(op, Mapping) and op.get("op") == "replace"
    if op != "append" and not (replaces and (kind == "tool/result" or (
            kind == "user/message" and checkpoint == (op.get("start"), op.get("end"))))):
        raise ImportUnfaithful("compaction", f"{where} replaces earlier messages with no compaction summary "
                                             "before it; the call that made them is not in the log")
    data = event.get("data")
    seq, message = _int(event.get("seq"), "seq", where), _message(data if isinstance(data, Mapping) else {}, kind)
    if op == "append":
        surface.append((seq, message))
        return
    seqs = [node for node, _ in surface]
    start, end = op.get("start"), op.get("end")
    if start not in seqs or end not in seqs or seqs.index(start) > seqs.index(end):
        raise ImportUnfaithful("surface", f"{where} replaces a range that is not on the surface")
    surface[seqs.index(start):seqs.index(end) + 1] = [(seq, message)]


def _request(header: Mapping[str, Any] | None, surface: list[tuple[int, Mapping[str, Any]]],
             where: str) -> dict[str, Any]:
    if header is None:
        raise ImportUnfaithful("request", f"the call at {where} has no request/header before it (system prompt, "
                                          "tools and options unknown)")
    config = header.get("config")
    if not isinstance(config, Mapping) or not isinstance(config.get("provider"), str):
        raise ImportUnfaithful("request", f"the request/header before {where} names no provider route")
    request: dict[str, Any] = dict(config)
    for key in ("system", "tools"):
        if header.get(key) is not None:
            request[key] = header[key]
    request["messages"] = [{k: v for k, v in m.items() if k != "id"} for _, m in surface]
    return request


def _compaction(data: Mapping[str, Any], header: Mapping[str, Any] | None,
                surface: list[tuple[int, Mapping[str, Any]]], where: str, event: Mapping[str, Any],
                position: int) -> LogCall:
    """The summarization call a ``compaction/summary`` event stands for (``compaction.py``)."""
    shadowed, output = data.get("shadowedSeqs"), data.get("rawOutput")
    if not isinstance(shadowed, list) or not isinstance(output, list) or not output or not all(
            isinstance(b, Mapping) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in output):
        raise ImportUnfaithful("compaction", f"{where} holds no compacted seqs or no text answer (a summarizer "
                                             "other than rc.8's dsh-compaction-basic call)")
    if header is None:
        raise ImportUnfaithful("request", f"the compaction at {where} has no request/header before it")
    nodes = dict(surface)
    if not all(isinstance(seq, int) and seq in nodes for seq in shadowed):
        raise ImportUnfaithful("surface", f"{where} compacts messages that are not on the surface")
    time = _int(event.get("time"), "time", where)
    chunks = summary_chunks(output, data.get("usage"))
    return LogCall(lane=COMPACTION_LANE, position=position, turn=0, step=0,
                   request=compaction_request(data, header, [nodes[seq] for seq in shadowed]),
                   chunks=chunks, times=[time] * len(chunks))


class _Open:
    """The chunks of the call streaming in one ``(turn, step)``."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.chunks: list[dict[str, Any]] = []
        self.times: list[int] = []


def calls_of(events: Sequence[Mapping[str, Any]], *, child: bool = False) -> LogCalls:
    """Rebuild the provider calls of a decoded session log (its header first).

    Raises:
        ImportUnfaithful: the log lacks what a call needs (named), or holds what this import
            cannot carry yet (compaction, a child session, a call without ``finish``).
    """
    first = events[0] if events else {}
    if first.get("type") != "session":
        raise ImportUnfaithful("session", "the log has no session header")
    if not child and (first.get("parentSession") is not None or (first.get("delegationDepth") or 0) > 0):
        raise ImportUnfaithful("session", "a child (subagent) session; import the session that delegated")
    cwd = first.get("cwd")
    if not isinstance(cwd, str) or not cwd:
        raise ImportUnfaithful("cwd", "the session header names no working directory (the prompt's <cwd> "
                                      "cannot be placed)")
    header: Mapping[str, Any] | None = None
    surface: list[tuple[int, Mapping[str, Any]]] = []
    open_calls: dict[tuple[int, int], _Open] = {}
    calls: list[LogCall] = []
    titles = 0
    checkpoint: tuple[object, object] | None = None
    for index, event in _expand(events):
        kind = event.get("type")
        if not isinstance(kind, str):
            continue  # no event rc.8 writes: nothing a request or a stream is made of
        data = event.get("data")
        data = data if isinstance(data, Mapping) else {}
        where = _where(index, event)
        if kind == "request/header":
            found = data.get("header")
            header = found if isinstance(found, Mapping) else None
        elif kind in _SURFACE and "surfaceOp" in event:
            _fold(surface, event, kind, where, checkpoint)
            checkpoint = None
        elif kind == "compaction/summary":
            calls.append(_compaction(data, header, surface, where, event,
                                     sum(1 for c in calls if c.lane == COMPACTION_LANE)))
            shadowed = data.get("shadowedRange")
            checkpoint = (shadowed.get("start"), shadowed.get("end")) if isinstance(shadowed, Mapping) else None
        elif kind == "compaction/end" and "error" in data:
            raise ImportUnfaithful("compaction", f"{where} ends a compaction that failed; its summarization call, "
                                                 "if it was made, left no answer in the log")
        elif kind == "session/title-llm-request":
            titles += 1
        elif kind == "assistant/chunk":
            chunk = data.get("chunk")
            if not isinstance(chunk, Mapping) or not isinstance(chunk.get("type"), str):
                raise ImportUnfaithful("chunks", f"{where} holds no chunk object with a type")
            key = (_int(data.get("turn"), "turn", where), _int(data.get("step"), "step", where))
            call = open_calls.get(key)
            if call is None:
                call = open_calls[key] = _Open(_request(header, surface, where))
            call.chunks.append(dict(chunk))
            call.times.append(_int(event.get("time"), "time", where))
            if chunk["type"] == "finish":
                del open_calls[key]
                calls.append(LogCall(lane=_LOOP_LANE, position=sum(1 for c in calls if c.lane == _LOOP_LANE),
                                     turn=key[0], step=key[1], request=call.request, chunks=call.chunks,
                                     times=call.times))
    if open_calls:
        turn, step = min(open_calls)
        raise ImportUnfaithful("chunks", f"the call of turn {turn} step {step} has no finish chunk (the log ends "
                                         "mid-stream)")
    return LogCalls(cwd=cwd, calls=calls, left_out=[f"{TITLE_LANE}#{n}" for n in range(titles)])


def one_turn(events: Sequence[dict[str, Any]], turn: int | None) -> list[dict[str, Any]]:
    """The events a headless replay can answer: all of a one-turn session, or those up to the end
    of turn 1 (``turn=1``) of a session of several.

    Headless DSH answers one task in a fresh session, so a later turn, whose requests carry the
    history of the turns before it, has no replay; importing every turn of several would leave
    the later turns' calls unconsumed, which fails the replay (``MODEL_CASSETTE_UNCONSUMED``).

    Raises:
        ImportUnfaithful: several turns and no ``turn`` chosen; a turn other than the first.
    """
    turns = sorted({t for e in events if isinstance(d := e.get("data"), Mapping)
                    and isinstance(t := d.get("turn"), int) and not isinstance(t, bool)})
    if turn is None:
        if len(turns) > 1:
            raise ImportUnfaithful("turns", f"the session has {len(turns)} turns and headless DSH answers one task "
                                            "in a fresh session", "import the first turn with --turn 1")
        return list(events)
    if turn != 1 or 1 not in turns:
        raise ImportUnfaithful("turn", f"turn {turn} is not the session's first, and its requests carry the history "
                                       "of the turns before it, which a headless replay (one task) never has"
                               if turn != 1 else "the session has no turn 1", "import --turn 1")
    end = next((i for i, e in enumerate(events) if e.get("type") == "turn/end"
                and isinstance(d := e.get("data"), Mapping) and d.get("turn") == 1), len(events) - 1)
    return list(events[:end + 1])


def merged(parent: LogCalls, children: Sequence[LogCalls]) -> LogCalls:
    """A delegating session's calls and its subagents' (their own logs) in the order a replay admits
    them: the model cassette holds a transparent child's calls in the same loop lane as its
    parent's, in admission order, which a log gives as each call's first chunk time.

    Raises:
        ImportUnfaithful: a child ran in another working directory, or calls of two sessions overlap
            in time (a child in the background): their admission order is not in the logs.
    """
    if not children:
        return parent
    tagged = [(call, 0) for call in parent.calls]
    for index, child in enumerate(children, 1):
        if child.cwd != parent.cwd:
            raise ImportUnfaithful("subagents", "a child session ran in another working directory than its parent",
                                   "record the task through the sidecar (modelCassette.mode: record)")
        tagged += [(call, index) for call in child.calls]
    tagged.sort(key=lambda pair: pair[0].times[0] if pair[0].times else 0)
    for (before, was), (after, now) in itertools.pairwise(tagged):
        if was != now and before.times and after.times and after.times[0] < before.times[-1]:
            raise ImportUnfaithful("subagents", "calls of two sessions overlap in time (a subagent in the "
                                                "background); the order a replay admits them in is not in the logs",
                                   "record the task through the sidecar (modelCassette.mode: record)")
    lanes: dict[str, int] = {}
    calls = []
    for call, _ in tagged:  # positions count per lane, in the order a replay admits the calls
        calls.append(msgspec.structs.replace(call, position=lanes.get(call.lane, 0)))
        lanes[call.lane] = lanes.get(call.lane, 0) + 1
    titles = len(parent.left_out) + sum(len(child.left_out) for child in children)
    return LogCalls(cwd=parent.cwd, calls=calls, left_out=[f"{TITLE_LANE}#{n}" for n in range(titles)])

