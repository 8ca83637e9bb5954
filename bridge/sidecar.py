"""The sidecar's method handlers: decode a hook, ask ``python_core``, answer the shim.

One ``Sidecar`` per connection (no globals). It owns the parsed config, the tool cassette
session and the mock driver, and turns their decisions into wire payloads.
"""

from __future__ import annotations

import os
import sys

from bridge.mock_driver import MockDriver
from bridge.protocol import (
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
    PostExecuteDecision,
    PostExecuteParams,
    PreStepParams,
    PreStepResult,
    ResultParams,
    RouteParams,
    RouteResult,
    SessionEndParams,
    ShutdownParams,
    ShutdownResult,
    SubagentDecision,
    SubagentOutcomeParams,
    SubagentPublishedParams,
    TurnParams,
)
from bridge.server import Handler, InlineHandler
from bridge.subagent_hooks import SubagentHooks
from bridge.tool_hooks import ToolHooks
from bridge.trace import Trace
from python_core import __version__
from python_core.config import SidecarConfig, parse_sidecar_config
from python_core.errors import ProtocolError, SidecarError
from python_core.subagent_cassette import StartRequest, UpstreamFacts
from python_core.turns import TurnLedger

__all__ = ["Sidecar"]


class NotInitialized(ProtocolError):
    """A hook arrived before ``initialize``."""

    def __init__(self) -> None:
        super().__init__("a hook arrived before initialize")


