"""The canonical mock script and its one validator.

Rule: every input (``/mock run`` text, a self-authored script, a converted DSH session log)
becomes plain JSON values first and then passes ``validate_script``; nothing else builds a
``Script``. The validator walks the values by hand because steps are told apart by which key
they carry (``tool``/``parallel``/``wait``), which a msgspec tagged union cannot express; the
result is closed, frozen Structs whose ``args`` are canonical JSON bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import msgspec

from dsh_sidecar.python_core.canonical import canonical_bytes, digest_bytes, loads_strict, pointer
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.mock.errors import InvalidScript

__all__ = [
    "MAX_WAIT_MS",
    "SCRIPT_TYPE",
    "SCRIPT_VERSION",
    "TOOL_NAME_RULE",
    "ExecutableStep",
    "ParallelStep",
    "Script",
    "Step",
    "ToolStep",
    "WaitStep",
    "decode_script",
    "encode_script",
    "executable_steps",
    "script_id",
    "validate_script",
]

SCRIPT_TYPE: Final = "dsh-mock-script"
SCRIPT_VERSION: Final = 1
# A wait is any non-negative integer; the canonical profile carries integers up to
# 2^53-1. The bridge sleeps in bounded chunks against a deadline, so no timer cap (Node's
# 2^31-1 ms setTimeout, an event loop's select timeout) can make a long wait fire early.
MAX_WAIT_MS: Final = 2**53 - 1
# The provider-facing rule DSH model routes accept for function names (DeepSeek/OpenAI style).
TOOL_NAME_RULE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TOOL_NAME_TEXT: Final = "1-64 characters of A-Z a-z 0-9 _ -"

_ENCODER: Final = msgspec.json.Encoder(order="sorted")


class ToolStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool call; ``args`` holds the canonical JSON bytes of a JSON object."""

    tool: str
    args: msgspec.Raw


class ParallelStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Sibling tool calls emitted in one model response, in array order."""

    parallel: tuple[ToolStep, ...]


class WaitStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A scheduling delay on the edge between two executable steps; never a tool call."""

    wait: int


Step = ToolStep | ParallelStep | WaitStep


