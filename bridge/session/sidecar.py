"""The sidecar's method handlers: decode a hook, route it to its session's state, answer the shim.

One ``Sidecar`` per connection (no globals). A plain ``dsh`` run has one ``SessionState`` for
the whole process, made from the row config at ``initialize``. A warm host (row config
``warm``, docs/warm-host.md) has none at first: each run the run API sends opens a
``SessionState`` of its own, every hook is routed by its session id, and the run's outcome is
answered when its session closes, while the process lives on.
"""

from __future__ import annotations

import msgspec

from dsh_sidecar.bridge.hooks.tools import ToolHooks
from dsh_sidecar.bridge.session.state import SessionState
from dsh_sidecar.bridge.session.warm import WarmHost, WarmSessionUnknown
from dsh_sidecar.bridge.transport.later import Later, Pending
from dsh_sidecar.bridge.transport.protocol import (
    PROTOCOL_VERSION,
    CancelParams,
    CancelResult,
    Empty,
    ExecuteDecision,
    ExecuteParams,
    InitializeParams,
    InitializeResult,
    LlmResponse,
    LlmStreamParams,
    MockCommandParams,
    MockCommandResult,
    ModelDecision,
    ModelRecordedParams,
    ModelRequestParams,
    NotInitialized,
    PostExecuteDecision,
    PostExecuteParams,
    PreStepParams,
    PreStepResult,
    RegistryParams,
    ResultParams,
    RouteParams,
    RouteResult,
    SessionEndParams,
    ShutdownParams,
    ShutdownResult,
    SubagentDecision,
    SubagentOutcomeParams,
    SubagentPublishedParams,
    SubagentStartParams,
    TurnParams,
    UpstreamFacts,
    WarmDoneParams,
    WarmNextParams,
)
from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.config import parse_sidecar_config
from dsh_sidecar.python_core.errors import ProtocolError

__all__ = ["Sidecar"]

_PASS_MODEL = ModelDecision(action="pass")
# A session with no tool feature: its calls run untouched and post-execute is not asked.
_NEXT_NO_POST = ExecuteDecision(action="next", post=False)


