"""The trace document (``dsh-sidecar-trace``, version 1): what the trace page renders and tools read.

One document per test (or per ``run(trace=...)`` / ``dsh-sidecar show``), holding its runs. Every
value in it went through the cassette's filters and the credential filter, and every text a filter
hid anywhere is replaced everywhere (``redact.py``). The shape is documented in docs/trace.md; a
change that drops or renames a field raises ``VERSION``.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "KIND",
    "VERSION",
    "Call",
    "Cassette",
    "Comparison",
    "Event",
    "Mismatch",
    "ModelStep",
    "Pair",
    "PointerValues",
    "Run",
    "Subagent",
    "TraceDocument",
    "Unconsumed",
]

KIND = "dsh-sidecar-trace"
VERSION = 1

Source = Literal["served", "recorded", "live", "stub", "fault", "stood-up", "refused", "mock", "cassette",
                 "unknown"]


class _Shape(msgspec.Struct, kw_only=True, omit_defaults=True, rename="camel"):
    pass


class Call(_Shape):
    """One tool call: what the model asked, what it was shown, and where the answer came from."""

    id: str
    tool: str
    session: str
    args: Any = None
    path: str | None = None
    turn: int | None = None
    step: int | None = None
    output: str | None = None
    """The text the model saw (a JSON text the tool rendered stays text)."""
    value: Any = None
    is_error: bool = False
    error: str | None = None
    """The error code of a failed call."""
    source: Source = "unknown"
    ordinal: int | None = None
    """The cassette ordinal that served or recorded it."""
    fault: str | None = None
    """The fault overlay that applied to it."""
    at_ms: int | None = None
    """Milliseconds from the session's start to the call."""
    duration_ms: int | None = None


class ModelStep(_Shape):
    """One model answer (a ``stream()`` call of the agent loop, or of another lane)."""

    session: str
    turn: int | None = None
    step: int | None = None
    lane: str = "model"
    position: int | None = None
    text: str = ""
    reasoning: str = ""
    finish: str | None = None
    usage: dict[str, Any] | None = None
    tool_calls: list[str] = msgspec.field(default_factory=list)
    source: Source = "unknown"
    """``mock`` (the mock model), ``cassette`` (served by the model cassette), ``recorded`` or ``live``."""
    error: str | None = None
    at_ms: int | None = None
    duration_ms: int | None = None


class Event(_Shape):
    """A timeline entry, in order: ``kind`` is turn, step, model, tool, mock, title, warning or error."""

    kind: str
    label: str
    session: str
    at_ms: int | None = None
    ref: str | None = None
    """The call id (tool) or ``turn.step`` (model) the entry opens in the call tree."""


class PointerValues(_Shape):
    """One JSON pointer where a live value differs from the recorded one, with both values."""

    pointer: str
    change: str
    recorded: Any = None
    live: Any = None


class Mismatch(_Shape):
    """A replay that differed from its recording, where it happened, with both sides."""

    kind: Literal["tool", "model"]
    code: str
    message: str
    where: str
    call_id: str | None = None
    pointers: list[PointerValues] = msgspec.field(default_factory=list)
    recorded: Any = None
    live: Any = None
    differences: list[str] = msgspec.field(default_factory=list)
    """A model mismatch: the request parts that differ (``message 3 (user) differs``)."""
    note: str | None = None
    """Why a side is missing (a model cassette that keeps digests only)."""


class Unconsumed(_Shape):
    """A recorded call the replay never asked for."""

    kind: Literal["tool", "model", "subagent"]
    where: str
    ordinal: int
    tool: str | None = None
    args: Any = None


class Cassette(_Shape):
    """One cassette's counters in a run."""

    kind: str
    file: str
    mode: str
    counters: dict[str, Any] = msgspec.field(default_factory=dict)


class Subagent(_Shape):
    """A child session's own calls and model steps."""

    session: str
    task: str = ""
    final_text: str = ""
    calls: list[Call] = msgspec.field(default_factory=list)
    steps: list[ModelStep] = msgspec.field(default_factory=list)


class Run(_Shape):
    """One DSH run (a ``run()`` call) or one file shown by ``dsh-sidecar show``."""

    label: str
    task: str = ""
    session: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    duration_ms: int | None = None
    final_text: str = ""
    errors: list[dict[str, str]] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    cassettes: list[Cassette] = msgspec.field(default_factory=list)
    events: list[Event] = msgspec.field(default_factory=list)
    calls: list[Call] = msgspec.field(default_factory=list)
    steps: list[ModelStep] = msgspec.field(default_factory=list)
    subagents: list[Subagent] = msgspec.field(default_factory=list)
    mismatches: list[Mismatch] = msgspec.field(default_factory=list)
    unconsumed: list[Unconsumed] = msgspec.field(default_factory=list)


class Pair(_Shape):
    """One position of two aligned recordings (``show A --against B``)."""

    where: str
    status: Literal["same", "changed", "only-a", "only-b"]
    a: Any = None
    b: Any = None
    pointers: list[PointerValues] = msgspec.field(default_factory=list)


class Comparison(_Shape):
    """Two recordings aligned by position."""

    a: str
    b: str
    pairs: list[Pair] = msgspec.field(default_factory=list)


class TraceDocument(msgspec.Struct, kw_only=True, rename="camel"):
    """The whole trace (every top-level field is written, ``type`` and ``version`` first)."""

    type: str = KIND
    version: int = VERSION
    title: str
    test: str | None = None
    outcome: str | None = None
    runs: list[Run] = msgspec.field(default_factory=list)
    comparison: Comparison | None = None