class Script(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A validated ``dsh-mock-script`` version 1."""

    type: Literal["dsh-mock-script"]
    version: Literal[1]
    steps: tuple[Step, ...]


class ExecutableStep(msgspec.Struct, frozen=True):
    """One model response's worth of calls plus the explicit wait before it, if any."""

    calls: tuple[ToolStep, ...]
    wait_before: int | None


_TOOL_KEYS: Final = frozenset({"tool", "args"})
_PARALLEL_KEYS: Final = frozenset({"parallel"})
_STEP_KEYS_WAIT: Final = frozenset({"wait"})
_SCRIPT_KEYS: Final = ("type", "version", "steps")

LineOf = Callable[[str], "int | None"]


class _Validator:
    """Walks plain JSON values and raises ``InvalidScript`` at the first broken rule."""

    def __init__(self, source: str, line_of: LineOf | None) -> None:
        self.source = source
        self.line_of = line_of
        # Names already checked: a long script calls the same few tools thousands of times.
        self.names: set[str] = set()

    def fail(self, reason: str, parts: list[str | int]) -> InvalidScript:
        location = pointer(parts)
        line = self.line_of(location) if self.line_of is not None else None
        return InvalidScript(self.source, reason, location=location or "/", line=line)

    def closed_object(
        self, value: Any, parts: list[str | int], allowed: frozenset[str] | tuple[str, ...]
    ) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"expected an object, got {_kind(value)}", parts)
        for key in value:
            if key not in allowed:
                raise self.fail(f"unknown field {_quote(key)}", parts)
        for key in allowed:
            if key not in value:
                raise self.fail(f"missing field {_quote(key)}", parts)
        return value

    def script(self, value: Any) -> Script:
        top = self.closed_object(value, [], _SCRIPT_KEYS)
        if top["type"] != SCRIPT_TYPE:
            raise self.fail(f"type must be {_quote(SCRIPT_TYPE)}", ["type"])
        version = top["version"]
        if not _is_int(version):
            raise self.fail(f"version must be an integer, got {_kind(version)}", ["version"])
        if version != SCRIPT_VERSION:
            raise self.fail(
                f"unsupported version {version}; this reader supports {SCRIPT_VERSION}",
                ["version"],
            )
        raw_steps = top["steps"]
        if not isinstance(raw_steps, list):
            raise self.fail(f"steps must be an array, got {_kind(raw_steps)}", ["steps"])
        steps = tuple(self.step(item, ["steps", i]) for i, item in enumerate(raw_steps))
        self.placement(steps)
        return Script(type=SCRIPT_TYPE, version=SCRIPT_VERSION, steps=steps)

    def step(self, value: Any, parts: list[str | int]) -> Step:
        if not isinstance(value, dict):
            raise self.fail(f"a step must be an object, got {_kind(value)}", parts)
        if "wait" in value:
            self.closed_object(value, parts, _STEP_KEYS_WAIT)
            return self.wait(value["wait"], [*parts, "wait"])
        if "parallel" in value:
            self.closed_object(value, parts, _PARALLEL_KEYS)
            return self.parallel(value["parallel"], [*parts, "parallel"])
        if "tool" in value:
            return self.tool(value, parts)
        raise self.fail("a step needs exactly one of tool, parallel or wait", parts)

    def tool(self, value: Any, parts: list[str | int]) -> ToolStep:
        # A set comparison settles the common case; the loops name what is wrong otherwise.
        body = value if value.keys() == _TOOL_KEYS else self.closed_object(value, parts, _TOOL_KEYS)
        name = body["tool"]
        if not isinstance(name, str) or (
            name not in self.names and TOOL_NAME_RULE.fullmatch(name) is None
        ):
            raise self.fail(
                f"invalid tool name (DSH tool names are {_TOOL_NAME_TEXT})", [*parts, "tool"]
            )
        self.names.add(name)
        args = body["args"]
        if not isinstance(args, dict):
            raise self.fail(f"args must be a JSON object, got {_kind(args)}", [*parts, "args"])
        try:
            encoded = canonical_bytes(args)
        except CanonicalJsonError as exc:
            raise self.fail(
                f"args are not canonical JSON: {exc.reason}", [*parts, "args"]
            ) from None
        return ToolStep(tool=name, args=msgspec.Raw(encoded))

    def parallel(self, value: Any, parts: list[str | int]) -> ParallelStep:
        if not isinstance(value, list) or not value:
            raise self.fail("parallel must be a non-empty array of tool steps", parts)
        members: list[ToolStep] = []
        for i, item in enumerate(value):
            member = [*parts, i]
            if isinstance(item, dict) and "wait" in item:
                raise self.fail("a wait cannot appear inside a parallel group", member)
            if isinstance(item, dict) and "parallel" in item:
                raise self.fail("parallel groups cannot nest", member)
            if not isinstance(item, dict) or "tool" not in item:
                raise self.fail("a parallel group holds tool steps only", member)
            members.append(self.tool(item, member))
        return ParallelStep(parallel=tuple(members))

    def wait(self, value: Any, parts: list[str | int]) -> WaitStep:
        if not _is_int(value) or value < 0:
            raise self.fail("wait must be a non-negative integer of milliseconds", parts)
        if value > MAX_WAIT_MS:
            raise self.fail(f"wait exceeds {MAX_WAIT_MS} ms", parts)
        return WaitStep(wait=value)

    def placement(self, steps: tuple[Step, ...]) -> None:
        if not any(not isinstance(step, WaitStep) for step in steps):
            raise self.fail("the script has no executable step", ["steps"])
        for i, step in enumerate(steps):
            if not isinstance(step, WaitStep):
                continue
            if i == 0:
                raise self.fail("a wait cannot be the first step", ["steps", i])
            if i == len(steps) - 1:
                raise self.fail("a wait cannot be the last step", ["steps", i])
            if isinstance(steps[i - 1], WaitStep):
                raise self.fail("a wait cannot follow another wait", ["steps", i])


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _quote(key: str) -> str:
    # Field names come from the input; cap them so a hostile key cannot flood a message.
    text = key if len(key) <= 40 else key[:40] + "..."
    return '"' + text.replace('"', '\\"') + '"'


def validate_script(value: Any, *, source: str, line_of: LineOf | None = None) -> Script:
    """Validate plain JSON values as a canonical script.

    Args:
        value: the decoded JSON document (dicts, lists, scalars).
        source: the source name shown in diagnostics (never an absolute path).
        line_of: maps a JSON pointer into ``value`` to a source line, for converted input.

    Returns:
        The closed, frozen ``Script``.

    Raises:
        InvalidScript: shape, version, tool name, args or wait placement is invalid.
    """
    return _Validator(source, line_of).script(value)


def decode_script(data: bytes, *, source: str) -> Script:
    """Decode canonical-script JSON text strictly and validate it.

    Raises:
        InvalidScript: the text is not strict JSON or not a valid script.
    """
    try:
        value = loads_strict(data)
    except CanonicalJsonError as exc:
        # The strict decoder's location may quote a key from the input; keep only the reason.
        raise InvalidScript(source, f"not strict JSON: {exc.reason}") from None
    return validate_script(value, source=source)


def encode_script(script: Script) -> bytes:
    """Return the canonical JSON bytes of ``script`` (sorted keys, no whitespace)."""
    return _ENCODER.encode(script)


def script_id(script: Script) -> str:
    """Return ``sha256:<hex>`` of the canonical script bytes: the script's identity."""
    return digest_bytes(encode_script(script))


def executable_steps(script: Script) -> tuple[ExecutableStep, ...]:
    """Group the script into executable steps, each with the explicit wait before it."""
    out: list[ExecutableStep] = []
    pending: int | None = None
    for step in script.steps:
        if isinstance(step, WaitStep):
            pending = step.wait
        elif isinstance(step, ToolStep):
            out.append(ExecutableStep(calls=(step,), wait_before=pending))
            pending = None
        else:
            out.append(ExecutableStep(calls=step.parallel, wait_before=pending))
            pending = None
    return tuple(out)
