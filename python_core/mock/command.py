"""The strict ``/mock`` command grammar (docs/mock.md, "Command grammar").

Rule: the parser checks command shape and JSON syntax only; tool existence and argument
schemas belong to the real DSH runtime. Grammar (``ws`` is ASCII space, tab, CR or LF)::

    command  = "/mock" ws+ ( run | replay ) ws*
    run      = "run" ws+ ( call | "[" ws* call ( ws+ call )* ws* "]" )
    call     = NAME "(" ws* JSON_OBJECT ws* ")"          NAME: 1-64 of A-Z a-z 0-9 _ -
    replay   = "replay" ws+ PATH [ ws+ "--overwrite-wait-time-ms" ws+ DIGITS ]
    PATH     = a JSON string literal, or a run of non-ws characters not starting with "--"

Anything else (JavaScript, single quotes, unquoted keys, comments, a second call, ``;``,
``wait``/``--wait``/wait objects) is ``INVALID_COMMAND`` and no tool runs.
"""

from __future__ import annotations

import json
import re
from typing import Final

import msgspec

from dsh_sidecar.python_core.canonical import loads_strict
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.mock.errors import InvalidCommand, InvalidScript
from dsh_sidecar.python_core.mock.nearmiss import closest_subcommand, is_near_miss
from dsh_sidecar.python_core.mock.script import MAX_WAIT_MS, Script, validate_script

__all__ = [
    "OVERWRITE_WAIT_OPTION",
    "ReplayCommand",
    "RunCommand",
    "parse_arguments",
    "parse_command",
]

OVERWRITE_WAIT_OPTION: Final = "--overwrite-wait-time-ms"
_PREFIX: Final = "/mock"
_WS: Final = " \t\r\n"
_NAME: Final = re.compile(r"[A-Za-z0-9_-]+")
_DIGITS: Final = re.compile(r"0|[1-9][0-9]*")
_RUN_SOURCE: Final = "/mock run"


class RunCommand(msgspec.Struct, frozen=True):
    """``/mock run``: one tool call or one parallel group, as a one-step canonical script."""

    script: Script


class ReplayCommand(msgspec.Struct, frozen=True):
    """``/mock replay``: the path exactly as written, plus the optional wait override."""

    path: str
    overwrite_wait_ms: int | None = None


class _Cursor:
    """Position in the text; every error reports a 1-based column."""

    def __init__(self, text: str, pos: int, base: int) -> None:
        self.text = text
        self.pos = pos
        self.base = base

    def error(self, reason: str, pos: int | None = None) -> InvalidCommand:
        return InvalidCommand(self.base + (self.pos if pos is None else pos) + 1, reason)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip_ws(self) -> int:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1
        return self.pos - start

    def require_ws(self, what: str) -> None:
        if self.skip_ws() == 0 and not self.at_end():
            raise self.error(f"expected whitespace before {what}")

    def word(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] not in _WS:
            self.pos += 1
        return self.text[start : self.pos]


def parse_command(text: str) -> RunCommand | ReplayCommand:
    """Parse a whole ``/mock ...`` text (a slash command or a headless user message).

    Raises:
        InvalidCommand: the text breaks the grammar; the message names the column.
    """
    stripped = text.lstrip(_WS)
    offset = len(text) - len(stripped)
    meant = is_near_miss(stripped)
    if meant is not None:
        suggestion = f"{_PREFIX} {meant}".rstrip()
        raise InvalidCommand(
            offset + 1, f"a misspelt /mock command; did you mean {suggestion}? It was not sent to the model"
        )
    if not stripped.startswith(_PREFIX) or stripped[len(_PREFIX) : len(_PREFIX) + 1] not in (
        "",
        *_WS,
    ):
        raise InvalidCommand(offset + 1, "the command must start with /mock")
    return _parse_body(stripped[len(_PREFIX) :], offset + len(_PREFIX))


