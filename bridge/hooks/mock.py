"""The ``mock`` route's driver: the wire side of the mock turn machine, and the waits.

``python_core.mock.machine`` decides which turn is a mock turn, its route, its plan, its
refusal and which tool outcomes to keep; the plan decides every response and wait. This
driver maps the wire Structs to those calls and sleeps the waits, cancellation-aware.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.later import Pending
from dsh_sidecar.bridge.transport.protocol import (
    CancelParams,
    CancelResult,
    LlmResponse,
    LlmStreamParams,
    MockCommandParams,
    MockCommandResult,
    PreStepParams,
    PreStepResult,
    Route,
    RouteParams,
    RouteResult,
    SessionEndParams,
    ToolCallOut,
)
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock import (
    EmitFinal,
    EmitToolCalls,
    RunCommand,
    auxiliary_answer,
    parse_arguments,
)
from dsh_sidecar.python_core.mock.assemble import assemble_plan, find_command, refused_turn_status
from dsh_sidecar.python_core.mock.config import MockConfig
from dsh_sidecar.python_core.mock.machine import MockTurns, SeenResult, ToolOutcome
from dsh_sidecar.python_core.mock.plan import Action, MockPlan

__all__ = ["MOCK_ROUTE", "ORDINARY_TURN_TEXT", "MockDriver", "sleep_ms"]

# A wait may be up to 2^53-1 ms (any non-negative integer, docs/mock.md). Each sleep is bounded so no
# timer limit anywhere below (a select timeout, a platform timer cap) can fire a long one early.
MAX_SLEEP_CHUNK_S = 3600.0


async def sleep_ms(
    ms: int,
    *,
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    clock: Callable[[], float] = anyio.current_time,
) -> None:
    """Sleep ``ms`` milliseconds in chunks of at most an hour, until a monotonic deadline."""
    deadline = clock() + ms / 1000
    while (left := deadline - clock()) > 0:
        await sleep(min(left, MAX_SLEEP_CHUNK_S))


MOCK_ROUTE = Route(provider="mock", model="mock")
ORDINARY_TURN_TEXT = "dsh-sidecar mock route: no /mock command in this turn"


class MockDriver:
    """Drive mock turns started by ``/mock`` commands; one per sidecar connection."""

    def __init__(self, config: MockConfig, trace: Trace, sessions_roots: tuple[str, ...] = ()) -> None:
        self.config = config
        self.trace = trace
        # Besides the session cwd, replay may read the logs where DSH writes them.
        self.sessions_roots = sessions_roots
        self.turns = MockTurns()
        # Delegation tools a subagent cassette serves (replays, or records for a later replay),
        # so a replay script may call them (set by the sidecar once the cassette is open).
        self.replayed_delegation: frozenset[str] = frozenset()

    def observe(
        self, session_id: str | None, call_id: str, tool: str, is_error: bool, code: str | None,
        message: str | None = None,
    ) -> None:
        """Hand a final tool outcome (from ``tools/result``) to the machine, which keeps awaited ones."""
        self.turns.observe(session_id, call_id, ToolOutcome(tool, is_error, code, message))

    def command(self, params: MockCommandParams) -> MockCommandResult:
        """Check a slash command's grammar; the shim then queues it as a followup turn."""
        command = parse_arguments(params.rawInput)
        if isinstance(command, RunCommand):
            return MockCommandResult(text="mock turn queued (run, 1 step)")
        return MockCommandResult(text="mock turn queued (replay)")

    def pre_step(self, params: PreStepParams) -> PreStepResult:
        """Start a mock turn when a ``/mock`` command enters the step."""
        text = find_command(params.texts)
        if text is None:
            return PreStepResult(mock=False)
        session, turn = params.sessionId, params.turn
        try:
            self.turns.check_fresh(session, turn, params.step)
            plan = assemble_plan(
                text, session_id=session, turn=turn, cwd=params.cwd,
                default_gap_ms=self.config.default_gap_ms, nested_tools=self.config.nested_tools,
                replayed_delegation=self.replayed_delegation, sessions_roots=self.sessions_roots,
            )
            status = self.turns.begin(plan, turn).status()
        except SidecarError as error:
            self.turns.refuse(session, turn, error)
            # Published so the web UI can show the invalid-script card; no tool runs.
            status = refused_turn_status(error, text, session_id=session, turn=turn)
        self.trace.write("mock/pre-step", session=session, turn=turn, mock=True)
        return PreStepResult(mock=True, status=status)

    def route(self, params: RouteParams) -> RouteResult:
        """Route exactly the mock turn to ``mock/mock``; restore the real route afterwards."""
        proposed = (params.proposed.provider, params.proposed.model)
        chosen = self.turns.route(params.sessionId, params.turn, proposed)
        return RouteResult(route=None if chosen is None else Route(provider=chosen[0], model=chosen[1]))

    def respond(self, params: LlmStreamParams) -> LlmResponse | Pending:
        """Answer one request to the mock route; ``Pending`` when the plan's wait comes first."""
        self.trace.write(
            "llm/stream", session=params.sessionId, turn=params.turn, step=params.step,
            purpose=params.purpose,
        )
        if params.purpose is not None:
            return LlmResponse(kind="text", text=auxiliary_answer(params.purpose))
        session, turn = params.sessionId, params.turn if params.turn is not None else -1
        if self.turns.state(session, turn) == "refused":
            # An error answer, not an RPC error: rc.8 then keeps our code in turn/end and
            # prints the line once, as it does for a plan's stop.
            refused = self.turns.answer_refusal(session, turn)
            return LlmResponse(kind="error", text=refused.message, code=refused.code)
        plan = self.turns.live_plan(session, turn)
        if plan is None:
            return LlmResponse(kind="text", text=ORDINARY_TURN_TEXT)
        seen = [SeenResult(r.callId, r.tool, r.isError) for r in params.results]
        action = self.turns.respond(session, turn, seen)
        if isinstance(action, EmitToolCalls | EmitFinal) and action.wait_ms > 0:
            self.turns.sleep(session, turn)
            return Pending(lambda: self._after_wait(params, plan, action))
        return self._answer(params, plan, action)

    async def stream(self, params: LlmStreamParams) -> LlmResponse:
        """``respond``, with the plan's wait slept first when there is one."""
        answer = self.respond(params)
        return await answer.answer() if isinstance(answer, Pending) else answer

    async def _after_wait(
        self, params: LlmStreamParams, plan: MockPlan, action: EmitToolCalls | EmitFinal
    ) -> LlmResponse:
        session, turn = params.sessionId, params.turn if params.turn is not None else -1
        try:
            await sleep_ms(action.wait_ms)
        except anyio.get_cancelled_exc_class():
            # The only await: the wait before the step, whose calls were never emitted.
            self.turns.interrupt(session, turn)
            self.trace.write("llm/stream", session=session, turn=params.turn, cancelled=True)
            raise
        self.turns.wake(session, turn)
        return self._answer(params, plan, action)

    def _answer(self, params: LlmStreamParams, plan: MockPlan, action: Action) -> LlmResponse:
        session, turn = params.sessionId, params.turn if params.turn is not None else -1
        if isinstance(action, EmitToolCalls):
            self.turns.emit(session, turn, action)
            calls = [ToolCallOut(id=c.call_id, name=c.name, arguments=c.arguments_json) for c in action.calls]
            return LlmResponse(kind="tool-calls", calls=calls, status=plan.status())
        self.turns.finish(session, turn)
        if isinstance(action, EmitFinal):
            return LlmResponse(kind="text", text=action.text, status=plan.status())
        return LlmResponse(
            kind="error", text=action.error.message, code=action.error.code, status=plan.status()
        )

    def cancel(self, params: CancelParams) -> CancelResult:
        """The host aborted the turn's stream: cancel its plan (idempotent), return the final status.

        The cancelled ``llm/stream`` gets no answer to carry the terminal status, so the shim asks
        for it here and appends it before the turn closes.
        """
        status = self.turns.collect(params.sessionId, params.turn)
        self.trace.write("mock/cancel", session=params.sessionId, turn=params.turn, found=status is not None)
        return CancelResult(status=status)

    def session_end(self, params: SessionEndParams) -> None:
        """``mock/session-end``: the host ended a session (idempotent)."""
        self.end_session(params.sessionId)

    def end_session(self, session_id: str) -> None:
        """Drop every plan, route and refusal of a session that ended (idempotent)."""
        self.turns.end_session(session_id)

    def close(self) -> list[str]:
        """Drop every plan (idempotent); return the fix for each kind of refused turn."""
        self.turns.dispose()
        return list(self.turns.fixes)

    @property
    def refused(self) -> bool:
        """Whether a ``/mock`` turn was refused before any tool ran (exit code 3)."""
        return self.turns.refusals > 0
