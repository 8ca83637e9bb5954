"""DSH rc.8 session logs: where a session's log lives, how to decode it, what a turn did.

Pure functions over bytes and decoded events. The path rule is rc.8's own
(``dsh-session-persistence-jsonl``): ``<root>/--<project key of cwd>--/<encoded id>/session.jsonl``
with ``.zstd`` appended when compressed (concatenated zstd frames). Knowing the session id and
the cwd, a log is found with one path computation, however many sessions the folder holds.

A log is read under the cassette readers' rules: a line nested deeper than ``MAX_DEPTH`` is
refused before any decoder recurses into it, a lone surrogate (which no UTF-8 output can hold)
is refused by name, and the records the summary reads (the ``session`` header, ``mock/status``)
must have their shapes. Whatever a log holds, decoding it either gives events every reader here
can summarize and print, or raises ``SessionLogInvalid`` naming the line and the rule.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from dsh_sidecar.python_core.canonical import DEPTH_REASON, too_deep
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.session_bytes import LogBytesInvalid, session_text
from dsh_sidecar.python_core.session_records import MockStatus

__all__ = [
    "LOG_NAMES",
    "SessionLogInvalid",
    "SessionSummary",
    "SessionToolCall",
    "SessionToolResult",
    "decode_session_log",
    "encode_segment",
    "final_text",
    "mock_statuses",
    "project_key",
    "read_session_log",
    "session_log_candidates",
    "summarize",
    "tool_calls",
    "tool_results",
]

_SAFE: Final = re.compile(r"[A-Za-z0-9._-]")
_SEPARATORS: Final = frozenset("/\\:")
LOG_NAMES: Final = ("session.jsonl.zstd", "session.jsonl")


def _utf16_units(text: str) -> Iterable[int]:
    # rc.8 walks JavaScript strings by UTF-16 code unit (charCodeAt).
    data = text.encode("utf-16-le", "surrogatepass")
    for i in range(0, len(data), 2):
        yield data[i] | (data[i + 1] << 8)


def _escape(unit: int) -> str:
    return "~" + format(unit, "04X")


def encode_segment(raw: str) -> str:
    """Encode one path segment (a session id) the way rc.8 does: ``~XXXX`` for unsafe units."""
    if not raw:
        raise ValueError("cannot encode an empty path segment")
    if raw == ".":
        return "~002E"
    if raw == "..":
        return "~002E~002E"
    out = []
    for unit in _utf16_units(raw):
        ch = chr(unit)
        out.append(ch if unit < 0x80 and _SAFE.fullmatch(ch) else _escape(unit))
    return "".join(out)


def project_key(cwd: str) -> str:
    """The directory name rc.8 groups a cwd's sessions under (``--tmp-work--`` for ``/tmp/work``)."""
    if not cwd:
        raise ValueError("cannot encode an empty project path")
    readable = []
    separator_run = False
    for unit in _utf16_units(cwd):
        ch = chr(unit)
        if ch in _SEPARATORS:
            if not separator_run:
                readable.append("-")
            separator_run = True
            continue
        readable.append(ch if unit < 0x80 and _SAFE.fullmatch(ch) else _escape(unit))
        separator_run = False
    key = "".join(readable).lstrip("-") or "root"
    return f"--{key[:251]}--"


def session_log_candidates(sessions_root: str, cwd: str, session_id: str) -> list[str]:
    """The paths a session's log can have (compressed first); no directory is listed."""
    folder = os.path.join(sessions_root, project_key(cwd), encode_segment(session_id))
    return [os.path.join(folder, name) for name in LOG_NAMES]


class SessionLogInvalid(SidecarError):
    """A session log that is not one rc.8 wrote whole: names the log and line, never its content."""

    code = "SESSION_LOG_INVALID"

    def __init__(self, source: str, reason: str, line: int | None = None) -> None:
        super().__init__(f"{source if line is None else f'{source}:{line}'}: {reason}")
        self.source = source
        self.reason = reason
        self.line = line


class _Header(msgspec.Struct):
    """The header members the summary reads (rc.8 writes more)."""

    id: str = ""
    cwd: str | None = None
    createdAt: int | None = None
    delegationDepth: int | None = 0


_EVENT: Final = msgspec.json.Decoder()
_STATUS: Final = "mock/status"


def _shape_reason(exc: msgspec.ValidationError) -> str:
    # msgspec names the rule and the place (``Expected `str`, got `int` - at `$.state```), never
    # the value; the place is made relative to the event.
    return str(exc).replace("`$", "`$.data", 1)


def _undecodable(raw: bytes) -> str:
    """Why msgspec refused a line within the depth limit: a lone surrogate, a number, or not JSON."""
    try:
        value = json.loads(raw)
    except ValueError:
        return "not valid JSON"
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "lone surrogate in a string or object key"
    return "number out of range"


def _event(raw: bytes, source: str, number: int) -> dict[str, Any]:
    """Decode and check one line (``number`` is 1-based)."""
    if too_deep(raw):
        raise SessionLogInvalid(source, DEPTH_REASON, number)
    try:
        event = _EVENT.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        raise SessionLogInvalid(source, _undecodable(raw), number) from None
    if not isinstance(event, dict):
        raise SessionLogInvalid(source, "not a JSON object", number)
    kind = event.get("type")
    try:
        if kind == "session":
            msgspec.convert(event, _Header)
        elif kind == _STATUS:
            msgspec.convert(event.get("data"), MockStatus)
    except msgspec.ValidationError as exc:
        what, reason = ("header", str(exc)) if kind == "session" else ("mock/status record", _shape_reason(exc))
        raise SessionLogInvalid(source, f"malformed {what}: {reason}", number) from None
    return event


