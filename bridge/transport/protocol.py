"""The wire protocol between node_shim and the sidecar: method names and payload Structs.

The method table is the protocol: ``docs/protocol.md`` documents exactly ``METHODS`` (a test
checks it). Payloads are closed Structs; new fields get defaults; versions meet at
``initialize``. Tool arguments, results and contexts stay raw JSON or opaque values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.composition import PluginRow
from dsh_sidecar.python_core.errors import ProtocolError
from dsh_sidecar.python_core.mock.plan import MockStatus
from dsh_sidecar.python_core.model_cassette.initiator import InitiatorFacts
from dsh_sidecar.python_core.subagent_cassette.format import Capabilities, FullRequest, Outcome, RecordedError, Timing
from dsh_sidecar.python_core.subagent_cassette.host import ParentFacts
from dsh_sidecar.python_core.tool_cassette.engine import HostToolResult, ToolContract
from dsh_sidecar.python_core.tool_cassette.host_state import HostCapture

__all__ = [
    "INITIALIZE",
    "METHODS",
    "NEXT_NO_POST",
    "PASS_MODEL",
    "PROTOCOL_VERSION",
    "REQUIRED",
    "AlreadyInitialized",
    "CallHandle",
    "CancelParams",
    "CancelResult",
    "Empty",
    "ExecuteDecision",
    "ExecuteParams",
    "Feature",
    "Hook",
    "HookNotEnabled",
    "InitializeParams",
    "InitializeResult",
    "Lifecycle",
    "LlmResponse",
    "LlmStreamParams",
    "Method",
    "MockCommandParams",
    "MockCommandResult",
    "ModelDecision",
    "ModelRecordedParams",
    "ModelRequestParams",
    "NotInitialized",
    "PostExecuteDecision",
    "PostExecuteParams",
    "PreStepParams",
    "PreStepResult",
    "RegisteredTool",
    "RegistryParams",
    "ReplayFacts",
    "ResultParams",
    "Route",
    "RouteParams",
    "RouteResult",
    "RunOutcome",
    "SeenResult",
    "SessionEndParams",
    "ShutdownParams",
    "ShutdownResult",
    "StandIn",
    "StandInFailure",
    "StepParams",
    "SubagentDecision",
    "SubagentOutcomeParams",
    "SubagentPublishedParams",
    "SubagentSetup",
    "SubagentStartParams",
    "ToolCallOut",
    "TurnParams",
    "UpstreamFacts",
    "Via",
    "WarmDoneParams",
    "WarmJob",
    "WarmNextParams",
    "WireResult",
    "WireResultError",
    "WireStartError",
]

PROTOCOL_VERSION = 1


class _Closed(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Base of every wire payload: unknown fields are protocol errors."""


class InitializeParams(_Closed):
    """``initialize``: the handshake the shim sends once, before any hook is installed."""

    protocolVersion: int
    host: dict[str, str | None]
    config: dict[str, Any]
    cwd: str
    pid: int
    # The loader's rows (module, enabled, package and version); absent from an older shim.
    plugins: list[PluginRow] | None = None


class ReplayFacts(_Closed):
    """The provider facts a replaying cassette exposes: the recording's, from its header."""

    capabilities: Capabilities
    inheritsParentContext: bool


class SubagentSetup(_Closed):
    """Provider names: register the cassette as ``name`` once ``upstream`` exists.

    ``parentEvents``: the parent session event types ``subagent/start`` carries.
    ``replayFacts`` (replay only): the capabilities and context inheritance the cassette
    provider shows the host instead of the live upstream's (the format replays them as captured).
    """

    name: str
    upstream: str
    parentEvents: list[str]
    replayFacts: ReplayFacts | UnsetType = UNSET


class StandIn(_Closed):
    """A recorded tool contract the shim registers if no plugin registered ``name`` by the time
    the first agent is created (docs/tool-cassette-format.md, "Replay with the provider gone"),
    or in any case with ``shadow``."""

    name: str
    description: str
    parameters: msgspec.Raw
    output: msgspec.Raw
    presentationMeta: bool = False
    timeoutMs: int | UnsetType = UNSET
    # An imported cassette's tool (docs/import.md): registered on the run's agent even where a
    # plugin registered the tool, whose scope shadows it in its place in the tool list.
    shadow: bool = False


