"""The verdict table's counts and lines (bridge/api/verdict.py), without a host."""

from __future__ import annotations

from dsh_sidecar.bridge.api.types import CassetteSummary, RunResult, ToolCall
from dsh_sidecar.bridge.api.verdict import counts, table


def _result(calls: int, tool: CassetteSummary | None) -> RunResult:
    return RunResult(
        exit_code=0, timed_out=False, duration_ms=1, task="t", stdout="", stderr="", final_text="",
        tool_calls=[ToolCall(call_id=str(i), tool="echo", path=f"root/{i}", arguments={}) for i in range(calls)],
        tool_results=[], mock=[], tool_cassette=tool, subagent_cassette=None, errors=[], session_id=None,
        session_path=None, child_session_ids=[], events=[],
    )


def test_counts_add_a_tests_runs_and_call_live_what_no_replay_served() -> None:
    replay = CassetteSummary(kind="tool", file="a", record_mode="none", mode="replay", consumed=2, missed=1,
                             unconsumed=1, stood_up=["x"])
    record = CassetteSummary(kind="tool", file="a", record_mode="once", mode="record", recorded=2)
    assert counts([_result(3, replay), _result(2, record), _result(1, None)]) == {
        "runs": 3, "calls": 6, "served": 2, "recorded": 2, "live": 4, "missed": 1, "unconsumed": 1, "stood_up": 1,
    }


def test_the_table_has_a_row_per_test_and_the_totals_and_nothing_without_dsh_tests() -> None:
    one = {"runs": 1, "calls": 2, "served": 2}
    lines = table([("t.py::a", "passed", one), ("t.py::long_name", "failed", {**one, "missed": 1})])
    assert lines[0].split()[:3] == ["test", "outcome", "calls"]
    assert lines[1].split() == ["t.py::a", "passed", "2", "2", "0", "0", "0", "0", "0"]
    assert lines[2].split() == ["t.py::long_name", "failed", "2", "2", "0", "0", "1", "0", "0"]
    assert lines[3] == ("2 dsh tests · 2 runs · 4 tool calls · 4 served · 0 recorded · 0 live · 1 missed · "
                        "0 unconsumed · 0 stood up")
    assert table([]) == []
