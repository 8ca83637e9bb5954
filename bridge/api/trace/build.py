"""A run's trace: its session log, its hook log and its cassettes, joined per call and per step.

The session log says what happened (model steps, tool calls, the outputs the model saw, child
sessions); the hook log says where each answer came from (served, recorded, live, stub, fault,
refused) and holds a model mismatch's request views; the cassette files hold the recorded side
of a tool mismatch and the records a replay never asked for. Nothing here runs during the turn:
a trace is built after it, so a test that keeps no trace pays only for the hook log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from dsh_sidecar.bridge.api.trace.document import (
    Call,
    Cassette,
    Event,
    Mismatch,
    ModelStep,
    PointerValues,
    Run,
    Subagent,
    Unconsumed,
)
from dsh_sidecar.bridge.api.trace.redact import Redactor
from dsh_sidecar.bridge.api.types import RunResult
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.json_pointers import differing_pointers, parse_pointer
from dsh_sidecar.python_core.session_log import SessionLogInvalid, read_session_log
from dsh_sidecar.python_core.tool_cassette.store import load as load_tool_cassette

__all__ = ["RunSources", "build_run", "pointer_values", "read_hook_log", "steps_and_calls"]

_ORDINAL = re.compile(r" at (\S+), ordinal (\d+)")
_MESSAGE = re.compile(r"^message (\d+) ")
_TOOL = re.compile(r"^tool (.+) (?:missing|added|definition differs)$")
_OPTION = re.compile(r"^option (\S+) ")
_TOOL_MISSES = frozenset({"CASSETTE_MISMATCH", "CASSETTE_EXTRA_CALL"})
_LEAVES = 20  # differing leaves shown per request part; the part itself is shown whole
_WARNING = re.compile(r"^dsh-sidecar: (?:warning: )?([A-Z][A-Z0-9_]+): (.+)$")


@dataclass
class RunSources:
    """What a run leaves for its trace (kept by the run API when a trace is asked for)."""

    result: RunResult
    hooks: list[dict[str, Any]]
    label: str
    cassette_files: dict[str, Path] = field(default_factory=dict)
    """Each cassette's file by kind (``tool``, ``model``, ``subagent``), absolute."""
    redactor: Redactor = field(default_factory=Redactor)


def read_hook_log(path: Path) -> list[dict[str, Any]]:
    """The hook log's lines (a line cut short by a killed run is skipped)."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    lines: list[dict[str, Any]] = []
    for raw in data.splitlines():
        try:
            line = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
        if isinstance(line, dict):
            lines.append(line)
    return lines


def _int(value: object) -> int | None:
    """A log's number field, or nothing (a log is read as it is, never trusted for types)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _ms(event: Mapping[str, Any], start: int | None) -> int | None:
    at = _int(event.get("time"))
    return at - start if at is not None and start is not None else None


def _data(event: Mapping[str, Any]) -> Mapping[str, Any]:
    data = event.get("data")
    return data if isinstance(data, Mapping) else {}


def _arguments(text: object) -> object:
    if not isinstance(text, str):
        return text
    try:
        return msgspec.json.decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):  # not JSON, or a lone surrogate: the text as is
        return text


def _result_text(message: Mapping[str, Any]) -> tuple[str, bool]:
    """The text a tool result message shows the model, and whether it is an error."""
    texts: list[str] = []
    error = False
    for part in _list(message.get("content")):
        if not isinstance(part, Mapping) or part.get("type") != "tool-result":
            continue
        error = error or part.get("isError") is True
        for inner in _list(part.get("content")):
            if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
                texts.append(inner["text"])
    return "\n".join(texts), error