class InitializeResult(_Closed):
    """The hooks the shim must install; nothing else is installed.

    ``askExecute: false`` (with the ``tools`` hooks): no call is selected or traced, so the shim
    runs ``tools/execute`` and ``tools/post-execute`` without asking and only reports
    ``tools/result``. ``standIns``: a replay's recorded tool contracts (``tools`` hooks only);
    ``registry``: what the shim reports of the registered tools when the first agent is
    created (``tools/registry``): nothing, their names, or their names and contracts.
    """

    protocolVersion: int
    hooks: list[Literal["tools", "llm", "subagent", "model", "turns", "warm", "steps"]]
    sidecarVersion: str
    subagent: SubagentSetup | None = None
    askExecute: bool = True
    standIns: list[StandIn] = msgspec.field(default_factory=list)
    registry: Literal["none", "names", "contracts"] = "none"
    # A warm host (``warm`` hooks): the shim runs the sessions ``warm/next`` hands it.
    warm: bool = False


class ShutdownParams(_Closed):
    """``shutdown``: sent from the plugin's dispose path."""


class ShutdownResult(_Closed):
    """Exit status for the DSH process, the structural errors and the summary notes to print.

    ``fixes`` are the errors' hints, each once, printed after the errors as ``fix: <hint>``.
    """

    exitCode: int
    errors: list[str]
    notes: list[str] = msgspec.field(default_factory=list)
    fixes: list[str] = msgspec.field(default_factory=list)


class ExecuteParams(_Closed):
    """``tools/execute``: a call entering the outermost ``tools/execute`` wrapper."""

    handle: str
    path: str
    tool: str
    callId: str
    args: str
    # The calling agent's session (null: no agent); a warm host routes the call by it.
    sessionId: str | None = None


class ExecuteDecision(_Closed):
    """``next``: run the real body; ``serve``: return ``result`` without it; ``refuse``: fail closed.

    On ``serve`` the shim defers ``deferContexts`` first, and returns ``cancellation`` instead
    of ``result`` when the caller's signal is already aborted. ``post: false`` tells the shim
    that this call's ``tools/post-execute`` needs no round trip (it accepts without asking).
    A served call's ``host`` (``host_state.restored``) is applied before its result returns.
    """

    action: Literal["next", "serve", "refuse"]
    result: msgspec.Raw | None = None
    deferContexts: msgspec.Raw | None = None
    cancellation: msgspec.Raw | None = None
    code: str = ""
    message: str = ""
    post: bool = True
    host: msgspec.Raw | None = None
    # Send the tool's registered definition with this call's post-execute (``definition``).
    describe: bool = False


class PostExecuteParams(_Closed):
    """``tools/post-execute``: the normalized result at the post-execute input boundary."""

    handle: str
    path: str | None
    tool: str
    result: HostToolResult
    # What DSH tracked while the real body ran (file observations, session events appended).
    host: HostCapture | None = None
    # The tool's definition as registered (asked for by ``describe``; null: none is registered).
    definition: ToolContract | None = None


class StandInFailure(_Closed):
    """A stand-in the registry refused: the tool and the registry's message."""

    tool: str
    message: str


class RegisteredTool(_Closed):
    """A tool a plugin registered, with its contract when the initialize answer asked for it."""

    name: str
    contract: ToolContract | None = None


class RegistryParams(_Closed):
    """``tools/registry`` (notification), sent once when the first agent is created: the tools
    the plugins registered (before any stand-in), the recorded tools the shim stood up because
    no plugin had (``standIns``), and those the registry refused (``failed``)."""

    tools: list[RegisteredTool]
    standIns: list[str] = msgspec.field(default_factory=list)
    failed: list[StandInFailure] = msgspec.field(default_factory=list)


class PostExecuteDecision(_Closed):
    """``accept`` lets post policies run; ``refuse`` fails the call with ``code`` and ``message``."""

    action: Literal["accept", "refuse"]
    code: str = ""
    message: str = ""


class ResultParams(_Closed):
    """``tools/result`` (notification): the frozen final outcome of a call.

    ``sessionId`` is the calling agent's session (null when the host names no agent): the mock
    keeps an outcome for the session whose plan awaits it.
    """

    handle: str
    path: str | None
    tool: str
    callId: str
    result: HostToolResult
    sessionId: str | None = None


class SeenResult(_Closed):
    """One tool result the model sees in a request, by the call id the sidecar minted."""

    callId: str
    tool: str
    isError: bool


