"""The ``mock`` route's driver: per-turn plans, per-turn routing, cancellation-aware waits.

The plan (``python_core.mock``) decides every response and wait; this driver only sleeps the
waits, keeps which (session, turn) is a mock turn, and remembers the real route to restore
on the next ordinary turn (rc.8's logged request header is sticky).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anyio

from bridge.protocol import (
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
    ToolCallOut,
)
from bridge.trace import Trace
from python_core.errors import SidecarError
from python_core.mock import (
    DEFAULT_NESTED_TOOLS,
    EmitFinal,
    EmitToolCalls,
    MockPlan,
    MockSessions,
    ObservedResult,
    ReplayCommand,
    RunCommand,
    auxiliary_answer,
    load_source,
    parse_arguments,
    parse_command,
    read_source,
    refused_status,
    reject_nested_tools,
    resolve_replay_path,
    source_name_for,
)
from python_core.mock.config import MockConfig

__all__ = ["MOCK_ROUTE", "ORDINARY_TURN_TEXT", "MockDriver", "sleep_ms"]

# A wait may be up to 2^53-1 ms (seed 002: any NonNegativeInteger). Each sleep is bounded so no
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


@dataclass(frozen=True)
class _Outcome:
    tool: str
    is_error: bool
    code: str | None


def _refused_source(text: str) -> tuple[Literal["run", "replay"] | None, str | None]:
    """The mode and source name of a refused ``/mock`` text, as far as its grammar is valid."""
    try:
        command = parse_command(text)
    except SidecarError:
        return None, None
    if isinstance(command, ReplayCommand):
        return "replay", source_name_for(command.path)
    return "run", None


class MockDriver:
    """Drive mock turns started by ``/mock`` commands; one per sidecar connection."""

    def __init__(self, config: MockConfig, trace: Trace, sessions_roots: tuple[str, ...] = ()) -> None:
        self.config = config
        self.trace = trace
        # Besides the session cwd, replay may read the logs where DSH writes them.
        self.sessions_roots = sessions_roots
        self.sessions = MockSessions()
        # Delegation tools a subagent cassette serves (replays, or records for a later replay),
        # so a replay script may call them (set by the sidecar once the cassette is open).
        self.replayed_delegation: frozenset[str] = frozenset()
        self._mock_turn: dict[str, int] = {}
        self._refused: dict[tuple[str, int], SidecarError] = {}
        self._restore: dict[str, Route] = {}
        self._outcomes: dict[str, _Outcome] = {}
        self._cancelled: dict[tuple[str, int], MockPlan] = {}
        # (session, turn) of streams sleeping the wait before a step (their calls not yet emitted).
        self._waiting: set[tuple[str, int]] = set()

    def observe(self, call_id: str, tool: str, is_error: bool, code: str | None) -> None:
        """Remember a final tool outcome (from ``tools/result``) for the plan's judgement."""
        self._outcomes[call_id] = _Outcome(tool, is_error, code)

    def command(self, params: MockCommandParams) -> MockCommandResult:
        """Check a slash command's grammar; the shim then queues it as a followup turn."""
        command = parse_arguments(params.rawInput)
        if isinstance(command, RunCommand):
            return MockCommandResult(text="mock turn queued (run, 1 step)")
        return MockCommandResult(text="mock turn queued (replay)")

    def pre_step(self, params: PreStepParams) -> PreStepResult:
        """Start a mock turn when a ``/mock`` command enters the step."""
        text = next((t for t in params.texts if t.lstrip().startswith("/mock")), None)
        if text is None:
            return PreStepResult(mock=False)
        self._mock_turn[params.sessionId] = params.turn
        status = None
        try:
            plan = self.sessions.begin(self._plan(text, params))
            status = plan.status()
        except SidecarError as error:
            sys.stderr.write(f"dsh-sidecar: {error}\n")
            self._refused[(params.sessionId, params.turn)] = error
            # Published so the web UI can show the invalid-script card; no tool runs.
            mode, source_name = _refused_source(text)
            status = refused_status(
                error, session_id=params.sessionId, turn_id=str(params.turn), mode=mode,
                source_name=source_name,
            )
        self.trace.write("mock/pre-step", session=params.sessionId, turn=params.turn, mock=True)
        return PreStepResult(mock=True, status=status)

    def _plan(self, text: str, params: PreStepParams) -> MockPlan:
        command = parse_command(text)
        overwrite = None
        source_format: str
        if isinstance(command, ReplayCommand):
            path = resolve_replay_path(
                command.path, session_cwd=params.cwd, allowed_roots=self.sessions_roots
            )
            name = source_name_for(command.path)
            source_format, script = load_source(
                read_source(path, source=name), source_name=name, preserve_timing=True
            )
            # A replayed nested tool would run its children live: refuse it up front. A `run`
            # names its calls explicitly, so it may delegate (that is how subagents are tested).
            nested = (DEFAULT_NESTED_TOOLS | set(self.config.nested_tools)) - self.replayed_delegation
            reject_nested_tools(script, nested_tools=nested)
            mode, overwrite = "replay", command.overwrite_wait_ms
        else:
            script, source_format, name, mode = command.script, "command", None, "run"
        return MockPlan(
            script,
            session_id=params.sessionId,
            turn_id=str(params.turn),
            mode=mode,  # type: ignore[arg-type]
            source_format=source_format,
            overwrite_wait_ms=overwrite,
            default_gap_ms=self.config.default_gap_ms,
            source_name=name,
        )

    def route(self, params: RouteParams) -> RouteResult:
        """Route exactly the mock turn to ``mock/mock``; restore the real route afterwards."""
        session = params.sessionId
        if self._mock_turn.get(session) == params.turn:
            if params.proposed.provider != MOCK_ROUTE.provider:
                self._restore[session] = params.proposed
            return RouteResult(route=MOCK_ROUTE)
        restore = self._restore.get(session)
        if restore is not None and params.proposed.provider == MOCK_ROUTE.provider:
            return RouteResult(route=restore)
        return RouteResult(route=None)

    async def stream(self, params: LlmStreamParams) -> LlmResponse:
        """Answer one request to the mock route, sleeping the plan's wait first."""
        self.trace.write(
            "llm/stream", session=params.sessionId, turn=params.turn, step=params.step,
            purpose=params.purpose,
        )
        if params.purpose is not None:
            return LlmResponse(kind="text", text=auxiliary_answer(params.purpose))
        key = (params.sessionId, params.turn if params.turn is not None else -1)
        refused = self._refused.pop(key, None)
        if refused is not None:
            raise refused
        plan = self.sessions.lookup(params.sessionId, str(key[1]))
        if plan is None:
            return LlmResponse(kind="text", text=ORDINARY_TURN_TEXT)
        observed = [self._observed(params.sessionId, r.callId, r.tool, r.isError) for r in params.results]
        try:
            action = plan.next_response(observed)
            if isinstance(action, EmitToolCalls | EmitFinal) and action.wait_ms > 0:
                self._waiting.add(key)
                try:
                    await sleep_ms(action.wait_ms)
                finally:
                    self._waiting.discard(key)
        except anyio.get_cancelled_exc_class():
            # The only await above is the wait before the step: its calls were never emitted.
            plan.cancel(during_wait=True)
            self.sessions.finish(plan.session_id, plan.turn_id)
            self._cancelled[key] = plan
            self.trace.write("llm/stream", session=params.sessionId, turn=params.turn, cancelled=True)
            raise
        if isinstance(action, EmitToolCalls):
            calls = [ToolCallOut(id=c.call_id, name=c.name, arguments=c.arguments_json) for c in action.calls]
            return LlmResponse(kind="tool-calls", calls=calls, status=plan.status())
        self.sessions.finish(plan.session_id, plan.turn_id)
        if isinstance(action, EmitFinal):
            return LlmResponse(kind="text", text=action.text, status=plan.status())
        sys.stderr.write(f"dsh-sidecar: {action.error}\n")
        return LlmResponse(
            kind="error", text=action.error.message, code=action.error.code, status=plan.status()
        )

    def _observed(self, session: str, call_id: str, tool: str, is_error: bool) -> ObservedResult:
        outcome = self._outcomes.pop(call_id, None)
        code = outcome.code if outcome is not None else None
        return ObservedResult(call_id=call_id, tool=tool, is_error=is_error, error_code=code, session_id=session)

    def cancel(self, params: CancelParams) -> CancelResult:
        """The host aborted the turn's stream: cancel its plan (idempotent), return the final status.

        The cancelled ``llm/stream`` gets no answer to carry the terminal status, so the shim asks
        for it here and appends it before the turn closes.
        """
        plan = self.sessions.lookup(params.sessionId, str(params.turn))
        if plan is None:
            plan = self._cancelled.get((params.sessionId, params.turn))
        else:
            # mock/cancel can overtake the stream's own cancellation while it sleeps a wait.
            plan.cancel(during_wait=(params.sessionId, params.turn) in self._waiting)
            self.sessions.finish(plan.session_id, plan.turn_id)
        self._cancelled.pop((params.sessionId, params.turn), None)
        self.trace.write("mock/cancel", session=params.sessionId, turn=params.turn, found=plan is not None)
        return CancelResult(status=None if plan is None else plan.status())

    def end_session(self, session_id: str) -> None:
        """Drop every plan, route and refusal of a session that ended (idempotent)."""
        for plan in self.sessions.drop_session(session_id):
            plan.cancel()
        self._mock_turn.pop(session_id, None)
        self._restore.pop(session_id, None)
        for key in [k for k in self._cancelled if k[0] == session_id]:
            del self._cancelled[key]
        for key in [k for k in self._refused if k[0] == session_id]:
            del self._refused[key]

    def close(self) -> list[SidecarError]:
        """Drop every plan (idempotent); nothing here fails the run."""
        self.sessions.dispose_all()
        return []