def steps_and_calls(events: Sequence[Mapping[str, Any]], session: str, redactor: Redactor
                    ) -> tuple[list[ModelStep], list[Call], list[Event], int | None]:
    """A session log's model steps, tool calls and timeline (values redacted), and its start time."""
    events = [e for e in events if isinstance(e, Mapping)]
    created = _int(events[0].get("createdAt")) if events else None
    start = created if created is not None else next(
        (e["time"] for e in events if _int(e.get("time")) is not None), None)
    steps: dict[tuple[Any, Any], ModelStep] = {}
    calls: dict[str, Call] = {}
    timeline: list[Event] = []
    for event in events:
        kind = event.get("type")
        data = _data(event)
        at = _ms(event, start)
        if kind == "assistant/chunk":
            key = (_int(data.get("turn")), _int(data.get("step")))
            step = steps.get(key)
            if step is None:
                step = steps[key] = ModelStep(session=session, turn=key[0], step=key[1], at_ms=at)
                timeline.append(Event(kind="model", label=f"model step {key[0]}.{key[1]}", session=session, at_ms=at,
                                      ref=f"{session}#{key[0]}.{key[1]}"))
            if at is not None and step.at_ms is not None:
                step.duration_ms = at - step.at_ms
            _chunk(step, data.get("chunk"), redactor)
        elif kind == "tool/call":
            call_id = str(data.get("callId", ""))
            tool = str(data.get("name", ""))
            args = redactor.value(_arguments(data.get("arguments")), tool=tool, where="args")
            calls[call_id] = Call(id=call_id, tool=tool, session=session, args=args, turn=_int(data.get("turn")),
                                  step=_int(data.get("step")), at_ms=at)
            timeline.append(Event(kind="tool", label=tool, session=session, at_ms=at, ref=call_id))
        elif kind == "tool/result":
            message = data.get("message")
            if not isinstance(message, Mapping):
                continue
            source = message.get("source")
            call_id = str(source.get("callId", "")) if isinstance(source, Mapping) else ""
            text, is_error = _result_text(message)
            found = calls.get(call_id)
            if found is None:
                continue
            found.output = redactor.text(text, tool=found.tool, where="result")
            found.is_error = is_error
            error = data.get("error")
            if isinstance(error, Mapping):
                found.error = _str(error.get("code"))
            if at is not None and found.at_ms is not None:
                found.duration_ms = at - found.at_ms
        elif kind in ("turn/start", "turn/end"):
            reason = data.get("reason")
            why = ""
            if isinstance(reason, Mapping):
                why = str(reason.get("kind", ""))
                error = reason.get("error")
                if isinstance(error, Mapping) and error.get("code"):
                    why += f" {error['code']}"
            label = f"turn {data.get('turn')} {'starts' if kind == 'turn/start' else 'ends'}" + (
                f": {why}" if why else "")
            timeline.append(Event(kind="turn", label=label, session=session, at_ms=at))
        elif kind == "mock/status":
            state = data.get("state")
            code = data.get("error_code")
            label = f"mock {state} (steps {data.get('steps_completed')}/{data.get('step_count')})" + (
                f" {code}" if code else "")
            timeline.append(Event(kind="mock", label=label, session=session, at_ms=at))
        elif kind == "session/title":
            timeline.append(Event(kind="title", label="session title set", session=session, at_ms=at))
    return list(steps.values()), list(calls.values()), timeline, start


def _chunk(step: ModelStep, chunk: object, redactor: Redactor) -> None:
    if not isinstance(chunk, Mapping):
        return
    kind = chunk.get("type")
    if kind == "block-end":
        block = chunk.get("block")
        if not isinstance(block, Mapping):
            return
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            step.text += str(redactor.model(block["text"]))
        elif block.get("type") == "reasoning" and isinstance(block.get("text"), str):
            step.reasoning += str(redactor.model(block["text"]))
        elif block.get("type") == "tool-call":
            step.tool_calls.append(str(block.get("id", "")))
    elif kind == "usage" and isinstance(chunk.get("usage"), Mapping):
        step.usage = dict(chunk["usage"])
    elif kind == "finish":
        reason = chunk.get("reason")
        if isinstance(reason, Mapping):
            step.finish = str(reason.get("kind", ""))
            failure = reason.get("failure")
            if isinstance(failure, Mapping) and isinstance(failure.get("code"), str):
                step.error = failure["code"]