class StepParams(_Closed):
    """``model/step`` (notification): what one model step of the agent loop is shown.

    From rc.8's ``llm/stream`` waterfall (outermost), for requests the agent loop built
    (``isAgentLoopRequest``, no ``purpose``); ``turn`` and ``step`` from the session's last
    ``agent/request``. ``system`` is the system prompt text, ``tools`` the offered tool schemas
    (``{name, description, parameters}``); the sidecar keeps or compares digests only.
    """

    sessionId: str
    turn: int
    step: int
    system: str | None = None
    tools: list[dict[str, Any]] = msgspec.field(default_factory=list)


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


class UpstreamFacts(_Closed, kw_only=True):
    """``subagent/hello`` params: the upstream ``SubagentProvider`` as Node found it."""

    name: str
    capabilities: Capabilities
    inheritsParentContext: bool
    continuable: bool


class CallHandle(_Closed):
    """Identifies one admitted ``start()`` until its outcome."""

    sequence: int
    callKey: str


class WireResult(_Closed, tag_field="kind", tag="result"):
    """The settled ``SubagentResult`` exactly as ``run.result`` resolved."""

    result: dict[str, Any]


class WireStartError(_Closed, tag_field="kind", tag="start-error"):
    """``upstream.start()`` rejected: ``{name, message, code?}`` of the error."""

    error: RecordedError


class WireResultError(_Closed, tag_field="kind", tag="result-error"):
    """``run.result`` rejected: ``{name, message, code?}`` of the error."""

    error: RecordedError


class RunOutcome(_Closed, kw_only=True):
    """A forwarded run's terminal facts, measured in Node."""

    published: bool
    local: bool
    childId: str | UnsetType = UNSET
    timing: Timing
    outcome: WireResult | WireStartError | WireResultError


class SubagentDecision(_Closed):
    """``forward``: call the upstream object's ``start()``; ``replay``: return the recorded run.

    On ``replay``, ``start()`` settles after ``startDelayMs`` (rejecting for a ``start-error``
    outcome) and the run's result after ``delayMs`` (rejecting for ``result-error``), both from
    admission, or with ``aborted`` as soon as the caller aborts; the run has a fresh id and
    ``localAgent: undefined``.
    """

    action: Literal["forward", "replay"]
    handle: CallHandle
    outcome: Outcome | None = None
    delayMs: float = 0.0
    startDelayMs: float = 0.0
    aborted: msgspec.Raw | None = None


class SubagentStartParams(_Closed):
    """``subagent/start``: the request without ``parent``, ``signal`` and ``descriptor``, and the
    parent as the host shows it (Python derives the call's identity from both).
    """

    request: FullRequest
    parent: ParentFacts
    signalAborted: bool = False


class SubagentPublishedParams(_Closed):
    """``subagent/published``: a forwarded ``start()`` fulfilled with run id ``childId``."""

    handle: CallHandle
    childId: str


class SubagentOutcomeParams(_Closed):
    """``subagent/outcome``: a forwarded run's terminal facts, measured in Node."""

    handle: CallHandle
    outcome: RunOutcome


class ModelRequestParams(_Closed):
    """``model/request``: one ``stream()`` call entering the ``llm/stream`` waterfall.

    ``request`` is the call's ``GenerateOptions`` as JSON, without ``signal``; ``initiator`` is
    the session header of the agent driving the call, unjudged (absent: no agent).
    """

    request: dict[str, Any]
    initiator: InitiatorFacts | None = None
    # The initiator's session id (a warm host routes the call by it); not part of the request.
    sessionId: str | None = None


class ModelDecision(_Closed):
    """``pass`` (call ``next()`` untouched), ``forward`` (call ``next()``, report the chunks under
    ``handle``) or ``replay`` (yield ``chunks``, each at ``atMs`` after the call's start if set).
    """

    action: Literal["pass", "forward", "replay"]
    handle: int = 0
    chunks: msgspec.Raw | None = None
    atMs: list[int] | None = None


class ModelRecordedParams(_Closed):
    """``model/recorded``: a forwarded call ended; ``complete`` is false when it never finished;
    ``aborted``: the caller's signal was aborted when it ended (the host gave up on it)."""

    handle: int
    chunks: msgspec.Raw
    atMs: list[float]
    complete: bool
    aborted: bool = False


class Empty(_Closed):
    """An empty result."""


class WarmNextParams(_Closed):
    """``warm/next``: the warm host's runner asks for its next session (answered when one comes)."""


