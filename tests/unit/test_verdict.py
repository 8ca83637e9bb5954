"""The verdict table's counts and lines (bridge/api/verdict.py), without a host."""

from __future__ import annotations

import msgspec

from dsh_sidecar.bridge.api.types import CassetteSummary, RunResult, ToolCall, ToolResult
from dsh_sidecar.bridge.api.verdict import counts, table


def _result(calls: int, tool: CassetteSummary | None, codes: tuple[str | None, ...] = ()) -> RunResult:
    return RunResult(
        exit_code=0, timed_out=False, duration_ms=1, task="t", stdout="", stderr="", final_text="",
        tool_calls=[ToolCall(call_id=str(i), tool="echo", path=f"root/{i}", arguments={}) for i in range(calls)],
        tool_results=[ToolResult(call_id=str(i), tool="echo", path=None, is_error=code is not None, output="",
                                 error_code=code) for i, code in enumerate(codes)],
        mock=[], tool_cassette=tool, subagent_cassette=None, errors=[], session_id=None,
        session_path=None, child_session_ids=[], events=[],
    )


def test_counts_call_live_what_ran_for_real_and_mismatched_what_a_replay_refused() -> None:
    replay = CassetteSummary(kind="tool", file="a", record_mode="none", mode="replay", consumed=2,
                             unconsumed=1, stood_up=["x"])
    record = CassetteSummary(kind="tool", file="a", record_mode="once", mode="record", recorded=2)
    model = CassetteSummary(kind="model", file="m", record_mode="none", mode="replay", consumed=3, missed=1)
    refused = _result(4, replay, (None, None, "CASSETTE_MISMATCH", "LIVE_TOOL_BLOCKED"))
    assert counts([refused, _result(2, record, ("TOOL_ERROR", None)), _result(1, None)]) == {
        "runs": 3, "calls": 7, "served": 2, "recorded": 2, "live": 3, "mismatched": 1, "unconsumed": 1,
        "stood_up": 1, "provider_requests": 0,
    }
    with_model = msgspec.structs.replace(_result(0, None), model_cassette=model)
    assert counts([with_model])["mismatched"] == 1 and counts([with_model])["served"] == 3


def test_the_table_has_a_row_per_test_and_the_totals_and_nothing_without_dsh_tests() -> None:
    one = {"runs": 1, "calls": 2, "served": 2}
    lines = table([("t.py::a", "passed", one, None), ("t.py::long_name", "failed", {**one, "mismatched": 1}, None)])
    assert lines[0].split()[:3] == ["test", "outcome", "calls"] and "trace" not in lines[0]
    assert lines[1].split() == ["t.py::a", "passed", "2", "2", "0", "0", "0", "0", "0"]
    assert lines[2].split() == ["t.py::long_name", "failed", "2", "2", "0", "0", "1", "0", "0"]
    assert lines[3] == ("2 dsh tests · 2 runs · 4 tool calls · 4 served · 0 recorded · 0 live · 1 mismatched · "
                        "0 unconsumed · 0 stood up · 0 provider requests")
    assert table([]) == []


def test_a_test_that_wrote_a_trace_adds_the_trace_column_with_its_path() -> None:
    one = {"runs": 1, "calls": 1, "served": 0, "mismatched": 1}
    lines = table([("t.py::a", "passed", one, None), ("t.py::b", "failed", one, ".dsh-sidecar/traces/b.html")])
    assert lines[0].split()[-1] == "trace"
    assert lines[1].split()[-1] == "-" and lines[2].split()[-1] == ".dsh-sidecar/traces/b.html"


def test_provider_requests_are_the_recorded_model_calls_or_the_steps_of_a_real_route() -> None:
    recording = CassetteSummary(kind="model", file="m", record_mode="once", mode="record", recorded=4)
    replay = CassetteSummary(kind="model", file="m", record_mode="none", mode="replay", consumed=4)
    step = {"type": "assistant/message", "data": {"message": {"source": {"kind": "model", "provider": "deepseek"}}}}
    mock = {"type": "assistant/message", "data": {"message": {"source": {"kind": "model", "provider": "mock"}}}}
    title = {"type": "session/title-llm-request", "data": {"route": {"provider": "deepseek", "model": "v4"}}}
    live = msgspec.structs.replace(_result(0, None), events=[step, step, title, mock])
    assert counts([msgspec.structs.replace(_result(0, None), model_cassette=recording)])["provider_requests"] == 4
    assert counts([msgspec.structs.replace(_result(0, None), model_cassette=replay)])["provider_requests"] == 0
    assert counts([live])["provider_requests"] == 3
    assert counts([msgspec.structs.replace(_result(0, None), events=[mock])])["provider_requests"] == 0
