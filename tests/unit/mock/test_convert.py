"""DSH session JSONL -> canonical script (docs/mock.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import zstandard

from dsh_sidecar.python_core.mock import convert as convert_module
from dsh_sidecar.python_core.mock.errors import ConversionMismatch, InvalidScript
from dsh_sidecar.python_core.mock.script import encode_script, executable_steps
from dsh_sidecar.python_core.mock.source import decode_source, detect_format, load_script, load_source


def convert(data: bytes, *, timing: bool = False, turn: int | None = None) -> dict[str, Any]:
    script = load_script(data, source_name="session.jsonl", preserve_timing=timing, turn=turn)
    result: dict[str, Any] = json.loads(encode_script(script))
    return result


def steps_of(data: bytes, **kwargs: Any) -> list[Any]:
    return list(convert(data, **kwargs)["steps"])


def failure(data: bytes, *, timing: bool = False) -> str:
    with pytest.raises((InvalidScript, ConversionMismatch)) as caught:
        load_script(data, source_name="session.jsonl", preserve_timing=timing)
    return str(caught.value)


def test_siblings_in_one_assistant_message_become_one_parallel_group(three_step_log: Any) -> None:
    assert steps_of(three_step_log.text()) == [
        {"tool": "mock_echo", "args": {"text": "hello from mock"}},
        {
            "parallel": [
                {"tool": "mock_echo", "args": {"text": "p1"}},
                {"tool": "mock_echo", "args": {"text": "p2"}},
            ]
        },
    ]


def test_group_keeps_block_order(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "zeta", "{}"), ("c2", "alpha", "{}"), ("c3", "mid", "{}")])
    group = steps_of(log.text())[0]["parallel"]
    assert [member["tool"] for member in group] == ["zeta", "alpha", "mid"]


def test_interleaved_call_and_result_records_keep_siblings_together(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", "{}"), ("c2", "b", "{}")], interleave=True)
    assert steps_of(log.text()) == [
        {"parallel": [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}]}
    ]


def test_distinct_agent_steps_and_turns_stay_sequential(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", "{}")])
    log.tool_step(2, [("c2", "b", "{}")])
    log.final_step(3)
    log.start_turn("again")
    log.tool_step(1, [("c3", "c", '{"x": [1, 2]}')])
    log.final_step(2)
    assert steps_of(log.text()) == [
        {"tool": "a", "args": {}},
        {"tool": "b", "args": {}},
        {"tool": "c", "args": {"x": [1, 2]}},
    ]
    assert steps_of(log.text(), turn=2) == [{"tool": "c", "args": {"x": [1, 2]}}]


def test_historical_results_and_source_call_ids_are_not_in_the_script(three_step_log: Any) -> None:
    script = encode_script(
        load_script(three_step_log.text(), source_name="s", preserve_timing=True)
    )
    assert b"HISTORICAL-OUTPUT" not in script
    assert b"mock-1-1-0" not in script
    assert b"isError" not in script


def test_reliable_latencies_become_explicit_waits_only_with_preserve_timing(
    three_step_log: Any,
) -> None:
    assert steps_of(three_step_log.text(), timing=True)[1] == {"wait": 53}
    assert all("wait" not in step for step in steps_of(three_step_log.text()))


def test_zero_latency_is_kept_as_an_explicit_zero_wait(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", "{}")])
    log.tool_step(2, [("c2", "b", "{}")], latency=0)
    assert steps_of(log.text(), timing=True)[1] == {"wait": 0}


def test_missing_or_incomparable_timestamps_give_no_wait(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", "{}")])
    log.lines.append(
        json.dumps(
            {
                "type": "step/start",
                "seq": log.seq,
                "time": 1795998413.5,
                "data": {"turn": 1, "step": 2},
            }
        )
    )
    log.seq += 1
    log.tool_step(2, [("c2", "b", "{}")])
    # The float step/start is replaced by the builder's own integer one; drop that one.
    log.lines = [
        line
        for line in log.lines
        if not ('"step/start"' in line and '"step":2' in line and ".5" not in line)
    ]
    assert [("wait" in step) for step in steps_of(log.text(), timing=True)] == [False, False]


def test_a_chunk_before_its_step_start_is_a_conversion_mismatch(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", "{}")])
    log.tool_step(2, [("c2", "b", "{}")], latency=-50)
    message = failure(log.text(), timing=True)
    assert message.startswith(
        "CONVERSION_MISMATCH: session.jsonl: turn 1 step 2: time differs between line "
    )


def test_conflicting_step_start_records_are_a_conversion_mismatch(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    first = log.event("step/start", {"turn": 1, "step": 1}, dt=3)
    log.tool_step(1, [("c1", "a", "{}")])
    second = [i + 1 for i, line in enumerate(log.lines) if '"step/start"' in line][-1]
    assert failure(log.text(), timing=True) == (
        f"CONVERSION_MISMATCH: session.jsonl: turn 1 step 1: step/start time differs between "
        f"line {first} and line {second}"
    )
    assert steps_of(log.text()) == [{"tool": "a", "args": {}}]


@pytest.mark.parametrize(
    ("stated", "field"),
    [
        ([("c1", "other", '{"v":1}')], "tool name"),
        ([("c1", "a", '{"v":2}')], "arguments"),
        ([("c9", "a", '{"v":1}')], "call identity"),
    ],
)
def test_tool_call_records_disagreeing_with_the_message_are_mismatches(
    make_session: Any, stated: list[Any], field: str
) -> None:
    log = make_session()
    log.start_turn()
    message_line = log.tool_step(1, [("c1", "a", '{"v":1}')], tool_calls=stated)
    assert failure(log.text()) == (
        f"CONVERSION_MISMATCH: session.jsonl: turn 1 step 1: {field} differs between "
        f"line {message_line} and line {message_line + 1}"
    )


@pytest.mark.parametrize(
    ("chunks", "field"),
    [
        ([("c1", "other", '{"v":1}')], "tool name"),
        ([("c1", "a", '{"v":3}')], "arguments"),
        ([("c7", "a", '{"v":1}')], "call identity"),
    ],
)
def test_chunks_cited_by_the_message_must_agree_with_it(
    make_session: Any, chunks: list[Any], field: str
) -> None:
    log = make_session()
    log.start_turn()
    message_line = log.tool_step(1, [("c1", "a", '{"v":1}')], chunk_calls=chunks)
    chunk_line = message_line - 3  # block-end, then usage and finish
    assert failure(log.text()) == (
        f"CONVERSION_MISMATCH: session.jsonl: turn 1 step 1: {field} differs between "
        f"line {chunk_line} and line {message_line}"
    )


def test_a_cited_block_end_written_with_escapes_is_still_cross_checked(make_session: Any) -> None:
    # JSON may spell "block-end" and "tool-call" with escapes; a byte search missed them.
    log = make_session()
    log.start_turn()
    message_line = log.tool_step(1, [("c1", "a", '{"v":1}')], chunk_calls=[("c1", "a", '{"v":3}')])
    chunk_line = message_line - 3
    log.lines[chunk_line - 1] = (
        log.lines[chunk_line - 1]
        .replace('"block-end"', '"block\\u002dend"')
        .replace('"tool-call"', '"tool\\u002dcall"')
    )
    assert "block-end" not in log.lines[chunk_line - 1]
    assert failure(log.text()) == (
        "CONVERSION_MISMATCH: session.jsonl: turn 1 step 1: arguments differs between "
        f"line {chunk_line} and line {message_line}"
    )


def test_whitespace_differences_in_arguments_are_not_a_conflict(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", '{"v": 1, "w": 2}')], tool_calls=[("c1", "a", '{"w":2,"v":1}')])
    assert steps_of(log.text()) == [{"tool": "a", "args": {"v": 1, "w": 2}}]


def test_a_reused_call_id_across_steps_is_a_mismatch(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    first = log.tool_step(1, [("c1", "a", "{}")])
    second = log.tool_step(2, [("c1", "a", "{}")])
    assert failure(log.text()) == (
        f"CONVERSION_MISMATCH: session.jsonl: turn 1 step 1: call identity differs between "
        f"line {first} and line {second}"
    )


def test_interrupted_messages_are_not_replayed(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.tool_step(1, [("c1", "a", "{}")])
    line = log.tool_step(2, [("c2", "b", "{}")], results=False)
    record = json.loads(log.lines[line - 1])
    record["data"]["interrupted"] = True
    log.lines[line - 1] = json.dumps(record)
    assert steps_of(log.text()) == [{"tool": "a", "args": {}}]


def test_unknown_event_types_and_packed_chunk_rows_are_skipped(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.event("permission/preset", {"preset": "workspace-write"})
    log.raw(
        {
            "type": "text-chunks",
            "seq0": log.seq,
            "time0": log.time,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [0, 1, 1], "texts": ["a", "b", "c"]},
        }
    )
    log.seq += 3
    log.tool_step(1, [("c1", "a", "{}")])
    assert steps_of(log.text()) == [{"tool": "a", "args": {}}]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda lines: lines.__setitem__(0, '{"type":"session","version":1,"id":"x"}'),
            "session.jsonl:1: unsupported session log version; this reader supports 0",
        ),
        (
            lambda lines: lines.insert(3, '{"type":"turn/start",'),
            "session.jsonl:4: malformed record: Input data was truncated",
        ),
        (
            lambda lines: lines.insert(3, '{"type":"x","seq":0,"time":1,"data":{}}'),
            "session.jsonl:4: seq 0 does not follow seq 1",
        ),
    ],
)
def test_malformed_logs_are_invalid_scripts(three_step_log: Any, mutate: Any, message: str) -> None:
    mutate(three_step_log.lines)
    assert failure(three_step_log.text()).startswith(f"INVALID_SCRIPT: {message}")


@pytest.mark.parametrize(
    ("calls", "message"),
    [
        ([("c1", "a", "[1]")], "args must be a JSON object, got array at /steps/0/args"),
        (
            [("c1", "a b", "{}")],
            "invalid tool name (DSH tool names are 1-64 characters of "
            "A-Z a-z 0-9 _ -) at /steps/0/tool",
        ),
        ([("c1", "a", "{'x':1}")], "arguments of call c1 are not strict JSON: not valid JSON"),
    ],
)
def test_converted_input_passes_the_same_validator_with_its_source_line(
    make_session: Any, calls: list[Any], message: str
) -> None:
    log = make_session()
    log.start_turn()
    line = log.tool_step(1, calls)
    assert failure(log.text()) == f"INVALID_SCRIPT: session.jsonl:{line}: {message}"


def test_an_incomplete_tool_call_block_is_an_invalid_script(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    line = log.tool_step(1, [("c1", "a", "{}")])
    record = json.loads(log.lines[line - 1])
    del record["data"]["message"]["content"][0]["arguments"]
    log.lines[line - 1] = json.dumps(record)
    assert failure(log.text()) == (
        f"INVALID_SCRIPT: session.jsonl:{line}: incomplete tool-call block "
        "(needs id, name and arguments)"
    )


def test_a_log_without_tool_calls_has_no_executable_step(make_session: Any) -> None:
    log = make_session()
    log.start_turn()
    log.final_step(1)
    assert failure(log.text()) == (
        "INVALID_SCRIPT: session.jsonl: the script has no executable step at /steps"
    )


def test_zstd_logs_with_many_frames_convert_like_plain_ones(three_step_log: Any) -> None:
    packed = three_step_log.zstd(frame_lines=2)
    assert detect_format(packed) == "dsh-jsonl-zstd"
    assert decode_source(packed, source="s")[1] == three_step_log.text()
    assert convert(packed, timing=True) == convert(three_step_log.text(), timing=True)


def test_a_truncated_zstd_log_is_refused_not_silently_shortened(three_step_log: Any) -> None:
    packed = three_step_log.zstd()
    assert failure(packed[:-4]) == (
        "INVALID_SCRIPT: session.jsonl: truncated zstd stream (the last frame is incomplete)"
    )
    assert failure(packed + b"junk") == "INVALID_SCRIPT: session.jsonl: corrupt zstd stream"


def test_zstd_content_that_is_not_a_session_log_is_refused() -> None:
    packed = zstandard.ZstdCompressor().compress(b'{"type":"dsh-mock-script"}')
    assert failure(packed) == (
        "INVALID_SCRIPT: session.jsonl:1: zstd content is not a DSH session log"
    )


def test_the_format_is_chosen_by_content_not_name(three_step_log: Any) -> None:
    canonical = (
        b'{\n  "type": "dsh-mock-script", "version": 1,\n  "steps": [{"tool": "a", "args": {}}]\n}'
    )
    assert load_source(canonical, source_name="x.jsonl", preserve_timing=False)[0] == (
        "canonical-json"
    )
    assert (
        load_source(three_step_log.text(), source_name="x.json", preserve_timing=False)[0]
        == "dsh-jsonl"
    )


def test_every_adapter_output_passes_the_canonical_validator(three_step_log: Any) -> None:
    script = load_script(three_step_log.text(), source_name="s", preserve_timing=True)
    again = load_script(encode_script(script), source_name="s", preserve_timing=True)
    assert again == script
    assert len(executable_steps(again)) == 2


def test_lines_of_json_whitespace_are_skipped_and_other_blank_lines_refused(
    three_step_log: Any,
) -> None:
    expected = steps_of(three_step_log.text())
    three_step_log.lines.insert(3, " \t\r")
    three_step_log.lines.insert(1, "")
    assert steps_of(three_step_log.text()) == expected
    three_step_log.lines.insert(5, "\x0c")  # a form feed is not JSON whitespace
    assert failure(three_step_log.text()).startswith(
        "INVALID_SCRIPT: session.jsonl:6: malformed record:"
    )


def test_a_wide_parallel_message_is_cross_checked_in_linear_steps(
    make_session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each cited block-end was matched by scanning the message's calls: n^2 steps for n calls.
    reads = 0

    class CountingCall(convert_module._Call):
        def __getattribute__(self, name: str) -> Any:
            nonlocal reads
            reads += name == "call_id"
            return super().__getattribute__(name)

    monkeypatch.setattr(convert_module, "_Call", CountingCall)
    width = 2_000
    log = make_session()
    log.start_turn()
    log.tool_step(1, [(f"c{i}", "a", "{}") for i in range(width)])
    assert len(steps_of(log.text())[0]["parallel"]) == width
    assert reads < 10 * width
