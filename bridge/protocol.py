"""The wire protocol between node_shim and the sidecar: method names and payload Structs.

The method table is the protocol: ``docs/protocol.md`` documents exactly ``METHODS`` (a test
checks it). Payloads are closed Structs; new fields get defaults; versions meet at
``initialize``. Tool arguments, results and contexts stay raw JSON or opaque values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from python_core.mock.plan import MockStatus
from python_core.subagent_cassette import CallHandle, RunOutcome, StartRequest, UpstreamFacts
from python_core.subagent_cassette.format import Outcome
from python_core.tool_cassette.engine import ToolResult

__all__ = [
    "METHODS",
    "NODE_TO_PY",
    "PROTOCOL_VERSION",
    "CancelParams",
    "CancelResult",
    "Empty",
    "ExecuteDecision",
    "ExecuteParams",
    "InitializeParams",
    "InitializeResult",
    "LlmResponse",
    "LlmStreamParams",
    "Method",
    "MockCommandParams",
    "MockCommandResult",
    "PostExecuteDecision",
    "PostExecuteParams",
    "PreStepParams",
    "PreStepResult",
    "ResultParams",
    "Route",
    "RouteParams",
    "RouteResult",
    "SeenResult",
    "SessionEndParams",
    "ShutdownParams",
    "ShutdownResult",
    "SubagentDecision",
    "SubagentOutcomeParams",
    "SubagentPublishedParams",
    "SubagentSetup",
    "ToolCallOut",
    "TurnParams",
]

PROTOCOL_VERSION = 1
NODE_TO_PY = "node->python"


class _Closed(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every wire payload: unknown fields are protocol errors."""


class InitializeParams(_Closed):
    """``initialize``: the handshake the shim sends once, before any hook is installed."""

    protocolVersion: int
    host: dict[str, str | None]
    config: dict[str, Any]
    cwd: str
    pid: int


class SubagentSetup(_Closed):
    """Provider names: register the cassette as ``name`` once ``upstream`` exists."""

    name: str
    upstream: str


class InitializeResult(_Closed):
    """The hooks the shim must install; nothing else is installed."""

    protocolVersion: int
    hooks: list[Literal["tools", "llm", "subagent", "turns"]]
    sidecarVersion: str
    subagent: SubagentSetup | None = None


class ShutdownParams(_Closed):
    """``shutdown``: sent from the plugin's dispose path."""


class ShutdownResult(_Closed):
    """Exit status for the DSH process, the structural errors and the summary notes to print."""

    exitCode: int
    errors: list[str]
    notes: list[str] = msgspec.field(default_factory=list)


class ExecuteParams(_Closed):
    """``tools/execute``: a call entering the outermost ``tools/execute`` wrapper."""

    handle: str
    path: str
    tool: str
    callId: str
    args: str


class ExecuteDecision(_Closed):
    """``next``: run the real body; ``serve``: return ``result`` without it; ``refuse``: fail closed.

    On ``serve`` the shim defers ``deferContexts`` first, and returns ``cancellation`` instead
    of ``result`` when the caller's signal is already aborted.
    """

    action: Literal["next", "serve", "refuse"]
    result: msgspec.Raw | None = None
    deferContexts: msgspec.Raw | None = None
    cancellation: msgspec.Raw | None = None
    code: str = ""
    message: str = ""


class PostExecuteParams(_Closed):
    """``tools/post-execute``: the normalized result at the post-execute input boundary."""

    handle: str
    path: str | None
    tool: str
    result: ToolResult


class PostExecuteDecision(_Closed):
    """``accept`` lets post policies run; ``refuse`` blocks the call with ``message``."""

    action: Literal["accept", "refuse"]
    message: str = ""


class ResultParams(_Closed):
    """``tools/result`` (notification): the frozen final outcome of a call."""

    handle: str
    path: str | None
    tool: str
    callId: str
    result: ToolResult


class SeenResult(_Closed):
    """One tool result the model sees in a request, by the call id the sidecar minted."""

    callId: str
    tool: str
    isError: bool


class LlmStreamParams(_Closed):
    """``llm/stream``: one request to the ``mock`` route."""

    sessionId: str
    purpose: str | None
    turn: int | None
    step: int | None
    results: list[SeenResult]
    tools: list[str]


class ToolCallOut(_Closed):
    """A complete tool-call block the route emits."""

    id: str
    name: str
    arguments: str