class Sidecar:
    """State and handlers of one sidecar connection: the process's session, or a warm host's."""

    def __init__(self) -> None:
        self.process: SessionState | None = None
        self.warm: WarmHost | None = None
        # Python's model-call handles are per session; the wire's are per connection.
        self._model_handles: dict[int, tuple[SessionState, int]] = {}
        self._next_model_handle = 0
        # tools/post-execute names only the call's handle: the session its execute named.
        self._tool_sessions: dict[str, SessionState] = {}

    # The process's features, as a plain run and the bridge tests see them.
    @property
    def tools(self) -> ToolHooks | None:
        """The plain run's tool hooks (``None`` in a warm host)."""
        return None if self.process is None else self.process.tools

    async def initialize(self, params: InitializeParams) -> InitializeResult:
        """Check the protocol, parse the config and open the configured features (or the warm host)."""
        if params.protocolVersion != PROTOCOL_VERSION:
            raise ProtocolError(
                f"shim speaks protocol {params.protocolVersion}, sidecar speaks {PROTOCOL_VERSION}; "
                "reinstall the plugin with `dsh-sidecar install`"
            )
        config = parse_sidecar_config(params.config, cwd=params.cwd)
        if config.warm is not None:
            self.warm = await WarmHost.connect(config.warm, dict(params.host))
            return InitializeResult(
                protocolVersion=PROTOCOL_VERSION, hooks=["tools", "llm", "model", "turns", "warm"],
                sidecarVersion=__version__, askExecute=True, registry="contracts", warm=True,
            )
        state = SessionState()
        state.open(config, params.host)
        self.process = state
        return InitializeResult(
            protocolVersion=PROTOCOL_VERSION, hooks=state.hooks, sidecarVersion=__version__,
            subagent=None if state.subagents is None else state.subagents.setup, askExecute=state.ask_execute,
            standIns=[] if state.tools is None else state.tools.stand_ins(),
            registry="none" if state.tools is None else state.tools.registry_view(),
        )

    async def shutdown(self, _params: ShutdownParams) -> ShutdownResult:
        """Close every feature; report the errors that must fail the DSH process."""
        if self.warm is not None:
            return await self.warm.shutdown()
        if self.process is None:
            return ShutdownResult(exitCode=0, errors=[])
        return await self.process.close()

    def _state(self, session_id: str | None, method: str) -> SessionState:
        if self.warm is not None:
            return self.warm.state(session_id, method)
        if self.process is None:
            raise NotInitialized(method)
        return self.process

    # --- the warm host's own methods (the shim's runner asks, Python answers) ---

    def warm_next(self, _params: WarmNextParams) -> Pending:
        """``warm/next``: the next session to run, once the run API sends one."""
        return Pending(self._warm("warm/next").next)

    def warm_done(self, params: WarmDoneParams) -> Pending:
        """``warm/done``: a session's turn ended and its log is flushed: close it, answer its run."""
        warm = self._warm("warm/done")
        if warm.is_open(params.sessionId):
            # Calls the host never finished keep nothing of a closed session alive.
            state = warm.state(params.sessionId, "warm/done")
            for handle in [h for h, s in self._tool_sessions.items() if s is state]:
                del self._tool_sessions[handle]
            for number in [n for n, (s, _) in self._model_handles.items() if s is state]:
                del self._model_handles[number]
        return Pending(lambda: warm.done(params))

    def _warm(self, method: str) -> WarmHost:
        if self.warm is None:
            raise NotInitialized(method)
        return self.warm

    # --- hooks, routed by session ---

    def tools_execute(self, params: ExecuteParams) -> ExecuteDecision | Later | Pending:
        """``tools/execute``: pass through, serve from the cassette, or refuse."""
        state = self._state(params.sessionId, "tools/execute")
        if state.tools is None:
            return _NEXT_NO_POST
        if self.warm is not None:
            self._tool_sessions[params.handle] = state
        return state.tools_execute(params)

    def tools_post_execute(self, params: PostExecuteParams) -> PostExecuteDecision:
        """``tools/post-execute``: capture the outcome at the post-execute input boundary."""
        if self.warm is not None:
            state = self._tool_sessions.get(params.handle)
            if state is None:
                raise WarmSessionUnknown("tools/post-execute", None, handle=True)
        elif self.process is None:
            raise NotInitialized("tools/post-execute")
        else:
            state = self.process
        return state.tools_post_execute(params)

    def tools_result(self, params: ResultParams) -> Later | None:
        """``tools/result`` notification: the final outcome."""
        state = self._state(params.sessionId, "tools/result")
        self._tool_sessions.pop(params.handle, None)
        if state.tools is None:
            return None
        return state.tools_result(params)

    def tools_registry(self, params: RegistryParams) -> Later | None:
        """``tools/registry`` notification: the registered tools and the stand-ins."""
        if self.warm is not None:
            self.warm.registry(params)
            return None
        return self._state(None, "tools/registry").tools_registry(params)

    def llm_stream(self, params: LlmStreamParams) -> LlmResponse | Pending:
        """``llm/stream``: the next response of the ``mock`` route (after its wait, if any)."""
        return self._state(params.sessionId, "llm/stream").llm_stream(params)

    def mock_pre_step(self, params: PreStepParams) -> PreStepResult:
        """``mock/pre-step``: start a mock turn when the entering text is a ``/mock`` command."""
        return self._state(params.sessionId, "mock/pre-step").mock_pre_step(params)

    def mock_route(self, params: RouteParams) -> RouteResult:
        """``mock/route``: route exactly the mock turn to ``mock/mock``, restore afterwards."""
        return self._state(params.sessionId, "mock/route").mock_route(params)

    def mock_cancel(self, params: CancelParams) -> CancelResult:
        """``mock/cancel``: the host aborted a mock stream; cancel the plan, return its status."""
        return self._state(params.sessionId, "mock/cancel").mock_cancel(params)

    def mock_session_end(self, params: SessionEndParams) -> None:
        """``mock/session-end``: forget the session's plans and routes (idempotent)."""
        if self.warm is not None and not self.warm.is_open(params.sessionId):
            return  # a warm session's plans went with its state when it closed
        self._state(params.sessionId, "mock/session-end").mock_session_end(params)

    def mock_command(self, params: MockCommandParams) -> MockCommandResult:
        """``mock/command``: check a ``/mock`` slash command before the shim queues its turn."""
        return self._state(params.sessionId, "mock/command").mock_command(params)

    def subagent_hello(self, params: UpstreamFacts) -> Empty:
        """``subagent/hello``: the upstream provider's facts, before any start."""
        return self._state(None, "subagent/hello").subagent_hello(params)

    def subagent_start(self, params: SubagentStartParams) -> SubagentDecision | Later:
        """``subagent/start``: forward, replay, or refuse one ``start()``."""
        return self._state(None, "subagent/start").subagent_start(params)

    def subagent_published(self, params: SubagentPublishedParams) -> None:
        """``subagent/published`` notification."""
        self._state(None, "subagent/published").subagent_published(params)

    def subagent_outcome(self, params: SubagentOutcomeParams) -> Later | Empty:
        """``subagent/outcome``: a forwarded run settled; answered once its line is durable."""
        return self._state(None, "subagent/outcome").subagent_outcome(params)

    def model_request(self, params: ModelRequestParams) -> ModelDecision:
        """``model/request``: pass, forward (record) or replay one ``stream()`` call."""
        state = self._state(params.sessionId, "model/request")
        if state.model is None:
            return _PASS_MODEL
        decision = state.model_request(params)
        if self.warm is None or decision.action != "forward":
            return decision
        self._next_model_handle += 1
        self._model_handles[self._next_model_handle] = (state, decision.handle)
        return msgspec.structs.replace(decision, handle=self._next_model_handle)

    def model_recorded(self, params: ModelRecordedParams) -> Later | Empty:
        """``model/recorded``: a forwarded call ended; its frame is fsync-ed before the answer."""
        if self.warm is None:
            return self._state(None, "model/recorded").model_recorded(params)
        found = self._model_handles.pop(params.handle, None)
        if found is None:
            raise WarmSessionUnknown("model/recorded", None, handle=True)
        state, handle = found
        return state.model_recorded(msgspec.structs.replace(params, handle=handle))

    def session_turn(self, params: TurnParams) -> None:
        """``session/turn`` notification: count the turns a recording spans."""
        self._state(params.sessionId, "session/turn").session_turn(params)