def _sources(calls: Iterable[Call], steps: Sequence[ModelStep], hooks: Sequence[Mapping[str, Any]],
             stood_up: Sequence[str], model_mode: str | None) -> None:
    """Where each call's answer and each loop step came from, from the hook log."""
    executed = {h["callId"]: h for h in hooks if h.get("method") == "tools/execute" and _str(h.get("callId"))}
    for call in calls:
        line = executed.get(call.id)
        if line is None:
            continue
        source = str(line.get("source", "unknown"))
        if source == "served" and line.get("fault"):
            source = "fault"
        elif source == "served" and call.tool in stood_up:
            source = "stood-up"
        call.source = source  # type: ignore[assignment]
        call.ordinal = _int(line.get("ordinal"))
        call.fault = _str(line.get("fault"))
    # The loop lane's requests reach the hooks in step order, per session.
    requests: dict[str | None, list[Mapping[str, Any]]] = {}
    for h in hooks:
        if h.get("method") == "model/request" and h.get("purpose") is None:
            requests.setdefault(_str(h.get("session")), []).append(h)
        elif h.get("method") == "llm/stream" and h.get("purpose") is None:
            requests.setdefault(_str(h.get("session")), []).append({"action": "mock"})
    position: dict[str, int] = {}
    for step in steps:
        index = position.get(step.session, 0)
        position[step.session] = index + 1
        lines = requests.get(step.session) or requests.get(None) or []
        if index >= len(lines):
            continue
        action = lines[index].get("action")
        step.position = index
        step.source = {"mock": "mock", "replay": "cassette", "refuse": "refused"}.get(  # type: ignore[assignment]
            str(action), "recorded" if model_mode == "record" else "live")


def pointer_values(recorded: object, live: object) -> list[PointerValues]:
    """Each JSON pointer where ``live`` differs from ``recorded``, with the value on each side."""
    return [PointerValues(pointer=c.pointer, change=c.kind, recorded=_at(recorded, c.pointer),
                          live=_at(live, c.pointer)) for c in differing_pointers(recorded, live)]


def _at(value: object, pointer: str) -> object:
    for token in parse_pointer(pointer):
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return None
    return value


def build_run(sources: RunSources) -> Run:
    """The trace of one run."""
    result, redactor = sources.result, sources.redactor
    session = result.session_id or "-"
    steps, calls, timeline, _ = steps_and_calls(result.events, session, redactor)
    values = {r.call_id: r for r in result.tool_results}
    for call in calls:
        seen = values.get(call.id)
        if seen is not None:
            call.path = seen.path
            if seen.value is not None:
                call.value = redactor.value(seen.value, tool=call.tool, where="result")
    summary = result.tool_cassette
    model_mode = result.model_cassette.mode if result.model_cassette is not None else None
    _sources(calls, steps, sources.hooks, summary.stood_up if summary is not None else (), model_mode)
    run = Run(label=sources.label, task=str(redactor.model(result.task)), session=result.session_id,
              exit_code=result.exit_code, timed_out=result.timed_out, duration_ms=result.duration_ms,
              final_text=str(redactor.model(result.final_text)), calls=calls, steps=steps, events=timeline)
    run.errors = [{"code": e.code, "message": e.message} for e in result.errors]
    known = {e.code for e in result.errors}
    run.warnings = [f"{m[1]}: {m[2]}" for line in result.stderr.splitlines()
                    if (m := _WARNING.match(line)) is not None and m[1] not in known and m[1] != "fix"]
    for s in (result.tool_cassette, result.model_cassette, result.subagent_cassette):
        if s is not None:
            counters = {k: v for k, v in msgspec.structs.asdict(s).items()
                        if k not in ("kind", "file", "mode", "record_mode") and v not in (0, False, None, [])}
            run.cassettes.append(Cassette(kind=s.kind, file=s.file, mode=s.mode, counters=counters))
    for child in result.child_session_ids:
        run.subagents.append(_child(result.session_path, child, redactor, sources.hooks))
    summary_unconsumed = summary is not None and summary.mode == "replay" and summary.unconsumed > 0
    # The cassette file is read once, and only when a tool mismatch or an unconsumed record needs it.
    wanted = summary_unconsumed or any(e.code in _TOOL_MISSES for e in result.errors)
    records = _recorded_tool_calls(sources) if wanted else None
    _mismatches(run, sources, records)
    if summary_unconsumed and records is not None:
        _unconsumed(run, sources, records)
    for error in run.errors:
        # The run's errors close its timeline; a call's own error sits on the call.
        run.events.append(Event(kind="error", label=f"{error['code']}: {error['message']}", session=session,
                                ref=_call_of(run.calls, error["code"])))
    for warning in run.warnings:
        # A divergence names the call's path (``grep at root/2 ...``): the warning sits under it.
        named = next((c.id for c in run.calls if c.path and f" at {c.path}" in warning), None)
        run.events.append(Event(kind="warning", label=warning, session=session, ref=named))
    return run