def parse_arguments(raw_input: str) -> RunCommand | ReplayCommand:
    """Parse the text after the command name, as DSH passes it to a command handler.

    Raises:
        InvalidCommand: the text breaks the grammar; columns count from the start of
            ``raw_input``.
    """
    return _parse_body(raw_input, 0)


def _parse_body(body: str, base: int) -> RunCommand | ReplayCommand:
    cur = _Cursor(body, 0, base)
    cur.skip_ws()
    start = cur.pos
    verb = cur.word()
    if verb == "run":
        cur.require_ws("the tool call")
        return RunCommand(script=_parse_run(cur))
    if verb == "replay":
        cur.require_ws("the path")
        return _parse_replay(cur)
    if not verb:
        raise cur.error("expected run or replay after /mock", start)
    meant = closest_subcommand(verb)
    if meant is not None:
        raise cur.error(f"unknown subcommand; did you mean {meant}?", start)
    raise cur.error("unknown subcommand; expected run or replay", start)


def _parse_run(cur: _Cursor) -> Script:
    if cur.at_end():
        raise cur.error("expected a tool call after run")
    start = cur.pos
    if cur.peek() == "[":
        cur.pos += 1
        calls = _parse_group(cur)
        step: dict[str, object] = {"parallel": calls}
    else:
        step = _parse_call(cur)
    trailing = cur.pos
    cur.skip_ws()
    if not cur.at_end():
        raise _trailing_error(cur, trailing)
    try:
        return validate_script(
            {"type": "dsh-mock-script", "version": 1, "steps": [step]}, source=_RUN_SOURCE
        )
    except InvalidScript as exc:
        raise cur.error(exc.reason, start) from None


def _trailing_error(cur: _Cursor, after_call: int) -> InvalidCommand:
    char = cur.peek()
    if char == ";":
        return cur.error("/mock run takes one executable unit; ';' starts a second statement")
    if cur.pos > after_call and (_NAME.match(cur.text, cur.pos) or char == "["):
        return cur.error(
            "/mock run takes one tool call or one [...] group; sequential steps and waits "
            "belong in a replay script"
        )
    return cur.error("unexpected text after the tool call")


def _parse_group(cur: _Cursor) -> list[dict[str, object]]:
    calls: list[dict[str, object]] = []
    cur.skip_ws()
    while True:
        if cur.at_end():
            raise cur.error("unterminated [ group; expected ]")
        char = cur.peek()
        if char == "]":
            if not calls:
                raise cur.error("a parallel group needs at least one tool call")
            cur.pos += 1
            return calls
        if char == ",":
            raise cur.error("separate the calls of a group with whitespace, not ','")
        if char == "[":
            raise cur.error("parallel groups cannot nest")
        calls.append(_parse_call(cur))
        if cur.skip_ws() == 0 and cur.peek() not in ("]", ""):
            if cur.peek() == ",":
                raise cur.error("separate the calls of a group with whitespace, not ','")
            raise cur.error("expected whitespace or ] after a tool call")


def _parse_call(cur: _Cursor) -> dict[str, object]:
    start = cur.pos
    if cur.text.startswith("--", start):
        raise cur.error(
            "/mock run accepts no options; waits can only be authored in a replay script"
        )
    if cur.peek() == "{":
        raise cur.error("expected a tool call NAME({...}); a bare object is not a step")
    match = _NAME.match(cur.text, start)
    if match is None:
        raise cur.error("expected a tool name (A-Z a-z 0-9 _ -)")
    name = match.group()
    cur.pos = match.end()
    if name == "wait":
        raise cur.error(
            "wait is not accepted by /mock run; waits can only be authored in a replay script",
            start,
        )
    if cur.peek() != "(":
        raise cur.error(f"expected ( after tool name {name}")
    cur.pos += 1
    cur.skip_ws()
    if cur.peek() != "{":
        raise cur.error(f"the arguments of {name} must be a JSON object, e.g. {name}({{}})")
    end = _object_end(cur)
    try:
        args = loads_strict(cur.text[cur.pos : end])
    except CanonicalJsonError as exc:
        offset, token = _syntax_error_at(cur.text[cur.pos : end]) if exc.reason == "not valid JSON" else (0, None)
        raise cur.error(_json_reason(name, exc.reason, token), cur.pos + offset) from None
    cur.pos = end
    cur.skip_ws()
    if cur.peek() != ")":
        raise cur.error(f"expected ) to close the call to {name}")
    cur.pos += 1
    return {"tool": name, "args": args}