class WarmJob(_Closed):
    """One session for the warm host to run: create it with ``sessionId`` and ``cwd``, send
    ``task`` as its user message; ``standIns``: recorded tools no plugin registered, to register
    on this session's agent only; ``processCwd``: the process's working directory while it runs
    (empty: leave it); ``stop``: no more sessions, exit the process."""

    sessionId: str = ""
    cwd: str = ""
    task: str = ""
    standIns: list[StandIn] = msgspec.field(default_factory=list)
    processCwd: str = ""
    stop: bool = False


class WarmDoneParams(_Closed):
    """``warm/done``: a warm session's turn went idle and its log was flushed (or it failed to run).

    ``text``: the last assistant text of the turn; ``reason``: the ``turn/end`` reason's kind
    (null: no turn ended); ``code``/``message``: the turn's error, when it ended in one;
    ``failure``: what went wrong creating or driving the session, if anything did.
    """

    sessionId: str
    text: str = ""
    reason: str | None = None
    code: str = ""
    message: str = ""
    failure: str = ""


Hook = Literal["tools", "llm", "subagent", "model", "turns", "warm", "steps"]
Feature = Literal["tools", "mock", "model", "subagents", "session"]
"""Which part of a session serves a routed method: a feature's hooks (``bridge/hooks/``), or
``session``, the session's own state (``bridge/session/state.py``)."""
Via = Literal["id", "process", "tool-call", "model-call"]
"""How the router finds a routed method's session: by the params' ``sessionId`` (a plain run's
one session whatever it says), the process's session (no id on the wire: a warm host refuses
it), or the session a call's handle was given out by (``tools/execute``, ``model/request``)."""


class _Required:
    """A routed row without an ``absent`` answer: a session without the feature refuses it."""


REQUIRED = _Required()
# A session with no tool feature: its calls run untouched and post-execute is not asked.
NEXT_NO_POST = ExecuteDecision(action="next", post=False)
# A session with no model cassette: every stream() call passes through.
PASS_MODEL = ModelDecision(action="pass")


@dataclass(frozen=True)
class Method:
    """One row of the method table: everything dispatch and routing need to know about a method.

    ``inline`` rows run in the reader, in arrival order (the order the cassettes number): the
    per-call hooks, plain functions, and ``initialize``, awaited (nothing is read before the
    handshake is answered); an inline answer that must wait comes back as a ``Later`` or
    ``Pending`` (``bridge/transport/later.py``) and is completed in a task. The others run as
    tasks that may wait and can be cancelled. A method with a ``hook`` may arrive only after
    ``initialize`` enabled that hook group; ``result`` ``None`` marks a notification.

    A row with a ``feature`` is routed (``bridge/session/sidecar.py``): its session is found
    ``via`` the row's rule, and ``handler`` names the method of that session's feature that
    serves it; ``absent`` answers a session without the feature. ``opens``/``closes`` give a
    call's handle to its session (for the rows found ``via`` it), ``notes`` names the session in
    the run report. A row without a ``feature`` is served by
    the connection's own method ``handler`` (the handshake, shutdown, the warm host's runner).
    Adding a hook is a row here, its handler in the feature, and the shim.
    """

    params: type[msgspec.Struct]
    result: type[msgspec.Struct] | None
    handler: str
    inline: bool = True
    hook: Hook | None = None
    feature: Feature | None = None
    via: Via = "id"
    absent: object = REQUIRED
    opens: Via | None = None
    closes: Via | None = None
    notes: bool = False
    gone_ok: bool = False
    """A warm session that already closed: the notification is dropped (its state went with it)."""


INITIALIZE = "initialize"

