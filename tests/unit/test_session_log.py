"""rc.8's session path rule and the session-log readers, on recorded shapes."""

from __future__ import annotations

import json

import pytest
import zstandard

from dsh_sidecar.python_core.session_log import (
    SessionLogInvalid,
    decode_session_log,
    encode_segment,
    final_text,
    mock_statuses,
    project_key,
    session_log_candidates,
    summarize,
    tool_calls,
    tool_results,
)


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/tmp/work", "--tmp-work--"),
        ("/tmp/tmp.L59VeQB5wO", "--tmp-tmp.L59VeQB5wO--"),
        ("/", "--root--"),
        ("//a//b/", "--a-b---"),
        ("/my project/~x", "--my~0020project-~007Ex--"),
        ("/ü", "--~00FC--"),
        ("/\U0001f600", "--~D83D~DE00--"),
        ("C:\\work", "--C-work--"),
    ],
)
def test_project_key_follows_rc8(cwd: str, key: str) -> None:
    assert project_key(cwd) == key


def test_project_key_is_capped_like_rc8() -> None:
    assert project_key("/" + "a" * 300) == "--" + "a" * 251 + "--"


@pytest.mark.parametrize(
    ("raw", "encoded"),
    [("session-1f2e", "session-1f2e"), (".", "~002E"), ("..", "~002E~002E"), ("a/b", "a~002Fb"), ("~", "~007E")],
)
def test_encode_segment_follows_rc8(raw: str, encoded: str) -> None:
    assert encode_segment(raw) == encoded


def test_empty_names_are_refused() -> None:
    with pytest.raises(ValueError):
        project_key("")
    with pytest.raises(ValueError):
        encode_segment("")


def test_candidates_are_computed_without_listing_a_folder() -> None:
    assert session_log_candidates("/srv/dsh/sessions", "/w", "session-1") == [
        "/srv/dsh/sessions/--w--/session-1/session.jsonl.zstd",
        "/srv/dsh/sessions/--w--/session-1/session.jsonl",
    ]