class Sidecar:
    """State and handlers of one sidecar connection."""

    def __init__(self) -> None:
        self.config: SidecarConfig | None = None
        self.trace = Trace(None)
        self.tools: ToolHooks | None = None
        self.mock: MockDriver | None = None
        self.subagents: SubagentHooks | None = None
        self.startup_errors: list[SidecarError] = []
        self.turns = TurnLedger()

    def handlers(self) -> dict[str, Handler]:
        """The async methods: they may wait (and be cancelled)."""
        return {
            "initialize": self.initialize,
            "shutdown": self.shutdown,
            "llm/stream": self.llm_stream,
        }

    def inline_handlers(self) -> dict[str, InlineHandler]:
        """The per-call hooks: fast, never awaiting, run in arrival order."""
        return {
            "tools/execute": self.tools_execute,
            "tools/post-execute": self.tools_post_execute,
            "tools/result": self.tools_result,
            "mock/pre-step": self.mock_pre_step,
            "mock/route": self.mock_route,
            "mock/command": self.mock_command,
            "mock/session-end": self.mock_session_end,
            "mock/cancel": self.mock_cancel,
            "subagent/hello": self.subagent_hello,
            "subagent/start": self.subagent_start,
            "subagent/published": self.subagent_published,
            "subagent/outcome": self.subagent_outcome,
            "session/turn": self.session_turn,
        }

    async def initialize(self, params: InitializeParams) -> InitializeResult:
        """Check the protocol, parse the config and open the configured features."""
        if params.protocolVersion != PROTOCOL_VERSION:
            raise ProtocolError(
                f"shim speaks protocol {params.protocolVersion}, sidecar speaks {PROTOCOL_VERSION}; "
                "reinstall the plugin with `dsh-sidecar install`"
            )
        config = parse_sidecar_config(params.config, cwd=params.cwd)
        self.config = config
        self.trace = Trace(config.trace)
        self.trace.write("initialize", host=params.host, pid=os.getpid(), bridge=os.path.dirname(__file__))
        hooks: list[str] = []
        if config.mock.enabled:
            home = os.environ.get("DSH_HOME", "").strip() or os.path.expanduser("~/.dsh")
            self.mock = MockDriver(config.mock, self.trace, (os.path.join(os.path.abspath(home), "sessions"),))
            hooks.append("llm")
        # The mock plan judges results by their error codes, which only tools/result carries.
        if config.tool_cassette is not None or config.trace is not None or self.mock is not None:
            self.tools = ToolHooks.open(config.tool_cassette, self.trace, self.mock)
            hooks.append("tools")
        if config.subagent_cassette is not None:
            self.subagents = SubagentHooks.open(
                config.subagent_cassette, cwd=params.cwd,
                host_version=params.host.get("@deepseek-ai/dsh-subagent"), trace=self.trace,
            )
            hooks.append("subagent")
        # A recording is published only once its turn really ended: the shim reports turns.
        if (config.tool_cassette is not None and config.tool_cassette.mode == "record") or (
            self.subagents is not None and self.subagents.cassette.config.mode == "record"
        ):
            hooks.append("turns")
        return InitializeResult(
            protocolVersion=PROTOCOL_VERSION, hooks=hooks, sidecarVersion=__version__,  # type: ignore[arg-type]
            subagent=None if self.subagents is None else self.subagents.setup,
        )

    async def shutdown(self, _params: ShutdownParams) -> ShutdownResult:
        """Close every feature; report the errors that must fail the DSH process."""
        errors: list[SidecarError] = list(self.startup_errors)
        notes: list[str] = []
        interruption = self.turns.interruption()
        if self.tools is not None:
            tool_errors, notes = self.tools.close(interruption)
            errors.extend(tool_errors)
        if self.mock is not None:
            errors.extend(self.mock.close())
        if self.subagents is not None:
            subagent_errors, subagent_notes = self.subagents.close(interruption)
            errors.extend(subagent_errors)
            notes.extend(subagent_notes)
        self.trace.write("shutdown", errors=[e.code for e in errors])
        self.trace.close()
        exit_code = max((e.exit_code for e in errors), default=0)
        return ShutdownResult(
            exitCode=min(exit_code, 1) if errors else 0, errors=[str(e) for e in errors], notes=notes
        )

    def _tool_hooks(self) -> ToolHooks:
        if self.tools is None:
            raise NotInitialized
        return self.tools

    def _mock(self) -> MockDriver:
        if self.mock is None:
            raise NotInitialized
        return self.mock

    def tools_execute(self, params: ExecuteParams) -> ExecuteDecision:
        """``tools/execute``: pass through, serve from the cassette, or refuse."""
        return self._tool_hooks().execute(params)

    def tools_post_execute(self, params: PostExecuteParams) -> PostExecuteDecision:
        """``tools/post-execute``: capture the outcome at the post-execute input boundary."""
        return self._tool_hooks().post_execute(params)

    def tools_result(self, params: ResultParams) -> None:
        """``tools/result`` notification: the final outcome."""
        self._tool_hooks().result(params)

    async def llm_stream(self, params: LlmStreamParams) -> LlmResponse:
        """``llm/stream``: the next response of the ``mock`` route (waits happen here)."""
        return await self._mock().stream(params)

    def mock_pre_step(self, params: PreStepParams) -> PreStepResult:
        """``mock/pre-step``: start a mock turn when the entering text is a ``/mock`` command."""
        return self._mock().pre_step(params)

    def mock_route(self, params: RouteParams) -> RouteResult:
        """``mock/route``: route exactly the mock turn to ``mock/mock``, restore afterwards."""
        return self._mock().route(params)

    def _subagents(self) -> SubagentHooks:
        if self.subagents is None:
            raise NotInitialized
        return self.subagents

    def subagent_hello(self, params: UpstreamFacts) -> Empty:
        """``subagent/hello``: the upstream provider's facts, before any start."""
        self._subagents().hello(params)
        return Empty()

    def subagent_start(self, params: StartRequest) -> SubagentDecision:
        """``subagent/start``: forward, replay, or refuse one ``start()``."""
        return self._subagents().start(params)

    def subagent_published(self, params: SubagentPublishedParams) -> None:
        """``subagent/published`` notification."""
        self._subagents().published(params)

    def subagent_outcome(self, params: SubagentOutcomeParams) -> Empty:
        """``subagent/outcome``: a forwarded run settled."""
        self._subagents().outcome(params)
        return Empty()

    def session_turn(self, params: TurnParams) -> None:
        """``session/turn`` notification: count the turns a recording spans."""
        if self.config is None:
            raise NotInitialized
        if params.phase == "start":
            self.turns.start(params.sessionId, params.turn)
        else:
            self.turns.end(params.sessionId, params.turn, params.reason)

    def mock_cancel(self, params: CancelParams) -> CancelResult:
        """``mock/cancel``: the host aborted a mock stream; cancel the plan, return its status."""
        return self._mock().cancel(params)

    def mock_session_end(self, params: SessionEndParams) -> None:
        """``mock/session-end``: forget the session's plans and routes (idempotent)."""
        self._mock().end_session(params.sessionId)

    def mock_command(self, params: MockCommandParams) -> MockCommandResult:
        """``mock/command``: check a ``/mock`` slash command before the shim queues its turn."""
        return self._mock().command(params)


def report(error: SidecarError) -> None:
    """Print a named error on stderr (the shim forwards our stderr to the host's)."""
    sys.stderr.write(f"dsh-sidecar: {error}\n")