def _syntax_error_at(text: str) -> tuple[int, str | None]:
    """Where plain JSON decoding of ``text`` stops, and the token there when it has a name.

    The decoder stops at a trailing comma's closer; the offending token is the comma.
    """
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        before = text[: exc.pos].rstrip(_WS)
        if text[exc.pos : exc.pos + 1] in ("}", "]") and before.endswith(","):
            return len(before) - 1, "a trailing comma"
        return exc.pos, None
    return 0, None


def _json_reason(name: str, reason: str, token: str | None = None) -> str:
    if token is not None:
        return f"the arguments of {name} are not valid JSON: {token}"
    if reason == "not valid JSON":
        return (
            f"the arguments of {name} are not valid JSON "
            "(single quotes, unquoted keys and comments are not JSON)"
        )
    return f"the arguments of {name} are not strict JSON: {reason}"


def _object_end(cur: _Cursor) -> int:
    """Return the index just past the JSON object starting at ``cur.pos``.

    Only brackets and string quoting are tracked here; ``loads_strict`` then judges the
    slice, so single quotes, comments and unquoted keys fail there with a JSON reason.
    """
    text = cur.text
    depth = 0
    i = cur.pos
    in_string = False
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                i += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise cur.error("unterminated JSON object")


def _parse_replay(cur: _Cursor) -> ReplayCommand:
    if cur.at_end():
        raise cur.error("expected a path after replay")
    path = _parse_path(cur)
    wait: int | None = None
    cur.require_ws("the next argument")
    while not cur.at_end():
        start = cur.pos
        option = cur.word()
        if option != OVERWRITE_WAIT_OPTION:
            if option.startswith("--"):
                raise cur.error(
                    f"unknown option; the only option is {OVERWRITE_WAIT_OPTION}", start
                )
            raise cur.error("/mock replay takes exactly one path", start)
        if wait is not None:
            raise cur.error(f"{OVERWRITE_WAIT_OPTION} is given twice", start)
        cur.require_ws("the number")
        number_start = cur.pos
        digits = cur.word()
        if not digits:
            raise cur.error(f"{OVERWRITE_WAIT_OPTION} needs a non-negative integer")
        if _DIGITS.fullmatch(digits) is None:
            raise cur.error(
                f"{OVERWRITE_WAIT_OPTION} needs a non-negative integer without sign or leading "
                "zeros",
                number_start,
            )
        if int(digits) > MAX_WAIT_MS:
            raise cur.error(f"{OVERWRITE_WAIT_OPTION} exceeds {MAX_WAIT_MS} ms", number_start)
        wait = int(digits)
        cur.require_ws("the next argument")
    return ReplayCommand(path=path, overwrite_wait_ms=wait)


def _parse_path(cur: _Cursor) -> str:
    start = cur.pos
    if cur.peek() == '"':
        end = _string_end(cur)
        try:
            path = loads_strict(cur.text[start:end])
        except CanonicalJsonError:
            raise cur.error("the quoted path is not a valid JSON string", start) from None
        cur.pos = end
        if not cur.at_end() and cur.peek() not in _WS:
            raise cur.error("expected whitespace after the quoted path")
        if not isinstance(path, str) or not path:
            raise cur.error("the path is empty", start)
        return path
    if cur.text.startswith("--", start):
        raise cur.error("expected a path before options", start)
    return cur.word()


def _string_end(cur: _Cursor) -> int:
    i = cur.pos + 1
    text = cur.text
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    raise cur.error("unterminated quoted path")
