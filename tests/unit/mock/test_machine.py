"""The mock turn machine: every legal and illegal transition, routing, outcomes, teardown."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

from dsh_sidecar.python_core.mock.errors import (
    DuplicateMockTurn,
    InvalidCommand,
    MidTurnMockCommand,
    MockIllegalEvent,
    SessionsDisposed,
)
from dsh_sidecar.python_core.mock.machine import (
    TURN_TRANSITIONS,
    MockTurns,
    SeenResult,
    ToolOutcome,
    TurnEvent,
    TurnState,
)
from dsh_sidecar.python_core.mock.plan import EmitFinal, EmitToolCalls, MockPlan, Stop
from dsh_sidecar.python_core.mock.script import validate_script

SCRIPT = validate_script(
    {"type": "dsh-mock-script", "version": 1, "steps": [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}]},
    source="s.json",
)
STATES: tuple[TurnState, ...] = ("idle", "refused", "running", "waiting", "cancelled")
EVENTS: tuple[TurnEvent, ...] = (
    "begin", "refuse", "answer", "respond", "sleep", "wake", "emit", "finish", "interrupt", "collect", "end",
)
REAL = ("deepseek-official", "deepseek-v4-flash")


def plan(session: str = "s1", turn: int = 1) -> MockPlan:
    return MockPlan(SCRIPT, session_id=session, turn_id=str(turn), mode="replay", source_format="canonical-json")


def into(turns: MockTurns, state: TurnState) -> None:
    """Drive turn 1 of session s1 into ``state`` through the public calls."""
    if state == "refused":
        turns.refuse("s1", 1, InvalidCommand(1, "bad"))
    if state in ("running", "waiting", "cancelled"):
        turns.begin(plan(), 1)
    if state in ("waiting", "cancelled"):
        turns.respond("s1", 1, [])
        turns.sleep("s1", 1)
    if state == "cancelled":
        turns.interrupt("s1", 1)


def fire(turns: MockTurns, event: TurnEvent) -> None:
    """Send ``event`` to turn 1 of session s1 through its public call."""
    first_calls = EmitToolCalls(wait_ms=0, calls=plan().next_response([]).calls)  # type: ignore[union-attr]
    calls: dict[TurnEvent, Callable[[], object]] = {
        "begin": lambda: turns.begin(plan(), 1),
        "refuse": lambda: turns.refuse("s1", 1, InvalidCommand(1, "bad")),
        "answer": lambda: turns.answer_refusal("s1", 1),
        "respond": lambda: turns.respond("s1", 1, []),
        "sleep": lambda: turns.sleep("s1", 1),
        "wake": lambda: turns.wake("s1", 1),
        "emit": lambda: turns.emit("s1", 1, first_calls),
        "finish": lambda: turns.finish("s1", 1),
        "interrupt": lambda: turns.interrupt("s1", 1),
        "collect": lambda: turns.collect("s1", 1),
        "end": lambda: turns.end_session("s1"),
    }
    calls[event]()


def test_the_table_names_only_known_states_and_events() -> None:
    assert {s for s, _ in TURN_TRANSITIONS} <= set(STATES)
    assert {e for _, e in TURN_TRANSITIONS} == set(EVENTS)
    assert set(TURN_TRANSITIONS.values()) <= set(STATES)


@pytest.mark.parametrize(("state", "event"), sorted(TURN_TRANSITIONS))
def test_every_legal_transition_reaches_its_target(state: TurnState, event: TurnEvent) -> None:
    turns = MockTurns()
    into(turns, state)
    assert turns.state("s1", 1) == state

    fire(turns, event)

    assert turns.state("s1", 1) == TURN_TRANSITIONS[(state, event)]


ILLEGAL = [pair for pair in itertools.product(STATES, EVENTS) if pair not in TURN_TRANSITIONS]


@pytest.mark.parametrize(("state", "event"), ILLEGAL)
def test_every_illegal_event_raises_and_changes_nothing(state: TurnState, event: TurnEvent) -> None:
    turns = MockTurns()
    into(turns, state)
    before = turns.statistics()

    with pytest.raises(MockIllegalEvent) as caught:
        fire(turns, event)

    assert caught.value.code == "MOCK_ILLEGAL_EVENT"
    assert (caught.value.state, caught.value.event) == (state, event)
    assert turns.state("s1", 1) == state
    assert turns.statistics() == before


def test_a_second_command_in_a_live_mock_turn_is_named_and_refuses_the_turn() -> None:
    turns = MockTurns()
    live = turns.begin(plan(), 1)
    with pytest.raises(DuplicateMockTurn):
        turns.check_fresh("s1", 1)

    turns.refuse("s1", 1, DuplicateMockTurn("1"))

    assert live.state == "cancelled"
    assert turns.answer_refusal("s1", 1).code == "DUPLICATE_MOCK_TURN"
    assert turns.state("s1", 1) == "idle"


def test_a_command_entering_a_later_step_of_an_ordinary_turn_is_refused_by_name() -> None:
    # A steered /mock text joins a running turn at its next step: the plan would start mid-turn.
    turns = MockTurns()
    with pytest.raises(MidTurnMockCommand) as caught:
        turns.check_fresh("s1", 1, step=3)
    assert caught.value.message == (
        "a /mock command starts its own turn; this one entered step 3 of a running turn"
    )
    turns.check_fresh("s1", 1, step=1)

    turns.refuse("s1", 1, caught.value)

    assert turns.route("s1", 1, REAL) == ("mock", "mock")
    assert turns.answer_refusal("s1", 1).code == "MID_TURN_MOCK_COMMAND"


def test_only_the_mock_turn_is_routed_and_the_real_route_comes_back() -> None:
    turns = MockTurns()
    turns.begin(plan(), 1)

    assert turns.route("s1", 1, REAL) == ("mock", "mock")
    assert turns.route("s1", 2, ("mock", "mock")) == REAL
    assert turns.route("s1", 2, REAL) is None
    assert turns.route("s2", 1, REAL) is None


def test_a_plan_runs_to_its_final_text_judging_the_kept_outcomes() -> None:
    turns = MockTurns()
    turns.begin(plan(), 1)
    first = turns.respond("s1", 1, [])
    assert isinstance(first, EmitToolCalls)
    turns.emit("s1", 1, first)
    (call,) = first.calls
    turns.observe("s1", call.call_id, ToolOutcome("a", True, "TOOL_EXECUTION_FAILED"))

    stop = turns.respond("s1", 1, [SeenResult(call.call_id, "a", True)])

    assert isinstance(stop, Stop) and stop.error.code == "TOOL_FAILED"
    turns.finish("s1", 1)
    assert turns.statistics().turns == 0 and turns.statistics().outcomes == 0


def test_outcomes_of_calls_no_plan_awaits_are_dropped_on_arrival() -> None:
    turns = MockTurns()
    turns.begin(plan(), 1)

    turns.observe("s1", "call-1", ToolOutcome("echo", False, None))

    assert turns.statistics().outcomes == 0


def test_two_sessions_run_their_first_turns_without_consuming_each_other() -> None:
    turns = MockTurns()
    turns.begin(plan("s1"), 1)
    turns.begin(plan("s2"), 1)
    one = turns.respond("s1", 1, [])
    two = turns.respond("s2", 1, [])
    assert isinstance(one, EmitToolCalls) and isinstance(two, EmitToolCalls)
    turns.emit("s1", 1, one)
    turns.emit("s2", 1, two)
    (call,) = one.calls  # the same minted id in both sessions: mock-1-1-0
    turns.observe("s1", call.call_id, ToolOutcome("a", False, None))
    turns.observe("s2", call.call_id, ToolOutcome("a", False, None))

    assert isinstance(turns.respond("s1", 1, [SeenResult(call.call_id, "a", False)]), EmitToolCalls)
    assert isinstance(turns.respond("s2", 1, [SeenResult(call.call_id, "a", False)]), EmitToolCalls)


def test_each_session_is_judged_by_its_own_outcome_of_a_shared_call_id() -> None:
    # Two sessions of one connection (web UI tabs, a parent and its child) mint the same ids.
    turns = MockTurns()
    turns.begin(plan("s1"), 1)
    turns.begin(plan("s2"), 1)
    one = turns.respond("s1", 1, [])
    two = turns.respond("s2", 1, [])
    assert isinstance(one, EmitToolCalls) and isinstance(two, EmitToolCalls)
    turns.emit("s1", 1, one)
    turns.emit("s2", 1, two)
    (call,) = one.calls
    turns.observe("s1", call.call_id, ToolOutcome("a", True, "UNKNOWN_TOOL", "tool a is not registered"))
    turns.observe("s2", call.call_id, ToolOutcome("a", True, "TOOL_EXECUTION_FAILED"))

    stop_one = turns.respond("s1", 1, [SeenResult(call.call_id, "a", True)])
    stop_two = turns.respond("s2", 1, [SeenResult(call.call_id, "a", True)])

    assert isinstance(stop_one, Stop) and stop_one.error.code == "UNKNOWN_TOOL"
    assert isinstance(stop_two, Stop) and stop_two.error.code == "TOOL_FAILED"


def test_collect_during_a_wait_keeps_the_progress_at_the_step_before() -> None:
    turns = MockTurns()
    turns.begin(plan(), 1)
    first = turns.respond("s1", 1, [])
    assert isinstance(first, EmitToolCalls)
    turns.emit("s1", 1, first)
    turns.respond("s1", 1, [SeenResult(c.call_id, c.name, False) for c in first.calls])
    turns.sleep("s1", 1)

    status = turns.collect("s1", 1)

    assert status is not None and (status.phase, status.step) == ("cancelled", 1)
    turns.interrupt("s1", 1)  # the stream's own cancellation arrives afterwards: no-op
    assert turns.collect("s1", 1) is None


def test_end_session_forgets_only_that_session_and_is_idempotent() -> None:
    turns = MockTurns()
    dropped = turns.begin(plan("s1"), 1)
    kept = turns.begin(plan("s2"), 1)
    turns.route("s1", 1, REAL)

    turns.end_session("s1")
    turns.end_session("s1")

    assert dropped.state == "cancelled" and kept.state == "ready"
    assert turns.route("s1", 2, ("mock", "mock")) is None
    assert turns.statistics().turns == 1 and turns.statistics().routed_sessions == 1


def test_dispose_cancels_everything_and_refuses_new_turns() -> None:
    turns = MockTurns()
    live = turns.begin(plan(), 1)

    turns.dispose()
    turns.dispose()

    assert live.is_terminal
    with pytest.raises(SessionsDisposed):
        turns.check_fresh("s3", 1)
    assert turns.statistics().turns == 0 and turns.statistics().disposed


def test_a_final_text_ends_the_turn() -> None:
    turns = MockTurns()
    steps = [{"tool": "a", "args": {}}]
    single = validate_script({"type": "dsh-mock-script", "version": 1, "steps": steps}, source="x")
    turns.begin(MockPlan(single, session_id="s1", turn_id="1", mode="run", source_format="command"), 1)
    first = turns.respond("s1", 1, [])
    assert isinstance(first, EmitToolCalls)
    turns.emit("s1", 1, first)

    final = turns.respond("s1", 1, [SeenResult(c.call_id, c.name, False) for c in first.calls])
    turns.finish("s1", 1)

    assert isinstance(final, EmitFinal)
    assert turns.state("s1", 1) == "idle"
