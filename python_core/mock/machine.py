"""The mock turn machine: which turns are mock turns, their plans, refusals and tool outcomes.

Rule: ``TURN_TRANSITIONS`` lists every legal (state, event) pair of one turn, keyed by (DSH
session id, turn number). An event the table does not list changes nothing and raises
``MockIllegalEvent`` (``MOCK_ILLEGAL_EVENT``), as h11 does. ``idle`` is "no record": a turn
that reaches it is forgotten, so memory is bounded by the turns in flight. Sans-I/O: the
bridge sleeps the waits and maps the wire; every decision about a turn is made here. Inside a
running turn, the plan's own table (``plan.TRANSITIONS``) decides each response.

Tool outcomes (``tools/result``) are kept by (session id, call id), only for calls a live plan
emitted and has not yet judged; every other result (the ordinary turns of a session) is dropped
on arrival. Call ids are minted per turn number, so sessions share them: the session id keeps
one session's outcome from being judged in another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final, Literal

import msgspec

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.errors import (
    DuplicateMockTurn,
    MidTurnMockCommand,
    MockIllegalEvent,
    SessionsDisposed,
)
from dsh_sidecar.python_core.mock.plan import Action, EmitToolCalls, MockPlan, MockStatus, ObservedResult
from dsh_sidecar.python_core.mock.reasons import refusal_hint

__all__ = [
    "TURN_TRANSITIONS",
    "MockTurns",
    "ModelRoute",
    "SeenResult",
    "ToolOutcome",
    "TurnEvent",
    "TurnState",
    "TurnsStats",
]

TurnState = Literal["idle", "refused", "running", "waiting", "cancelled"]
TurnEvent = Literal[
    "begin", "refuse", "answer", "respond", "sleep", "wake", "emit", "finish", "interrupt",
    "collect", "end",
]

_STATES: Final[tuple[TurnState, ...]] = ("idle", "refused", "running", "waiting", "cancelled")

# begin: a /mock command entered a step and its plan is live.
# refuse: a command was refused before any tool ran (or a second one entered a live turn).
# answer: the model stream answered the refusal, once.
# respond: the plan judged the results the model saw and chose its next response.
# sleep / wake: the stream sleeps the wait before the plan's response / the wait ended.
# emit: tool calls went out; their results are awaited. finish: the final text or a stop went out.
# interrupt: the stream was cancelled while sleeping (after mock/cancel collected it: no-op).
# collect: mock/cancel took the terminal status. end: the session ended.
TURN_TRANSITIONS: Final[Mapping[tuple[TurnState, TurnEvent], TurnState]] = MappingProxyType({
    ("idle", "begin"): "running",
    ("idle", "refuse"): "refused",
    ("running", "refuse"): "refused",
    ("refused", "answer"): "idle",
    ("running", "respond"): "running",
    ("running", "sleep"): "waiting",
    ("waiting", "wake"): "running",
    ("running", "emit"): "running",
    ("running", "finish"): "idle",
    ("waiting", "interrupt"): "cancelled",
    ("idle", "interrupt"): "idle",
    **{(state, "collect"): "idle" for state in _STATES},
    **{(state, "end"): "idle" for state in _STATES},
})

ModelRoute = tuple[str, str]
"""A (provider, model) pair."""

MOCK_ROUTE: Final[ModelRoute] = ("mock", "mock")


class ToolOutcome(msgspec.Struct, frozen=True):
    """What ``tools/result`` says about one awaited call: its error code and runtime message."""

    tool: str
    is_error: bool
    code: str | None
    message: str | None = None


class SeenResult(msgspec.Struct, frozen=True):
    """A tool result as the model sees it in its next request."""

    call_id: str
    tool: str
    is_error: bool


class TurnsStats(msgspec.Struct, frozen=True):
    """Counts of what the machine holds, for diagnostics and leak tests."""

    turns: int
    awaited_calls: int
    outcomes: int
    routed_sessions: int
    disposed: bool


class _Turn:
    """The record of one non-idle turn."""

    __slots__ = ("awaiting", "error", "plan", "state")

    def __init__(self, state: TurnState) -> None:
        self.state: TurnState = state
        self.plan: MockPlan | None = None
        self.error: SidecarError | None = None
        self.awaiting: tuple[str, ...] = ()


class MockTurns:
    """Every mock turn of one sidecar connection."""

    def __init__(self) -> None:
        self._turns: dict[tuple[str, int], _Turn] = {}
        # session -> its latest mock turn, and the real route to restore after it.
        self._mock_turn: dict[str, int] = {}
        self._restore: dict[str, ModelRoute] = {}
        # (session, call id) -> the turns awaiting it, and the outcomes that arrived for awaited
        # calls only. Ids are minted per turn number, so two sessions' first turns share them.
        self._awaited: dict[tuple[str, str], set[tuple[str, int]]] = {}
        self._outcomes: dict[tuple[str, str], ToolOutcome] = {}
        # How many turns were refused, and their distinct fixes in order (a few sentences).
        self._refusals = 0
        self._fixes: dict[str, None] = {}
        self._disposed = False

    def state(self, session_id: str, turn: int) -> TurnState:
        """The state of one turn (``idle`` when it has no record)."""
        record = self._turns.get((session_id, turn))
        return "idle" if record is None else record.state

    def _fire(self, key: tuple[str, int], event: TurnEvent) -> _Turn:
        record = self._turns.get(key)
        state: TurnState = "idle" if record is None else record.state
        target = TURN_TRANSITIONS.get((state, event))
        if target is None:
            raise MockIllegalEvent(state, event)
        if record is None:
            record = _Turn(target)
        if target == "idle":
            self._turns.pop(key, None)
            self._release(key, record)
        else:
            self._turns[key] = record
        record.state = target
        return record

    def _release(self, key: tuple[str, int], record: _Turn) -> None:
        for call_id in record.awaiting:
            call = (key[0], call_id)
            waiters = self._awaited.get(call)
            if waiters is None:
                continue
            waiters.discard(key)
            if not waiters:
                del self._awaited[call]
                self._outcomes.pop(call, None)
        record.awaiting = ()

    def check_fresh(self, session_id: str, turn: int, step: int = 1) -> None:
        """Refuse a ``/mock`` command entering a mock turn, or a later step of an ordinary turn.

        Raises:
            SessionsDisposed: the machine was disposed.
            DuplicateMockTurn: the turn already has a record.
            MidTurnMockCommand: the command entered step 2 or later of an ordinary turn.
        """
        if self._disposed:
            raise SessionsDisposed()
        if (session_id, turn) in self._turns:
            raise DuplicateMockTurn(str(turn))
        if step > 1:
            raise MidTurnMockCommand(step)

    def begin(self, plan: MockPlan, turn: int) -> MockPlan:
        """Start the mock turn ``turn`` of ``plan.session_id`` with its plan.

        Raises:
            MockIllegalEvent: the turn already has a record (``check_fresh`` names it).
        """
        self._fire((plan.session_id, turn), "begin").plan = plan
        self._mock_turn[plan.session_id] = turn
        return plan

    def refuse(self, session_id: str, turn: int, error: SidecarError) -> None:
        """Make ``turn`` a mock turn whose stream answers ``error`` once; no tool runs."""
        key = (session_id, turn)
        live = self._turns.get(key)
        plan = None if live is None else live.plan
        record = self._fire(key, "refuse")
        if plan is not None:
            plan.cancel()
        self._release(key, record)
        record.plan = None
        record.error = error
        self._mock_turn[session_id] = turn
        self._refusals += 1
        fix = refusal_hint(error)
        if fix is not None:
            self._fixes[fix] = None

    @property
    def refusals(self) -> int:
        """How many turns were refused before any tool ran."""
        return self._refusals

    @property
    def fixes(self) -> tuple[str, ...]:
        """The fix of every kind of refusal so far, each once, first refusal first."""
        return tuple(self._fixes)

    def answer_refusal(self, session_id: str, turn: int) -> SidecarError:
        """The refusal the stream of a ``refused`` turn answers, once."""
        record = self._fire((session_id, turn), "answer")
        error = record.error
        if error is None:  # only refuse makes a refused record, and it sets the error
            raise MockIllegalEvent(record.state, "answer")
        return error

    def live_plan(self, session_id: str, turn: int) -> MockPlan | None:
        """The plan a stream of ``turn`` advances, if the turn is running."""
        record = self._turns.get((session_id, turn))
        return record.plan if record is not None and record.state == "running" else None

    def route(self, session_id: str, turn: int, proposed: ModelRoute) -> ModelRoute | None:
        """Route exactly the mock turn to ``mock/mock``; restore the real route afterwards.

        rc.8's logged request header is sticky, so the turn after a mock turn proposes the
        mock route again: it gets back the route the mock turn replaced.
        """
        if self._mock_turn.get(session_id) == turn:
            if proposed[0] != MOCK_ROUTE[0]:
                self._restore[session_id] = proposed
            return MOCK_ROUTE
        restore = self._restore.get(session_id)
        if restore is not None and proposed[0] == MOCK_ROUTE[0]:
            return restore
        return None

    def observe(self, session_id: str | None, call_id: str, outcome: ToolOutcome) -> None:
        """Keep a final tool outcome of ``session_id`` if a live plan there awaits the call.

        An outcome of no known session (the host named no agent) is dropped: it cannot be told
        apart from another session's call with the same id.
        """
        if session_id is not None and (session_id, call_id) in self._awaited:
            self._outcomes[(session_id, call_id)] = outcome

    def respond(self, session_id: str, turn: int, seen: Sequence[SeenResult]) -> Action:
        """Judge what the model saw and return the plan's next response (before its wait).

        Raises:
            MockIllegalEvent: the turn is not running.
            PlanClosed: the plan is terminal.
        """
        key = (session_id, turn)
        record = self._fire(key, "respond")
        plan = record.plan
        if plan is None:  # a running record always holds its plan (only begin makes one)
            raise MockIllegalEvent(record.state, "respond")
        observed = [self._observed(session_id, result) for result in seen]
        self._release(key, record)
        return plan.next_response(observed)

    def _observed(self, session_id: str, result: SeenResult) -> ObservedResult:
        outcome = self._outcomes.get((session_id, result.call_id))
        return ObservedResult(
            call_id=result.call_id, tool=result.tool, is_error=result.is_error,
            error_code=None if outcome is None else outcome.code, session_id=session_id,
            error_message=None if outcome is None else outcome.message,
        )

    def sleep(self, session_id: str, turn: int) -> None:
        """The stream starts sleeping the wait before the response."""
        self._fire((session_id, turn), "sleep")

    def wake(self, session_id: str, turn: int) -> None:
        """The wait ended."""
        self._fire((session_id, turn), "wake")

    def emit(self, session_id: str, turn: int, action: EmitToolCalls) -> None:
        """The calls of ``action`` went out: await their outcomes."""
        key = (session_id, turn)
        record = self._fire(key, "emit")
        record.awaiting = tuple(call.call_id for call in action.calls)
        for call_id in record.awaiting:
            self._awaited.setdefault((session_id, call_id), set()).add(key)

    def finish(self, session_id: str, turn: int) -> None:
        """The final text or a stop went out: the turn is over."""
        self._fire((session_id, turn), "finish")

    def interrupt(self, session_id: str, turn: int) -> None:
        """The stream was cancelled in its wait: the step's calls never went out."""
        record = self._fire((session_id, turn), "interrupt")
        if record.plan is not None:
            record.plan.cancel(during_wait=True)

    def collect(self, session_id: str, turn: int) -> MockStatus | None:
        """``mock/cancel``: cancel the turn's plan (idempotent) and return its final status."""
        key = (session_id, turn)
        record = self._turns.get(key)
        plan = None if record is None else record.plan
        state = self.state(session_id, turn)
        self._fire(key, "collect")
        if plan is None:
            return None
        plan.cancel(during_wait=state == "waiting")
        return plan.status()

    def end_session(self, session_id: str) -> None:
        """Forget every turn, route and outcome of a session that ended (idempotent)."""
        for key in [key for key in self._turns if key[0] == session_id]:
            plan = self._fire(key, "end").plan
            if plan is not None:
                plan.cancel()
        self._mock_turn.pop(session_id, None)
        self._restore.pop(session_id, None)

    def dispose(self) -> None:
        """Cancel every plan, forget every turn and refuse new ones (idempotent)."""
        self._disposed = True
        for session_id in {key[0] for key in self._turns}:
            self.end_session(session_id)

    def statistics(self) -> TurnsStats:
        """What the machine holds now."""
        return TurnsStats(
            turns=len(self._turns), awaited_calls=len(self._awaited), outcomes=len(self._outcomes),
            routed_sessions=len(self._mock_turn), disposed=self._disposed,
        )
