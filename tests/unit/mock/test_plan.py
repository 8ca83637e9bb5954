"""The sans-I/O mock plan (docs/mock.md, "Plan")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.mock.errors import PlanClosed
from dsh_sidecar.python_core.mock.plan import (
    TRANSITIONS,
    EmitFinal,
    EmitToolCalls,
    MockPlan,
    ObservedResult,
    PlannedCall,
    Stop,
    auxiliary_answer,
)
from dsh_sidecar.python_core.mock.script import Script, validate_script

A = {"tool": "a", "args": {"n": 1}}
B = {"tool": "b", "args": {}}
C = {"tool": "c", "args": {}}
D = {"tool": "d", "args": {}}


def script_of(*steps: Any) -> Script:
    return validate_script(
        {"type": "dsh-mock-script", "version": 1, "steps": list(steps)}, source="s.json"
    )


@pytest.fixture
def make_plan() -> Callable[..., MockPlan]:
    def make(*steps: Any, **kwargs: Any) -> MockPlan:
        options: dict[str, Any] = {
            "session_id": "s1",
            "turn_id": "t1",
            "mode": "replay",
            "source_format": "canonical-json",
        }
        options.update(kwargs)
        return MockPlan(script_of(*steps), **options)

    return make


def ok(action: Any, **overrides: Any) -> list[ObservedResult]:
    assert isinstance(action, EmitToolCalls)
    return [
        ObservedResult(call.call_id, call.name, False, None, **overrides) for call in action.calls
    ]


def drive(plan: MockPlan) -> list[Any]:
    actions = [plan.next_response([])]
    while isinstance(actions[-1], EmitToolCalls):
        actions.append(plan.next_response(ok(actions[-1])))
    return actions


def test_each_executable_step_is_one_response_of_complete_calls(make_plan: Any) -> None:
    plan = make_plan(A, {"parallel": [B, C]})
    first = plan.next_response([])
    assert first == EmitToolCalls(
        wait_ms=0, calls=(PlannedCall(call_id="mock-t1-1-0", name="a", arguments_json='{"n":1}'),)
    )
    second = plan.next_response(ok(first))
    assert second == EmitToolCalls(
        wait_ms=100,
        calls=(
            PlannedCall(call_id="mock-t1-2-0", name="b", arguments_json="{}"),
            PlannedCall(call_id="mock-t1-2-1", name="c", arguments_json="{}"),
        ),
    )
    final = plan.next_response(ok(second))
    assert final == EmitFinal(wait_ms=0, text="mock replay complete: 2 steps, 3 tool calls")
    assert plan.state == "succeeded"


def test_absent_waits_get_the_default_and_explicit_waits_survive(make_plan: Any) -> None:
    plan = make_plan(A, {"wait": 1000}, {"parallel": [B, C]}, D, {"wait": 0}, A)
    waits = [action.wait_ms for action in drive(plan)]
    assert waits == [0, 1000, 100, 0, 0]


def test_overwrite_replaces_explicit_waits_only(make_plan: Any) -> None:
    plan = make_plan(A, {"wait": 1000}, B, C, {"wait": 500}, D, overwrite_wait_ms=7)
    assert [action.wait_ms for action in drive(plan)] == [0, 7, 100, 7, 0]


def test_default_gap_is_configurable(make_plan: Any) -> None:
    plan = make_plan(A, B, {"wait": 3}, C, default_gap_ms=25)
    assert [action.wait_ms for action in drive(plan)] == [0, 25, 3, 0]


def test_results_are_awaited_before_the_next_response(make_plan: Any) -> None:
    plan = make_plan({"parallel": [A, B]}, C)
    first = plan.next_response([])
    action = plan.next_response(ok(first)[:1])
    assert isinstance(action, Stop)
    assert str(action.error) == "MISSING_RESULT: no result for call mock-t1-1-1 of step 1"
    assert plan.status().steps_started == 1


def test_results_may_arrive_in_any_order(make_plan: Any) -> None:
    plan = make_plan({"parallel": [A, B]}, C)
    first = plan.next_response([])
    second = plan.next_response(list(reversed(ok(first))))
    assert isinstance(second, EmitToolCalls)
    assert second.calls[0].name == "c"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("UNKNOWN_TOOL", "UNKNOWN_TOOL: b (mock-t1-2-0) failed at step 2; 1 later step(s) stopped"),
        (
            "INVALID_ARGS",
            "INVALID_ARGS: b (mock-t1-2-0) failed at step 2; 1 later step(s) stopped; "
            "its full message is in the session log: dsh-sidecar sessions show s1",
        ),
        (
            "PERMISSION_DENIED",
            "TOOL_FAILED: b (mock-t1-2-0) failed at step 2 with runtime code "
            "PERMISSION_DENIED; 1 later step(s) stopped; "
            "its full message is in the session log: dsh-sidecar sessions show s1",
        ),
        (
            None,
            "TOOL_FAILED: b (mock-t1-2-0) failed at step 2; 1 later step(s) stopped; "
            "its full message is in the session log: dsh-sidecar sessions show s1",
        ),
    ],
)
def test_any_error_result_stops_later_steps(make_plan: Any, code: str | None, message: str) -> None:
    plan = make_plan(A, {"parallel": [B, C]}, D)
    second = plan.next_response(ok(plan.next_response([])))
    results = ok(second)
    results[0] = ObservedResult(results[0].call_id, "b", True, code)
    action = plan.next_response(results)
    assert isinstance(action, Stop)
    assert str(action.error) == message
    status = plan.status()
    assert (status.state, status.error_code, status.failed_tool, status.failed_step) == (
        "failed",
        action.error.code,
        "b",
        2,
    )
    assert (status.steps_completed, status.steps_stopped) == (1, 1)
    with pytest.raises(PlanClosed):
        plan.next_response([])


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda r: [*r, r[0]], "duplicate result"),
        (
            lambda r: [ObservedResult(r[0].call_id, "a", False, None, "s2")],
            "the result belongs to another session",
        ),
        (
            lambda r: [ObservedResult("mock-t0-1-0", "a", False)],
            "the call was not issued by this mock turn",
        ),
        (
            lambda r: [ObservedResult(r[0].call_id, "zzz", False)],
            "the tool name differs from the call",
        ),
    ],
)
def test_stale_duplicate_and_foreign_results_are_terminal_and_do_not_advance(
    make_plan: Any, tamper: Callable[[list[ObservedResult]], list[ObservedResult]], reason: str
) -> None:
    plan = make_plan(A, B)
    first = plan.next_response([])
    action = plan.next_response(tamper(ok(first)))
    assert isinstance(action, Stop)
    assert action.error.code == "STALE_RESULT"
    assert action.error.message.endswith(f"at step 1: {reason}")
    status = plan.status()
    assert (status.steps_started, status.steps_completed, status.state) == (1, 0, "failed")


def test_a_result_of_an_earlier_step_is_stale(make_plan: Any) -> None:
    plan = make_plan(A, B, C)
    first = plan.next_response([])
    second = plan.next_response(ok(first))
    action = plan.next_response([*ok(second), *ok(first)])
    assert isinstance(action, Stop)
    assert str(action.error) == (
        "STALE_RESULT: result for call mock-t1-1-0 at step 2: the result belongs to an earlier step"
    )


def test_results_before_the_first_response_are_stale(make_plan: Any) -> None:
    plan = make_plan(A)
    action = plan.next_response([ObservedResult("call_9", "a", False)])
    assert isinstance(action, Stop)
    assert action.error.code == "STALE_RESULT"


def test_minted_call_ids_are_fresh_per_turn(make_plan: Any) -> None:
    one = make_plan(A, turn_id="turn-a").next_response([])
    two = make_plan(A, turn_id="turn-b").next_response([])
    assert isinstance(one, EmitToolCalls) and isinstance(two, EmitToolCalls)
    assert one.calls[0].call_id != two.calls[0].call_id


def test_cancel_is_terminal_and_idempotent(make_plan: Any) -> None:
    plan = make_plan(A, B)
    plan.next_response([])
    plan.cancel()
    plan.cancel()
    status = plan.status()
    assert (status.state, status.error_code) == ("cancelled", "CANCELLED")
    with pytest.raises(PlanClosed) as caught:
        plan.next_response([])
    assert str(caught.value) == (
        "MOCK_PLAN_CLOSED: the mock plan is cancelled; it emits no further response"
    )


def test_cancel_after_success_keeps_success(make_plan: Any) -> None:
    plan = make_plan(A)
    drive(plan)
    plan.cancel()
    assert plan.status().state == "succeeded"


def test_status_counts_executable_steps_only_and_serializes(make_plan: Any) -> None:
    plan = make_plan(
        A,
        {"wait": 5},
        {"parallel": [B, C]},
        {"wait": 5},
        D,
        source_name="session.jsonl",
        source_format="dsh-jsonl",
    )
    plan.next_response([])
    status = plan.status()
    assert (status.step_count, status.steps_started, status.state) == (3, 1, "awaiting-results")
    data = msgspec.json.decode(msgspec.json.encode(status))
    assert data["source_format"] == "dsh-jsonl"
    assert data["script_id"].startswith("sha256:")
    assert data["session_id"] == "s1" and data["turn_id"] == "t1"


def test_run_mode_summary_names_the_mode(make_plan: Any) -> None:
    actions = drive(make_plan(A, mode="run", source_format="command"))
    assert actions[-1] == EmitFinal(wait_ms=0, text="mock run complete: 1 step, 1 tool call")


@pytest.mark.parametrize("field", ["session_id", "turn_id"])
def test_missing_session_or_turn_id_is_refused(make_plan: Any, field: str) -> None:
    with pytest.raises(Exception) as caught:
        make_plan(A, **{field: ""})
    assert str(caught.value) == (
        f"MISSING_SESSION_ID: {field} is empty; mock plans are keyed by session and turn"
    )


@pytest.mark.parametrize("value", [-1, 2**53, True])
def test_bad_wait_overrides_are_config_errors(make_plan: Any, value: int) -> None:
    with pytest.raises(ConfigError):
        make_plan(A, overwrite_wait_ms=value)


def test_transition_table_has_no_way_out_of_terminal_states() -> None:
    for state in ("succeeded", "failed", "cancelled"):
        assert TRANSITIONS[state] == {"cancel": frozenset({state})}  # type: ignore[index]


@pytest.mark.parametrize(
    ("purpose", "text"),
    [
        ("session-title", "Mock session"),
        ("compaction", "Mock turn: deterministic scripted tool calls; nothing to summarize."),
        ("future-purpose", "Mock"),
    ],
)
def test_auxiliary_answers_are_fixed_and_do_not_touch_plans(
    make_plan: Any, purpose: str, text: str
) -> None:
    plan = make_plan(A)
    assert auxiliary_answer(purpose) == text
    assert plan.state == "ready"


@pytest.mark.parametrize(
    ("message", "shown"),
    [
        (
            'invalid arguments: missing required property "ticker"',
            'INVALID_ARGS: b (mock-t1-1-0) failed at step 1: missing required property "ticker"; '
            "0 later step(s) stopped",
        ),
        (
            'invalid arguments: "a.b[0]" must be an integer; "c" is not a declared property '
            '(additionalProperties: false); "d" must be one of ["x","y"]; "e" must be "fixed"',
            'INVALID_ARGS: b (mock-t1-1-0) failed at step 1: "a.b[0]" must be an integer; "c" is not a '
            'declared property (additionalProperties: false); "d" must be one of ["x","y"]; and 1 more; '
            "0 later step(s) stopped; its full message is in the session log: dsh-sidecar sessions show s1",
        ),
        (
            "invalid arguments: secret-value-123 is wrong; \"k\" must be a boolean",
            'INVALID_ARGS: b (mock-t1-1-0) failed at step 1: "k" must be a boolean; and 1 more; '
            "0 later step(s) stopped; its full message is in the session log: dsh-sidecar sessions show s1",
        ),
    ],
)
def test_invalid_args_shows_the_schema_reason_never_a_value(make_plan: Any, message: str, shown: str) -> None:
    plan = make_plan(B)
    (call,) = plan.next_response([]).calls
    action = plan.next_response([ObservedResult(call.call_id, "b", True, "INVALID_ARGS", error_message=message)])
    assert isinstance(action, Stop)
    assert str(action.error) == shown
    assert "secret-value" not in str(action.error)
