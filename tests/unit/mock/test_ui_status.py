"""The UI fields of ``mock/status`` (docs/web-ui.md): Python decides, the browser renders."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ConfigError, SidecarError
from dsh_sidecar.python_core.mock.errors import (
    ConversionMismatch,
    InvalidCommand,
    InvalidScript,
    PathRefused,
    SourceUnreadable,
    UnsupportedNestedTool,
)
from dsh_sidecar.python_core.mock.plan import (
    EmitToolCalls,
    MockPlan,
    ObservedResult,
    error_location,
    refused_status,
)
from dsh_sidecar.python_core.mock.script import validate_script

A = {"tool": "a", "args": {}}
B = {"tool": "b", "args": {}}
C = {"tool": "c", "args": {}}


def plan_of(*steps: Any) -> MockPlan:
    script = validate_script({"type": "dsh-mock-script", "version": 1, "steps": list(steps)}, source="s.json")
    return MockPlan(script, session_id="s1", turn_id="t1", mode="replay", source_format="canonical-json")


def results(action: Any, error: str | None = None) -> list[ObservedResult]:
    assert isinstance(action, EmitToolCalls)
    return [
        ObservedResult(call.call_id, call.name, error is not None and i == 0, error)
        for i, call in enumerate(action.calls)
    ]


def test_progress_counts_top_level_executable_steps_through_a_successful_replay() -> None:
    plan = plan_of(A, {"wait": 5}, {"parallel": [B, C]}, {"wait": 5}, A)
    seen = [(plan.status().phase, plan.status().step, plan.status().step_count)]
    action = plan.next_response([])
    for _ in range(3):
        seen.append((plan.status().phase, plan.status().step, plan.status().step_count))
        action = plan.next_response(results(action))
    seen.append((plan.status().phase, plan.status().step, plan.status().step_count))
    assert seen == [
        ("queued", 0, 3),
        ("running", 1, 3),
        ("running", 2, 3),
        ("running", 3, 3),
        ("completed", 3, 3),
    ]
    assert plan.status().card is None


def test_a_failing_real_tool_result_asks_for_the_stop_card_with_its_runtime_code() -> None:
    plan = plan_of(A, {"parallel": [B, C]}, A)
    second = plan.next_response(results(plan.next_response([])))
    plan.next_response(results(second, error="UNKNOWN_TOOL"))
    status = plan.status()
    assert (status.phase, status.card, status.step, status.step_count) == ("failed", "tool-stop", 2, 3)
    assert (status.failed_tool, status.error_code, status.runtime_code, status.steps_stopped) == (
        "b",
        "UNKNOWN_TOOL",
        "UNKNOWN_TOOL",
        1,
    )


def test_a_cancelled_plan_keeps_its_numbers_and_asks_for_no_card() -> None:
    plan = plan_of(A, B)
    plan.next_response([])
    plan.cancel()
    status = plan.status()
    assert (status.phase, status.step, status.card, status.runtime_code) == ("cancelled", 1, None, None)


@pytest.mark.parametrize(
    ("error", "location"),
    [
        (InvalidCommand(12, "expected ("), "column 12"),
        (InvalidScript("s.json", "unknown field `x`", location="/steps/1", line=3), "s.json:3 at /steps/1"),
        (InvalidScript("s.json", "not JSON", line=2), "s.json:2"),
        (InvalidScript("s.json", "empty"), "s.json"),
        (ConversionMismatch("log.jsonl", turn=1, step=2, field="arguments", lines=(4, 9)), "log.jsonl:4 and line 9"),
        (UnsupportedNestedTool("subagent", "/steps/0"), "/steps/0"),
        (SourceUnreadable("s.json", "ENOENT"), "s.json"),
        (PathRefused("parent-segment", "no .. segments"), None),
        (ConfigError("overwrite_wait_ms", "too large"), None),
    ],
)
def test_error_location_names_where_the_source_is_wrong(error: SidecarError, location: str | None) -> None:
    assert error_location(error) == location


def test_a_refused_turn_asks_for_the_invalid_script_card_and_ran_nothing() -> None:
    error = InvalidScript("bad.json", "a wait cannot be the first step", location="/steps/0", line=1)
    status = refused_status(error, session_id="s1", turn_id="4", mode="replay", source_name="bad.json")
    data = msgspec.json.decode(msgspec.json.encode(status))
    assert {k: data[k] for k in ("phase", "card", "location", "error_code", "state", "step", "step_count")} == {
        "phase": "failed",
        "card": "invalid-script",
        "location": "bad.json:1 at /steps/0",
        "error_code": "INVALID_SCRIPT",
        "state": "failed",
        "step": 0,
        "step_count": 0,
    }
    assert data["error_message"] == "bad.json:1: a wait cannot be the first step at /steps/0"
    assert (data["mode"], data["source_name"], data["steps_started"]) == ("replay", "bad.json", 0)


def test_a_command_refused_before_its_mode_is_known_has_no_mode() -> None:
    status = refused_status(InvalidCommand(7, "unknown subcommand"), session_id="s1", turn_id="1", mode=None)
    assert (status.mode, status.source_format, status.location) == (None, "command", "column 7")


def test_a_plan_cancelled_during_the_wait_before_a_step_shows_the_step_before() -> None:
    plan = plan_of(A, {"wait": 500}, B)
    plan.next_response(results(plan.next_response([])))  # step 2 handed over, its wait begins
    plan.cancel(during_wait=True)
    status = plan.status()
    assert (status.phase, status.step, status.steps_started, status.step_count) == ("cancelled", 1, 2, 2)