class LlmResponse(_Closed):
    """One whole model response: tool calls (finish ``tool-calls``), text (finish ``stop``), or
    ``error``: the plan stopped with ``code``; the shim appends ``status`` and throws ``LlmError``.
    """

    kind: Literal["tool-calls", "text", "error"]
    calls: list[ToolCallOut] = msgspec.field(default_factory=list)
    text: str = ""
    code: str = ""
    status: MockStatus | None = None


class PreStepParams(_Closed):
    """``mock/pre-step``: user text entering a step (a headless ``/mock`` task arrives here)."""

    sessionId: str
    turn: int
    step: int
    cwd: str
    texts: list[str]


class PreStepResult(_Closed):
    """Whether this turn is now a mock turn; ``status`` is appended as a ``mock/status`` event."""

    mock: bool
    status: MockStatus | None = None


class CancelParams(_Closed):
    """``mock/cancel``: the host aborted the mock stream of ``turn``."""

    sessionId: str
    turn: int


class CancelResult(_Closed):
    """The plan's terminal status, for the shim to append before the turn closes."""

    status: MockStatus | None


class SessionEndParams(_Closed):
    """``mock/session-end`` (notification): the agent left the registry; drop its state."""

    sessionId: str


class TurnParams(_Closed):
    """``session/turn`` (notification): a session logged ``turn/start`` or ``turn/end``.

    ``reason`` is the ``turn/end`` reason's ``kind`` (``completed``, ``aborted``, ...).
    """

    sessionId: str
    turn: int
    phase: Literal["start", "end"]
    reason: str | None = None


class MockCommandParams(_Closed):
    """``mock/command``: a ``/mock`` slash command (web UI, followup, steer)."""

    sessionId: str
    rawInput: str


class MockCommandResult(_Closed):
    """The command was accepted; ``text`` is shown to the user (never to the model)."""

    text: str


class Route(_Closed):
    """A provider/model pair."""

    provider: str
    model: str


class RouteParams(_Closed):
    """``mock/route``: the ``agent/request`` proposal for a step."""

    sessionId: str
    turn: int
    step: int
    proposed: Route


class RouteResult(_Closed):
    """``route`` replaces the proposal; ``None`` keeps it."""

    route: Route | None


class SubagentDecision(_Closed):
    """``forward``: call the upstream object's ``start()``; ``replay``: return the recorded run.

    On ``replay``, ``start()`` settles after ``startDelayMs`` (rejecting for a ``start-error``
    outcome) and the run's result after ``delayMs`` (rejecting for ``result-error``), both from
    admission; the run has a fresh id and ``localAgent: undefined``.
    """

    action: Literal["forward", "replay"]
    handle: CallHandle
    outcome: Outcome | None = None
    delayMs: float = 0.0
    startDelayMs: float = 0.0


class SubagentPublishedParams(_Closed):
    """``subagent/published``: a forwarded ``start()`` fulfilled with run id ``childId``."""

    handle: CallHandle
    childId: str


class SubagentOutcomeParams(_Closed):
    """``subagent/outcome``: a forwarded run's terminal facts, measured in Node."""

    handle: CallHandle
    outcome: RunOutcome


class Empty(_Closed):
    """An empty result."""


@dataclass(frozen=True)
class Method:
    """One row of the method table."""

    params: type[msgspec.Struct]
    result: type[msgspec.Struct] | None
    direction: str = NODE_TO_PY


METHODS: dict[str, Method] = {
    "initialize": Method(InitializeParams, InitializeResult),
    "shutdown": Method(ShutdownParams, ShutdownResult),
    "tools/execute": Method(ExecuteParams, ExecuteDecision),
    "tools/post-execute": Method(PostExecuteParams, PostExecuteDecision),
    "tools/result": Method(ResultParams, None),
    "llm/stream": Method(LlmStreamParams, LlmResponse),
    "mock/pre-step": Method(PreStepParams, PreStepResult),
    "mock/route": Method(RouteParams, RouteResult),
    "mock/command": Method(MockCommandParams, MockCommandResult),
    "mock/session-end": Method(SessionEndParams, None),
    "subagent/hello": Method(UpstreamFacts, Empty),
    "subagent/start": Method(StartRequest, SubagentDecision),
    "subagent/published": Method(SubagentPublishedParams, None),
    "subagent/outcome": Method(SubagentOutcomeParams, Empty),
    "mock/cancel": Method(CancelParams, CancelResult),
    "session/turn": Method(TurnParams, None),
}