EVENTS = [
    {"type": "session", "id": "session-1", "cwd": "/w", "delegationDepth": 0},
    {"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "c1", "name": "echo", "arguments": '{"text":"a"}'}},
    {"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "c2", "name": "broken", "arguments": "{"}},
    {"type": "tool/result", "data": {"message": {"content": [
        {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "echo:a"}],
         "isError": False}]}}},
    {"type": "tool/result", "data": {"error": {"code": "TOOL_FAILED", "message": "boom"}, "message": {"content": [
        {"type": "tool-result", "toolCallId": "c2", "content": [{"type": "text", "text": "x"}, {"type": "image"}],
         "isError": True}]}}},
    {"type": "assistant/message", "data": {"message": {"content": [{"type": "text", "text": "first"}]}}},
    {"type": "assistant/message", "data": {"message": {"content": [{"type": "text", "text": "  "}]}}},
    {"type": "mock/status", "data": {
        "session_id": "session-1", "turn_id": "1", "mode": "run", "source_format": "command", "source_name": None,
        "script_id": "sha256:" + "0" * 64, "step_count": 1, "steps_started": 1, "steps_completed": 1,
        "state": "succeeded"}},
]


def test_readers_return_typed_calls_results_text_and_status() -> None:
    calls = tool_calls(EVENTS)
    assert [(c.call_id, c.tool, c.arguments, c.turn) for c in calls] == [("c1", "echo", {"text": "a"}, 1),
                                                                        ("c2", "broken", "{", 1)]
    results = tool_results(EVENTS)
    assert [(r.call_id, r.is_error, r.output, r.error_code, r.error_message) for r in results] == [
        ("c1", False, "echo:a", None, None), ("c2", True, "x", "TOOL_FAILED", "boom"),
    ]
    assert final_text(EVENTS) == "first"
    assert [s.state for s in mock_statuses(EVENTS)] == ["succeeded"]


def test_decode_reads_plain_and_chained_zstd_frames() -> None:
    lines = [json.dumps(e) for e in EVENTS]
    plain = ("\n".join(lines) + "\n").encode()
    assert decode_session_log(plain) == EVENTS
    frames = b"".join(zstandard.ZstdCompressor().compress((line + "\n").encode()) for line in lines)
    assert decode_session_log(frames) == EVENTS


def test_summarize_counts_turns_ends_tools_and_the_first_user_task() -> None:
    events = [
        *EVENTS[:1],
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "user/message", "data": {"content": [{"type": "text", "text": "context"}], "source": {"kind": "x"}}},
        {"type": "user/message", "data": {"content": [{"type": "text", "text": "/mock run echo({})"}],
                                          "source": {"kind": "user"}}},
        *EVENTS[1:],
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
    s = summarize(events)
    assert (s.session_id, s.turns, s.end_reasons, s.tool_calls, s.tool_errors, s.mock_state, s.task) == (
        "session-1", 1, ["completed"], 2, 1, "succeeded", "/mock run echo({})",
    )


_HEADER = '{"type":"session","id":"s1","cwd":"/w","createdAt":1,"delegationDepth":0}'


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("[" * 1000 + "]" * 1000, "nested deeper than 256 levels"),
        ('{"type":"user/message","data":{"\\ud800":1}}', "lone surrogate in a string or object key"),
        ('{"type":"user/message","data":{"text":"\\udfff"}}', "lone surrogate in a string or object key"),
        ('{"type":"mock/status","data":{"state":7}}',
         "malformed mock/status record: Expected `str`, got `int` - at `$.data.state`"),
        ('{"type":"mock/status"}', "malformed mock/status record: Expected `object`, got `null`"),
        ('{"type":"session","delegationDepth":[1]}',
         "malformed header: Expected `int | null`, got `array` - at `$.delegationDepth`"),
        ('{"type":"session","delegationDepth":"h"}',
         "malformed header: Expected `int | null`, got `str` - at `$.delegationDepth`"),
        ('{"type":"session","delegationDepth":{}}',
         "malformed header: Expected `int | null`, got `object` - at `$.delegationDepth`"),
        ('{"type":"session","id":7}', "malformed header: Expected `str`, got `int` - at `$.id`"),
        ("[1]", "not a JSON object"),
        ('{"a":', "not valid JSON"),
        ('{"a":1e400}', "number out of range"),
    ],
)
def test_a_malformed_line_is_refused_by_name_with_its_line(line: str, reason: str) -> None:
    # Each of these was a traceback (RecursionError, ValidationError, TypeError) or a log that
    # no output could print (a lone surrogate): now one named line.
    data = f"{_HEADER}\n{line}\n".encode() if '"session"' not in line else f"{line}\n".encode()
    at = 1 if '"session"' in line else 2
    with pytest.raises(SessionLogInvalid) as caught:
        decode_session_log(data, source="s1/session.jsonl")
    assert str(caught.value) == f"SESSION_LOG_INVALID: s1/session.jsonl:{at}: {reason}"


def test_a_truncated_zstd_log_is_refused_by_name() -> None:
    frame = zstandard.ZstdCompressor().compress((_HEADER + "\n").encode())
    with pytest.raises(SessionLogInvalid) as caught:
        decode_session_log(frame[:-3], source="s1/session.jsonl.zstd")
    assert str(caught.value) == (
        "SESSION_LOG_INVALID: s1/session.jsonl.zstd: truncated zstd stream (the last frame is incomplete)"
    )


def test_tool_arguments_too_deep_or_with_a_lone_surrogate_stay_text() -> None:
    deep = "[" * 1000 + "]" * 1000
    calls = [json.dumps({"type": "tool/call", "data": {"callId": c, "name": "t", "arguments": a}})
             for c, a in (("c1", deep), ("c2", '{"\\ud800":1}'), ("c3", '{"a":1}'))]
    events = decode_session_log("\n".join([_HEADER, *calls]).encode())
    assert [c.arguments for c in tool_calls(events)] == [deep, '{"\\ud800":1}', {"a": 1}]


def test_a_null_delegation_depth_is_a_root_session() -> None:
    events = decode_session_log(b'{"type":"session","id":"s1","delegationDepth":null}\n')
    assert summarize(events).delegation_depth == 0