def _call_of(calls: Sequence[Call], code: str) -> str | None:
    return next((c.id for c in calls if c.error == code), None)


def _child(parent_log: str | None, child: str, redactor: Redactor, hooks: Sequence[Mapping[str, Any]]) -> Subagent:
    """A child session's calls and steps, from its log beside the parent's."""
    if parent_log is None:
        return Subagent(session=child)
    folder = Path(parent_log).parent.parent / child
    for name in ("session.jsonl", "session.jsonl.zstd"):
        try:
            events = read_session_log(folder / name)
        except (OSError, SessionLogInvalid):
            continue
        steps, calls, _, _ = steps_and_calls(events, child, redactor)
        _sources(calls, steps, hooks, (), None)
        first = next((e for e in events if e.get("type") == "user/message"), None)
        task = ""
        if first is not None:
            content = _data(first).get("content") or ()
            task = " ".join(p.get("text", "") for p in content if isinstance(p, Mapping))
        final = next((s.text for s in reversed(steps) if s.text), "")
        return Subagent(session=child, task=str(redactor.model(task)), final_text=final, calls=calls, steps=steps)
    return Subagent(session=child)


def _recorded_tool_calls(sources: RunSources) -> list[Any] | None:
    path = sources.cassette_files.get("tool")
    if path is None or not path.is_file():
        return None
    try:
        return list(load_tool_cassette(str(path)).calls)
    except (SidecarError, OSError):
        return None


def _mismatches(run: Run, sources: RunSources, records: Sequence[Any] | None) -> None:
    redactor = sources.redactor
    for error in sources.result.errors:
        if error.code == "CASSETTE_MISMATCH":
            found = _ORDINAL.search(error.message)
            tool = error.message.split(" at ", 1)[0]
            mismatch = Mismatch(kind="tool", code=error.code, message=error.message,
                                where=f"{tool} at {found[1]}, ordinal {found[2]}" if found else tool)
            call = next((c for c in run.calls if c.error == error.code and c.tool == tool), None)
            if call is not None:
                mismatch.call_id = call.id
                mismatch.live = call.args
            if found is not None and records is not None and int(found[2]) < len(records):
                record = records[int(found[2])]
                mismatch.recorded = redactor.value(msgspec.json.decode(record.args), tool=record.tool, where="args")
            if mismatch.recorded is not None and mismatch.live is not None:
                mismatch.pointers = pointer_values(mismatch.recorded, mismatch.live)
            elif mismatch.recorded is None:
                mismatch.note = "the recorded call could not be read from the cassette file"
            run.mismatches.append(mismatch)
        elif error.code == "CASSETTE_EXTRA_CALL":
            run.mismatches.append(_near_miss(error.code, error.message, run.calls, records or [], redactor))
    for line in sources.hooks:
        if line.get("method") != "model/mismatch":
            continue
        code = "MODEL_CASSETTE_MISMATCH"
        message = next((e.message for e in sources.result.errors if e.code == code), "")
        live, recorded = redactor.model(line.get("live")), redactor.model(line.get("recorded"))
        differences = [str(d) for d in _list(line.get("differences"))]
        mismatch = Mismatch(kind="model", code=code, message=message,
                            where=f"model call {line.get('lane')}#{line.get('position')}", differences=differences)
        for difference in differences:
            pointer = _part(difference, live, recorded)
            if pointer is None:
                continue
            was, now = _scalar(line.get("recorded"), recorded, pointer), _scalar(line.get("live"), live, pointer)
            mismatch.pointers.append(PointerValues(pointer=pointer, change=difference, recorded=was, live=now))
            if was is not None and now is not None:
                # Within the part, each leaf that differs (the word of a prompt that changed).
                mismatch.pointers += [msgspec.structs.replace(p, pointer=pointer + p.pointer)
                                      for p in pointer_values(was, now)[:_LEAVES]]
        if recorded is None:
            mismatch.note = ("the cassette keeps request digests only (requestView: metadata); "
                             "record it with requestView: full to see the recorded texts")
        run.mismatches.append(mismatch)