def decode_session_log(data: bytes, *, source: str = "session log") -> list[dict[str, Any]]:
    """Decode a session log (plain JSONL or concatenated zstd frames) into its events.

    Raises:
        SessionLogInvalid: a corrupt or truncated zstd stream, a line that is not a JSON object,
            nested too deep, holding a lone surrogate, or a header or ``mock/status`` record of
            the wrong shape.
    """
    try:
        _, text = session_text(data)
    except LogBytesInvalid as exc:
        raise SessionLogInvalid(source, exc.reason, exc.line) from None
    return [_event(raw, source, number) for number, raw in enumerate(text.split(b"\n"), 1) if raw.strip()]


def read_session_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read and decode the session log at ``path``."""
    with open(path, "rb") as handle:
        return decode_session_log(handle.read(), source=os.path.basename(path))


class SessionToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call the model made, as the session logged it."""

    call_id: str
    tool: str
    arguments: Any
    turn: int | None = None
    step: int | None = None


class SessionToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """A tool result the model saw: its rendered text and, on failure, the runtime's code."""

    call_id: str
    is_error: bool
    output: str
    error_code: str | None = None
    error_message: str | None = None


def _data(event: Mapping[str, Any]) -> Mapping[str, Any]:
    data = event.get("data")
    return data if isinstance(data, Mapping) else {}


def _of_type(events: Sequence[Mapping[str, Any]], kind: str) -> Iterable[Mapping[str, Any]]:
    return (_data(e) for e in events if e.get("type") == kind)


def _arguments(text: object) -> Any:
    """Arguments decoded from their JSON text; the text itself when it is not JSON under the log's rules."""
    if not isinstance(text, str) or too_deep(text):
        return text
    try:
        return _EVENT.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return text


def tool_calls(events: Sequence[Mapping[str, Any]]) -> list[SessionToolCall]:
    """The ``tool/call`` events, in order, with arguments decoded from their JSON text."""
    return [
        SessionToolCall(
            call_id=str(d.get("callId", "")), tool=str(d.get("name", "")), arguments=_arguments(d.get("arguments")),
            turn=d.get("turn"), step=d.get("step"),
        )
        for d in _of_type(events, "tool/call")
    ]


def _text(parts: object) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text")


def tool_results(events: Sequence[Mapping[str, Any]]) -> list[SessionToolResult]:
    """The ``tool/result`` events, in order: text output, error flag, runtime error code."""
    results = []
    for d in _of_type(events, "tool/result"):
        error = d.get("error")
        error = error if isinstance(error, Mapping) else {}
        message = d.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, Mapping) or block.get("type") != "tool-result":
                continue
            results.append(SessionToolResult(
                call_id=str(block.get("toolCallId", "")), is_error=bool(block.get("isError", False)),
                output=_text(block.get("content")),
                error_code=error.get("code") if isinstance(error.get("code"), str) else None,
                error_message=error.get("message") if isinstance(error.get("message"), str) else None,
            ))
    return results


def final_text(events: Sequence[Mapping[str, Any]]) -> str:
    """The last non-empty assistant text of the log (what the headless runner prints)."""
    last = ""
    for d in _of_type(events, "assistant/message"):
        message = d.get("message")
        if isinstance(message, Mapping):
            text = _text(message.get("content"))
            if text.strip():
                last = text
    return last


def mock_statuses(events: Sequence[Mapping[str, Any]]) -> list[MockStatus]:
    """The ``mock/status`` records of the log, in order, as typed values (checked by the decoder)."""
    return [msgspec.convert(d, MockStatus) for d in _of_type(events, _STATUS)]


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One session at a glance: identity, the first task, how its turns ended, what ran."""

    session_id: str
    created_at: int | None
    cwd: str | None
    delegation_depth: int
    task: str
    turns: int
    end_reasons: list[str]
    tool_calls: int
    tool_errors: int
    mock_state: str | None
    final_text: str


def _first_user_text(events: Sequence[Mapping[str, Any]]) -> str:
    for d in _of_type(events, "user/message"):
        source = d.get("source")
        if isinstance(source, Mapping) and source.get("kind") == "user":
            return _text(d.get("content"))
    return ""


def summarize(events: Sequence[Mapping[str, Any]]) -> SessionSummary:
    """Summarize a decoded session log (the header is its first event)."""
    first: Mapping[str, Any] = events[0] if events and events[0].get("type") == "session" else {}
    header = msgspec.convert(first, _Header)
    ends = []
    for d in _of_type(events, "turn/end"):
        reason = d.get("reason")
        ends.append(str(reason.get("kind")) if isinstance(reason, Mapping) else "unknown")
    statuses = mock_statuses(events)
    results = tool_results(events)
    return SessionSummary(
        session_id=header.id, created_at=header.createdAt, cwd=header.cwd,
        delegation_depth=header.delegationDepth or 0, task=_first_user_text(events),
        turns=sum(1 for e in events if e.get("type") == "turn/start"), end_reasons=ends,
        tool_calls=len(tool_calls(events)), tool_errors=sum(1 for r in results if r.is_error),
        mock_state=statuses[-1].state if statuses else None, final_text=final_text(events),
    )
