"""``dsh-sidecar show FILE``: a cassette (tool, model, subagent) or a session log as a trace run,
and two recordings of one kind aligned by position (``--against``).

The files are read with the loaders replay uses, so a broken file is refused with the same named,
structural error; their values pass the same filters a trace applies (credentials always).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import msgspec

from dsh_sidecar.bridge.api.trace.build import pointer_values, steps_and_calls
from dsh_sidecar.bridge.api.trace.document import Call, Comparison, ModelStep, Pair, Run
from dsh_sidecar.bridge.api.trace.redact import Redactor
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.model_cassette.store import load as load_model
from dsh_sidecar.python_core.session_log import read_session_log, summarize
from dsh_sidecar.python_core.subagent_cassette.store import load as load_subagent
from dsh_sidecar.python_core.tool_cassette.format import ResultFrame
from dsh_sidecar.python_core.tool_cassette.store import load as load_tool

__all__ = ["FileKind", "ShowUnreadable", "align", "file_kind", "run_of", "shown_name"]

FileKind = Literal["tool", "model", "subagent", "session"]
_GIVE = "; give a tool, model or subagent cassette (.ndjson) or a session log (session.jsonl[.zstd])"


class ShowUnreadable(SidecarError):
    """``show`` was given a file that is none of the kinds it renders."""

    code = "SHOW_UNREADABLE"


def file_kind(path: Path) -> FileKind:
    """What ``path`` holds, from its first line.

    Raises:
        ShowUnreadable: it cannot be read, or its first line is no known header.
    """
    if path.name.endswith(".zstd"):
        return "session"
    try:
        with open(path, "rb") as file:
            first = file.readline(1 << 20)
    except OSError as exc:
        raise ShowUnreadable(f"{path.name}: cannot be read ({exc.strerror or type(exc).__name__}){_GIVE}") from None
    try:
        header = msgspec.json.decode(first)
    except msgspec.DecodeError:
        header = None
    if isinstance(header, dict):
        if header.get("type") == "session":
            return "session"
        if header.get("kind") == "cassette/header":
            return "subagent"
        if header.get("kind") == "header" and header.get("protocol") == "dsh-model-cassette":
            return "model"
        if header.get("kind") == "header":
            return "tool"
    raise ShowUnreadable(f"{path.name}:1: not a cassette header or a session log's first line{_GIVE}")


def run_of(path: Path, redactor: Redactor) -> tuple[FileKind, Run]:
    """The file as one trace run.

    Raises:
        ShowUnreadable: not a known kind.
        SidecarError: the loader refused it (the named structural error replay would give).
    """
    kind = file_kind(path)
    label = f"{kind} {'log' if kind == 'session' else 'cassette'} {path.name}"
    if kind == "tool":
        cassette = load_tool(str(path))
        calls = [_tool_call(c.ordinal, c.tool, c.path, c.args, c.result, redactor) for c in cassette.calls]
        return kind, Run(label=label, calls=calls)
    if kind == "model":
        model = load_model(str(path))
        steps = []
        for frame in model.calls:
            step = ModelStep(session=path.name, lane=frame.lane, position=frame.position, source="cassette",
                             turn=frame.ordinal, step=frame.position, finish=frame.finish)
            _chunks(step, msgspec.json.decode(frame.chunks), redactor)
            steps.append(step)
        return kind, Run(label=label, steps=steps)
    if kind == "subagent":
        subagents = load_subagent(path)
        calls = []
        for interaction in subagents.interactions:
            request = msgspec.to_builtins(interaction.request)
            outcome = msgspec.to_builtins(interaction.outcome)
            calls.append(Call(id=interaction.callKey, tool="subagent", session=path.name, source="recorded",
                              ordinal=interaction.sequence, args=redactor.model(request),
                              output=msgspec.json.encode(redactor.model(outcome)).decode(),
                              is_error=outcome.get("kind") != "result",
                              duration_ms=round(interaction.timing.durationMs)))
        return kind, Run(label=label, calls=calls)
    events = read_session_log(path)
    summary = summarize(events)
    steps, calls, timeline, _ = steps_and_calls(events, summary.session_id, redactor)
    return kind, Run(label=label, task=str(redactor.model(summary.task)), session=summary.session_id,
                     final_text=str(redactor.model(summary.final_text)), steps=steps, calls=calls, events=timeline)


def _tool_call(ordinal: int, tool: str, path: str, args: msgspec.Raw, result: ResultFrame, redactor: Redactor) -> Call:
    value = None if result.value is msgspec.UNSET else msgspec.json.decode(result.value)
    output = None
    if result.content is not msgspec.UNSET:
        content = msgspec.json.decode(result.content)
        texts = [p.get("text", "") for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        output = redactor.text("\n".join(texts), tool=tool, where="result")
    info = None if result.error is msgspec.UNSET else result.error.info
    return Call(id=f"#{ordinal}", tool=tool, session="cassette", path=path, ordinal=ordinal, source="recorded",
                args=redactor.value(msgspec.json.decode(args), tool=tool, where="args"),
                value=None if value is None else redactor.value(value, tool=tool, where="result"),
                output=output, is_error=result.isError,
                error=None if info is None or info is msgspec.UNSET else info.code)


def _chunks(step: ModelStep, chunks: object, redactor: Redactor) -> None:
    for chunk in chunks if isinstance(chunks, list) else ():
        if not isinstance(chunk, dict):
            continue
        block = chunk.get("block")
        if chunk.get("type") == "block-end" and isinstance(block, dict):
            if block.get("type") == "text":
                step.text += str(redactor.model(block.get("text", "")))
            elif block.get("type") == "reasoning":
                step.reasoning += str(redactor.model(block.get("text", "")))
            elif block.get("type") == "tool-call":
                step.tool_calls.append(f"{block.get('name', '')} {redactor.model(block.get('arguments', ''))}")
        elif chunk.get("type") == "usage" and isinstance(chunk.get("usage"), dict):
            step.usage = chunk["usage"]
        elif chunk.get("type") == "finish" and isinstance(chunk.get("reason"), dict):
            failure = chunk["reason"].get("failure")
            if isinstance(failure, dict) and isinstance(failure.get("code"), str):
                step.error = failure["code"]


def _items(kind: FileKind, run: Run) -> list[tuple[str, dict[str, Any]]]:
    """Each position of a file with what identifies and answers it."""
    if kind == "model":
        return [(f"model call {s.lane}#{s.position}", {"text": s.text, "reasoning": s.reasoning, "finish": s.finish,
                                                       "toolCalls": s.tool_calls, "error": s.error})
                for s in run.steps]
    return [(f"{c.tool} at {c.path}, ordinal {c.ordinal}" if kind == "tool" else f"{c.tool} {index}",
             {"tool": c.tool, "args": c.args, "isError": c.is_error, "error": c.error,
              "value": c.value, "output": c.output})
            for index, c in enumerate(run.calls)]


def align(kind: FileKind, a: Run, b: Run, names: tuple[str, str]) -> Comparison:
    """``a`` and ``b`` position by position: what B changed against A, with both values."""
    left, right = _items(kind, a), _items(kind, b)
    pairs = []
    for index in range(max(len(left), len(right))):
        if index >= len(right):
            pairs.append(Pair(where=left[index][0], status="only-a", a=left[index][1]))
        elif index >= len(left):
            pairs.append(Pair(where=right[index][0], status="only-b", b=right[index][1]))
        else:
            pointers = pointer_values(left[index][1], right[index][1])
            where = left[index][0] if left[index][0] == right[index][0] else f"{left[index][0]} / {right[index][0]}"
            pairs.append(Pair(where=where, status="changed" if pointers else "same", a=left[index][1],
                              b=right[index][1], pointers=pointers))
    return Comparison(a=names[0], b=names[1], pairs=pairs)


def shown_name(path: Path) -> str:
    """A file's name as a page shows it: relative to this folder when below it."""
    relative = os.path.relpath(path)
    return path.name if relative.startswith("..") else relative