def _scalar(raw: object, redacted: object, pointer: str) -> object:
    """The value at ``pointer``: a number or a boolean as it is (the credential filter hides keys
    like ``maxTokens``, and no secret is a number), anything else as filtered."""
    value = _at(raw, pointer)
    return value if isinstance(value, int | float) else _at(redacted, pointer)


def _near_miss(code: str, message: str, calls: Sequence[Call], records: Sequence[Any], redactor: Redactor
               ) -> Mismatch:
    """An extra call beside the recorded call of its tool that it is closest to (fewest differing
    pointers), as WireMock's near-miss table shows the closest stub beside a request."""
    tool = message.split(" at ", 1)[0]
    found = _ORDINAL.search(message)
    mismatch = Mismatch(kind="tool", code=code, message=message,
                        where=f"{tool} at {found[1]}, ordinal {found[2]}" if found else tool)
    call = next((c for c in calls if c.error == code and c.tool == tool), None)
    if call is None:
        return mismatch
    mismatch.call_id, mismatch.live = call.id, call.args
    best: tuple[int, int, Any] | None = None
    for record in records:
        if record.tool != tool:
            continue
        args = redactor.value(msgspec.json.decode(record.args), tool=tool, where="args")
        distance = len(differing_pointers(args, call.args))
        if best is None or distance < best[0]:
            best = (distance, record.ordinal, args)
    if best is None:
        mismatch.note = f"the cassette holds no call of {tool}"
        return mismatch
    mismatch.recorded = best[2]
    mismatch.pointers = pointer_values(best[2], call.args)
    mismatch.note = f"beside it, the closest recorded call of {tool}: ordinal {best[1]}"
    return mismatch


def _part(difference: str, live: object, recorded: object) -> str | None:
    """The request view's pointer that a model mismatch's difference names."""
    if difference.startswith("system prompt"):
        return "/system"
    if (m := _MESSAGE.match(difference)) is not None:
        return f"/messages/{m[1]}"
    if (m := _OPTION.match(difference)) is not None:
        return f"/options/{m[1]}"
    if (m := _TOOL.match(difference)) is not None:
        for view in (live, recorded):
            tools = view.get("tools") if isinstance(view, dict) else None
            for index, tool in enumerate(tools if isinstance(tools, list) else ()):
                if isinstance(tool, dict) and tool.get("name") == m[1]:
                    return f"/tools/{index}"
    return None


def _unconsumed(run: Run, sources: RunSources, records: Sequence[Any]) -> None:
    served = {_int(h.get("ordinal")) for h in sources.hooks if h.get("method") == "tools/execute" and h.get("source")
              in ("served", "fault")}
    for record in records:
        if record.ordinal not in served:
            args = sources.redactor.value(msgspec.json.decode(record.args), tool=record.tool, where="args")
            run.unconsumed.append(Unconsumed(kind="tool", where=f"{record.tool} at {record.path}",
                                             ordinal=record.ordinal, tool=record.tool, args=args))