METHODS: dict[str, Method] = {
    INITIALIZE: Method(InitializeParams, InitializeResult, "initialize"),
    "shutdown": Method(ShutdownParams, ShutdownResult, "shutdown", inline=False),
    "tools/execute": Method(ExecuteParams, ExecuteDecision, "execute", hook="tools", feature="tools",
                            absent=NEXT_NO_POST, opens="tool-call"),
    "tools/post-execute": Method(PostExecuteParams, PostExecuteDecision, "post_execute", hook="tools",
                                 feature="tools", via="tool-call"),
    "tools/result": Method(ResultParams, None, "result", hook="tools", feature="tools", absent=None,
                           closes="tool-call"),
    "tools/registry": Method(RegistryParams, None, "tools_registry", hook="tools"),
    "llm/stream": Method(LlmStreamParams, LlmResponse, "respond", hook="llm", feature="mock"),
    "mock/pre-step": Method(PreStepParams, PreStepResult, "pre_step", hook="llm", feature="mock", notes=True),
    "mock/route": Method(RouteParams, RouteResult, "route", hook="llm", feature="mock"),
    "mock/command": Method(MockCommandParams, MockCommandResult, "command", hook="llm", feature="mock"),
    "mock/session-end": Method(SessionEndParams, None, "session_end", hook="llm", feature="mock", gone_ok=True),
    "mock/cancel": Method(CancelParams, CancelResult, "cancel", hook="llm", feature="mock"),
    "subagent/hello": Method(UpstreamFacts, Empty, "hello", hook="subagent", feature="subagents", via="process"),
    "subagent/start": Method(SubagentStartParams, SubagentDecision, "start", hook="subagent", feature="subagents",
                             via="process"),
    "subagent/published": Method(SubagentPublishedParams, None, "published", hook="subagent",
                                 feature="subagents", via="process"),
    "subagent/outcome": Method(SubagentOutcomeParams, Empty, "outcome", hook="subagent", feature="subagents",
                               via="process"),
    "model/request": Method(ModelRequestParams, ModelDecision, "request", hook="model", feature="model",
                            absent=PASS_MODEL, opens="model-call"),
    "model/recorded": Method(ModelRecordedParams, Empty, "recorded", hook="model", feature="model",
                             via="model-call"),
    "session/turn": Method(TurnParams, None, "session_turn", hook="turns", feature="session"),
    "model/step": Method(StepParams, None, "step", hook="steps", feature="tools", absent=None, gone_ok=True),
    "warm/next": Method(WarmNextParams, WarmJob, "warm_next", hook="warm"),
    "warm/done": Method(WarmDoneParams, Empty, "warm_done", hook="warm"),
}


class NotInitialized(ProtocolError):
    """A hook arrived before ``initialize`` succeeded."""

    code = "NOT_INITIALIZED"

    def __init__(self, method: str) -> None:
        super().__init__(f"{method} arrived before initialize succeeded; send initialize first")
        self.method = method


class AlreadyInitialized(ProtocolError):
    """A second ``initialize`` on one connection."""

    code = "ALREADY_INITIALIZED"

    def __init__(self) -> None:
        super().__init__("initialize was already sent on this connection; start a new sidecar to change the config")


class HookNotEnabled(ProtocolError):
    """A hook of a group that ``initialize`` did not enable."""

    code = "HOOK_NOT_ENABLED"

    def __init__(self, method: str, hook: str, enabled: tuple[str, ...]) -> None:
        names = ", ".join(enabled) or "none"
        super().__init__(
            f"{method} belongs to the {hook} hooks, which initialize did not enable (enabled: {names}); "
            "install only the hooks the initialize reply names"
        )
        self.method = method
        self.hook = hook


class Lifecycle:
    """Which methods the connection admits: ``initialize`` once, then the hooks it enabled.

    States: ``new`` (only ``initialize`` and ``shutdown``), ``initializing`` (the one
    ``initialize`` runs), ``ready`` (the hooks in ``enabled``) and ``failed`` (``initialize``
    was refused: hooks stay refused). ``shutdown`` is admitted in every state.
    """

    def __init__(self) -> None:
        self.state: Literal["new", "initializing", "ready", "failed"] = "new"
        self.enabled: tuple[str, ...] = ()

    def admit(self, method: str) -> None:
        """Check that ``method`` may run now (unknown methods are the dispatcher's to refuse).

        Raises:
            AlreadyInitialized: a second ``initialize``.
            NotInitialized: a hook before ``initialize`` succeeded.
            HookNotEnabled: a hook of a group ``initialize`` did not enable.
        """
        if method == INITIALIZE:
            if self.state != "new":
                raise AlreadyInitialized
            self.state = "initializing"
            return
        row = METHODS.get(method)
        if row is None or row.hook is None:
            return
        if self.state != "ready":
            raise NotInitialized(method)
        if row.hook not in self.enabled:
            raise HookNotEnabled(method, row.hook, self.enabled)

    def initialized(self, result: object) -> None:
        """Record the outcome of ``initialize``: its result, or ``None`` when it failed."""
        if isinstance(result, InitializeResult):
            self.state = "ready"
            self.enabled = tuple(result.hooks)
        else:
            self.state = "failed"
