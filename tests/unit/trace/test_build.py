"""A run's trace from its session log, hook log and cassette: sources, mismatches, secrets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh_sidecar.bridge.api.trace.build import RunSources, build_run, read_hook_log
from dsh_sidecar.bridge.api.trace.collect import TraceLater, redactor_for
from dsh_sidecar.bridge.api.trace.redact import HIDDEN, NOT_SHOWN, Redactor
from dsh_sidecar.bridge.api.types import CassetteSummary, Diagnostic, RunResult, ToolResult

EXAMPLE = Path(__file__).parents[2] / "examples" / "cassettes" / "test_weather" / "test_paris_weather.tools.ndjson"
SECRET = "sk-canary0123456789"
MISMATCH = ("weather_lookup at root/0, ordinal 0: args sha256:01a3d65c2139… differ from recorded "
            "sha256:6e1e312d537b…: changed /city")


def _event(seq: int, kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": 1000 + 10 * seq, "data": data}


def _call(seq: int, call_id: str, tool: str, args: dict[str, Any], text: str, error: str | None = None
          ) -> list[dict[str, Any]]:
    result: dict[str, Any] = {"turn": 1, "step": 1, "message": {"source": {"kind": "tool", "callId": call_id},
                              "content": [{"type": "tool-result", "toolCallId": call_id, "isError": error is not None,
                                           "content": [{"type": "text", "text": text}]}], "role": "user"}}
    if error is not None:
        result["error"] = {"name": "SidecarError", "code": error}
    return [_event(seq, "tool/call", {"turn": 1, "step": 1, "callId": call_id, "name": tool,
                                      "arguments": json.dumps(args)}),
            _event(seq + 1, "tool/result", result)]


def _events() -> list[dict[str, Any]]:
    chunk = {"turn": 1, "step": 1}
    return [
        {"type": "session", "id": "session-1", "createdAt": 1000, "cwd": "/w", "delegationDepth": 0},
        _event(1, "turn/start", {"turn": 1}),
        _event(2, "assistant/chunk", {**chunk, "chunk": {"type": "block-end", "index": 0, "block": {
            "type": "reasoning", "text": "think"}}}),
        _event(3, "assistant/chunk", {**chunk, "chunk": {"type": "block-end", "index": 1, "block": {
            "type": "text", "text": f"calling with {SECRET}"}}}),
        _event(4, "assistant/chunk", {**chunk, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}}),
        *_call(5, "c1", "weather_lookup", {"city": "Rome"}, f"Error: CASSETTE_MISMATCH: {MISMATCH}",
               "CASSETTE_MISMATCH"),
        *_call(7, "c2", "echo", {"text": "hi", "api_key": SECRET}, f'{{"echoed": "{SECRET}"}}'),
        *_call(9, "c3", "grep", {"pattern": "x"}, "no matches"),
        *_call(11, "c4", "notes", {"q": 1}, "served note"),
        _event(13, "turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"code": "TOOL_FAILED"}}}),
    ]


def _hooks() -> list[dict[str, Any]]:
    return [
        {"method": "llm/stream", "session": "session-1", "turn": 1, "step": 1, "purpose": None},
        {"method": "tools/execute", "callId": "c1", "tool": "weather_lookup", "action": "refuse", "source": "refused",
         "error": "CASSETTE_MISMATCH"},
        {"method": "tools/execute", "callId": "c2", "tool": "echo", "action": "serve", "source": "stub"},
        {"method": "tools/execute", "callId": "c3", "tool": "grep", "action": "next", "source": "live"},
        {"method": "tools/execute", "callId": "c4", "tool": "notes", "action": "serve", "source": "served",
         "ordinal": 3, "fault": "slow-notes"},
        {"method": "model/mismatch", "lane": "model", "position": 1, "differences": ["message 1 (user) differs"],
         "live": {"messages": [{"role": "user"}, {"role": "user", "content": f"now {SECRET}"}]},
         "recorded": None},
    ]


def _result() -> RunResult:
    summary = CassetteSummary(kind="tool", file="w.tools.ndjson", record_mode="none", mode="replay", selected=1,
                              unconsumed=1, poisoned=True)
    return RunResult(
        exit_code=1, timed_out=False, duration_ms=500, task=f"/mock run echo {SECRET}", stdout="", final_text="",
        stderr=("dsh-sidecar: warning: REPLAY_DIVERGED: grep at root/2 returned another result\n"
                f"dsh-sidecar: CASSETTE_MISMATCH: {MISMATCH}\ndsh-sidecar: fix: re-record\n"),
        tool_calls=[], tool_results=[ToolResult(call_id="c2", tool="echo", path="root/1", is_error=False, output="",
                                                value={"echoed": SECRET}),
                      ToolResult(call_id="c3", tool="grep", path="root/2", is_error=False, output="no matches")],
        mock=[], tool_cassette=summary, subagent_cassette=None,
        errors=[Diagnostic("CASSETTE_MISMATCH", MISMATCH),
                Diagnostic("MODEL_CASSETTE_MISMATCH", "model call model#1: request differs: message 1 (user) differs")],
        session_id="session-1", session_path=None, child_session_ids=[], events=_events(),
    )


def _sources() -> RunSources:
    return RunSources(result=_result(), hooks=_hooks(), label="t.py:1: a run", cassette_files={"tool": EXAMPLE},
                      redactor=redactor_for(["credentials", {"regex": "sk-[a-z0-9]+"}]))


def test_each_call_has_its_source_and_each_step_its_text_reasoning_and_finish() -> None:
    run = build_run(_sources())
    assert [(c.id, c.source, c.error) for c in run.calls] == [
        ("c1", "refused", "CASSETTE_MISMATCH"), ("c2", "stub", None), ("c3", "live", None), ("c4", "fault", None)]
    assert run.calls[3].fault == "slow-notes" and run.calls[3].ordinal == 3
    (step,) = run.steps
    assert (step.source, step.reasoning, step.finish, step.turn, step.step) == ("mock", "think", "tool-calls", 1, 1)
    assert run.calls[0].duration_ms == 10 and run.calls[0].at_ms == 50
    assert run.warnings == ["REPLAY_DIVERGED: grep at root/2 returned another result"]
    # Each error and warning is placed at its call: the mismatch under c1, the divergence under c3.
    assert [(e.kind, e.ref) for e in run.events if e.kind in ("error", "warning")] == [
        ("error", "c1"), ("error", None), ("warning", "c3")]


def test_a_tool_mismatch_holds_the_recorded_call_from_the_cassette_beside_the_live_one() -> None:
    run = build_run(_sources())
    tool = next(m for m in run.mismatches if m.kind == "tool")
    assert (tool.where, tool.call_id, tool.recorded, tool.live) == (
        "weather_lookup at root/0, ordinal 0", "c1", {"city": "Paris"}, {"city": "Rome"})
    assert [(p.pointer, p.change, p.recorded, p.live) for p in tool.pointers] == [("/city", "changed", "Paris", "Rome")]
    (unconsumed,) = run.unconsumed
    assert (unconsumed.ordinal, unconsumed.args) == (0, {"city": "Paris"})


def test_a_model_mismatch_shows_the_differing_message_and_says_why_the_recorded_text_is_missing() -> None:
    run = build_run(_sources())
    model = next(m for m in run.mismatches if m.kind == "model")
    assert model.where == "model call model#1" and model.differences == ["message 1 (user) differs"]
    (part,) = model.pointers
    assert part.pointer == "/messages/1" and part.recorded is None
    assert model.note is not None and "requestView: full" in model.note


def test_no_filtered_secret_reaches_the_page_or_its_json(tmp_path: Path) -> None:
    later = TraceLater()
    later.add(_sources())
    page = later.write(tmp_path / "t.html", title=f"test {SECRET}", test="t.py::a", outcome="failed")
    assert page is not None
    for file in (page, page.with_suffix(".json")):
        text = file.read_text()
        assert SECRET not in text and "canary0123456789" not in text
    document = json.loads(page.with_suffix(".json").read_text())
    assert (document["type"], document["version"], document["outcome"]) == ("dsh-sidecar-trace", 1, "failed")
    echo = document["runs"][0]["calls"][1]
    assert echo["args"] == {"api_key": "[redacted]", "text": "hi"}
    assert HIDDEN in document["runs"][0]["steps"][0]["text"] or "[redacted]" in document["runs"][0]["steps"][0]["text"]


def test_a_trace_with_nothing_kept_writes_nothing(tmp_path: Path) -> None:
    assert TraceLater().write(tmp_path / "t.html", title="t") is None
    assert not (tmp_path / "t.html").exists()


def test_filters_that_do_not_compile_hide_every_value() -> None:
    redactor = redactor_for([{"regex": "("}])
    assert redactor.value({"a": 1}, tool="t", where="args") == NOT_SHOWN


def test_a_filter_function_that_raises_hides_its_value_and_nothing_else_breaks() -> None:
    def broken(value: Any) -> Any:
        raise ValueError("no")

    redactor = Redactor([{"call": "m:broken"}], {"m:broken": broken})
    assert redactor.value({"a": 1}, tool="t", where="args") == NOT_SHOWN


def test_a_regex_that_hides_part_of_a_text_scrubs_that_part_everywhere() -> None:
    redactor = Redactor([{"regex": "tok-[0-9]+"}])
    assert redactor.value({"q": "use tok-1234 now"}, tool="t", where="args") == {"q": "use [redacted] now"}
    assert redactor.scrub({"other": "echo tok-1234", "k": ["tok-1234"]}) == {"other": f"echo {HIDDEN}", "k": [HIDDEN]}


def test_the_hook_log_reader_skips_a_line_cut_short(tmp_path: Path) -> None:
    log = tmp_path / "h.jsonl"
    log.write_bytes(b'{"method":"initialize"}\n[1]\n{"method":"tools/exe')
    assert read_hook_log(log) == [{"method": "initialize"}]
    assert read_hook_log(tmp_path / "missing.jsonl") == []
