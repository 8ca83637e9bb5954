"""Importing a session log: calls rebuilt with the recorder's fingerprints, refusals by name."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main as sidecar
from dsh_sidecar.python_core.canonical import digest
from dsh_sidecar.python_core.filters import parse_filters
from dsh_sidecar.python_core.model_cassette import ModelCassetteEngine, Serve, parse_config, verify_file
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteExists, ModelCassetteMismatch
from dsh_sidecar.python_core.session_import import (
    IMPORTED_HOST,
    ImportPrivate,
    ImportUnfaithful,
    calls_of,
    merged,
    model_lines,
    module_source,
    one_turn,
    write_lines,
)
from dsh_sidecar.python_core.session_log import encode_segment, project_key, read_session_log

DATA = Path(__file__).parent / "data"
CWD = "/srv/example/project"
ROUTE = {"provider": "deepseek-official", "model": "deepseek-v4-flash", "maxTokens": 256000, "reasoningEffort": "high"}
TOOL = {"name": "weather_lookup", "description": "Weather of a city.", "source": "plugin",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "api_key": {"type": "string"}}}}
TASK: dict[str, Any] = {"content": [{"type": "text", "text": "Weather in Paris?"}], "source": {"kind": "user"},
                        "role": "user", "id": "u1"}
CONTEXT: dict[str, Any] = {"content": [{"type": "text", "text": f"The session workspace: {CWD}."}],
                           "source": {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"}, "role": "user",
                           "id": "u2"}
CALL = {"type": "tool-call", "id": "call_1", "name": "weather_lookup", "arguments": '{"city":"Paris"}'}
ASSISTANT = {"role": "assistant", "content": [CALL],
             "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}, "id": "a1"}
RESULT = {"source": {"kind": "tool", "callId": "call_1"}, "role": "user", "id": "r1", "content": [
    {"type": "tool-result", "toolCallId": "call_1", "content": [{"type": "text", "text": "Paris: sunny"}],
     "isError": False}]}


def _chunk(turn: int, step: int, chunk: dict[str, Any], time: int = 1000) -> dict[str, Any]:
    return {"type": "assistant/chunk", "seq": 0, "time": time, "data": {"turn": turn, "step": step, "chunk": chunk}}


def _finish(turn: int, step: int, kind: str = "stop", time: int = 1000) -> dict[str, Any]:
    return _chunk(turn, step, {"type": "finish", "reason": {"kind": kind}}, time)


def _log(*events: dict[str, Any], **header: Any) -> list[dict[str, Any]]:
    """A two-step weather turn as rc.8 logs it (delta runs packed into storage rows), then ``events``."""
    first = {"type": "session", "version": 0, "id": "session-1", "createdAt": 1, "cwd": CWD, "delegationDepth": 0}
    return [
        {**first, **header},
        {"type": "user/message", "seq": 1, "time": 1, "data": TASK, "surfaceOp": "append"},
        {"type": "user/message", "seq": 2, "time": 1, "data": CONTEXT, "surfaceOp": "append"},
        {"type": "request/header", "seq": 3, "time": 2, "data": {"header": {
            "config": ROUTE, "adapterDefaults": {"maxTokens": True}, "system": f"You work in {CWD}.",
            "tools": [TOOL]}}},
        {"type": "session/title-llm-request", "seq": 4, "time": 2, "data": {"system": "Title it.", "messages": []}},
        _chunk(1, 1, {"type": "block-start", "index": 0, "blockType": "tool-call"}, 10),
        {"type": "tool-call-chunks", "seq0": 6, "time0": 11, "data": {
            "turn": 1, "step": 1, "index": 0, "id": "call_1", "name": "weather_lookup", "dt": [0, 2],
            "args": ['{"ci', 'ty":"Pa', 'ris"}']}},
        _chunk(1, 1, {"type": "block-end", "index": 0, "block": CALL}, 14),
        _finish(1, 1, "tool-calls", 15),
        {"type": "assistant/message", "seq": 11, "time": 15, "data": {"turn": 1, "step": 1, "message": ASSISTANT},
         "surfaceOp": "append"},
        {"type": "tool/call", "seq": 12, "time": 15, "data": {
            "turn": 1, "step": 1, "callId": "call_1", "name": "weather_lookup", "arguments": CALL["arguments"]}},
        {"type": "tool/result", "seq": 13, "time": 16, "data": {"turn": 1, "step": 1, "message": RESULT},
         "surfaceOp": "append"},
        {"type": "text-chunks", "seq0": 14, "time0": 20, "data": {
            "turn": 1, "step": 2, "index": 0, "dt": [1, 1], "texts": ["It ", "is ", "sunny."]}},
        _finish(1, 2, "stop", 23),
        {"type": "turn/end", "seq": 19, "time": 24, "data": {"turn": 1, "reason": {"kind": "completed"}}},
        *events,
    ]


def _request(messages: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    """What the shim sends for a loop call: ``GenerateOptions`` with ids and the session id."""
    return {**ROUTE, "system": f"You work in {CWD}.", "tools": [TOOL], "messages": messages,
            "sessionId": "session-1", **changes}


def _written(tmp_path: Path, events: list[dict[str, Any]], filters: tuple[Any, ...] = ("credentials",)) -> Path:
    path = tmp_path / "imported.ndjson"
    write_lines(str(path), model_lines(calls_of(events), filters=parse_filters(list(filters))))
    return path


def _engine(path: Path, cwd: str, filters: tuple[Any, ...] = ("credentials",)) -> ModelCassetteEngine:
    config = parse_config({"mode": "replay", "file": str(path), "filters": list(filters)}, cwd=cwd)
    return ModelCassetteEngine.open(config, cwd=cwd, host_version="0.1.0-rc.8")


def test_each_step_becomes_a_call_with_its_request_and_the_expanded_chunks() -> None:
    log = calls_of(_log())

    assert (log.cwd, log.left_out) == (CWD, ["session-title#0"])
    first, second = log.calls
    assert [(c.lane, c.position, c.turn, c.step) for c in log.calls] == [("model", 0, 1, 1), ("model", 1, 1, 2)]
    assert first.request == {**ROUTE, "system": f"You work in {CWD}.", "tools": [TOOL], "messages": [
        {k: v for k, v in m.items() if k != "id"} for m in (TASK, CONTEXT)]}
    assert [m["role"] for m in second.request["messages"]] == ["user", "user", "assistant", "user"]
    # Storage rows come back as the chunks rc.8 packed, in its key order, at their times.
    assert list(first.chunks[1]) == ["type", "index", "id", "name", "argumentsDelta"]
    assert [c.get("argumentsDelta") for c in first.chunks] == [None, '{"ci', 'ty":"Pa', 'ris"}', None, None]
    assert first.times == [10, 11, 11, 13, 14, 15]
    assert second.chunks[:3] == [{"type": "text-delta", "index": 0, "text": t} for t in ("It ", "is ", "sunny.")]
    assert second.times == [20, 21, 22, 23]


def test_a_retried_stream_is_a_second_call_with_the_same_request() -> None:
    events = _log()
    failed = _chunk(1, 2, {"type": "finish", "reason": {"kind": "error", "failure": {
        "code": "SERVER", "message": "DeepSeek API stream from http://10.1.2.3:8080/v1 failed"}}}, 18)
    log = calls_of([*events[:-2], failed, *events[-2:]])

    assert [c.chunks[-1]["reason"]["kind"] for c in log.calls] == ["tool-calls", "error", "stop"]
    assert log.calls[1].request == log.calls[2].request
    lines = model_lines(log)
    assert b"10.1.2.3" not in b"".join(lines) and b"<endpoint>" in lines[2]


def _pruned(start: int = 13) -> list[dict[str, Any]]:
    """The log with its tool result pruned before step 2, as rc.8's model-free pruner writes it."""
    shown = json.loads(json.dumps(RESULT))
    shown["content"][0]["content"][0]["text"] = "Par[... 4 characters omitted ...]ny"
    events = _log()
    at = next(i for i, e in enumerate(events) if e["type"] == "text-chunks")
    events[at:at] = [
        {"type": "compaction/prune", "seq": 14, "time": 17, "data": {"shadowedRange": {"start": 13, "end": 13}}},
        {"type": "tool/result", "seq": 15, "time": 17, "data": {"turn": 1, "step": 1, "message": shown},
         "surfaceOp": {"op": "replace", "start": start, "end": start}, "sourceEventSeqs": [start]},
    ]
    return events


def test_a_pruned_tool_result_takes_its_original_s_place_in_the_next_request() -> None:
    first, second = calls_of(_pruned()).calls

    assert len(first.request["messages"]) == 2
    assert [m["role"] for m in second.request["messages"]] == ["user", "user", "assistant", "user"]
    assert second.request["messages"][3]["content"][0]["content"][0]["text"] == "Par[... 4 characters omitted ...]ny"


def test_a_replay_of_the_session_s_requests_is_served_from_another_folder(tmp_path: Path) -> None:
    path = _written(tmp_path, _log())
    assert verify_file(str(path)).valid
    header = json.loads(path.read_bytes().split(b"\n")[0])
    assert header["host"] == IMPORTED_HOST and header["filters"].startswith("sha256:")
    elsewhere = "/srv/ci/checkout"  # the prompt's folder is <cwd> in both
    moved = [{**m, "content": [{"type": "text", "text": m["content"][0]["text"].replace(CWD, elsewhere)}]}
             if m is CONTEXT else m for m in (TASK, CONTEXT)]
    engine = _engine(path, elsewhere)

    first = engine.admit(_request(moved, system=f"You work in {elsewhere}."))
    second = engine.admit(_request([*moved, ASSISTANT, RESULT], system=f"You work in {elsewhere}."))
    assert isinstance(first, Serve) and isinstance(second, Serve)
    assert json.loads(bytes(second.chunks))[2]["text"] == "sunny."
    report = engine.close()
    assert report.errors == () and (report.stats.consumed, report.stats.unconsumed) == (2, 0)


def test_a_changed_tool_result_fails_closed_naming_the_message(tmp_path: Path) -> None:
    engine = _engine(_written(tmp_path, _log()), CWD)
    engine.admit(_request([TASK, CONTEXT]))
    changed = json.loads(json.dumps(RESULT).replace("Paris: sunny", "Paris: rain"))

    with pytest.raises(ModelCassetteMismatch, match=r"model call model#1: .*message 3 \(user\) differs"):
        engine.admit(_request([TASK, CONTEXT, ASSISTANT, changed]))


def test_the_credentials_filter_runs_over_the_view_and_the_replay_declares_it(tmp_path: Path) -> None:
    secret = {**TASK, "source": {"kind": "user", "api_key": "sk-import-canary"}}
    events = [e if e.get("data") is not TASK else {**e, "data": secret} for e in _log()]
    lines = model_lines(calls_of(events), filters=parse_filters(["credentials"]), request_view="full")
    assert b"sk-import-canary" not in b"".join(lines) and CWD.encode() not in b"".join(lines)

    unfiltered = model_lines(calls_of(events), request_view="full")
    assert b"sk-import-canary" in b"".join(unfiltered)  # the filter, not the view, removed it


def test_the_recorder_s_fingerprints_and_chunks_of_real_logs_are_reproduced() -> None:
    """Two real rc.8 logs (retries with a cut stream; reasoning, parallel tool calls) and the
    fingerprints and chunk digests a model cassette recorded in the same runs."""
    recorded = json.loads((DATA / "recorded.json").read_text())
    for name in ("retries", "parallel"):
        lines = model_lines(calls_of(read_session_log(DATA / f"{name}.session.jsonl.zstd")))
        calls = [json.loads(line) for line in lines if b'"kind":"call"' in line]
        loop = [c for c in recorded[name] if c["lane"] == "model"]
        assert [(c["position"], c["fingerprint"], c["finish"], digest(c["chunks"])) for c in calls] == [
            (c["position"], c["fingerprint"], c["finish"], c["chunks"]) for c in loop], name
        assert json.loads(lines[-1])["leftOut"] == ["session-title#0"]


@pytest.mark.parametrize(("events", "field"), [
    ([], "session"),
    (_log(parentSession="session-0", delegationDepth=1), "session"),
    (_log(cwd=None), "cwd"),
    ([_log()[0], _chunk(1, 1, {"type": "text-delta", "index": 0, "text": "x"})], "request"),
    (_log(_chunk(2, 1, {"type": "text-delta", "index": 0, "text": "x"})), "chunks"),
    (_log({"type": "user/message", "data": TASK, "surfaceOp": {"op": "replace", "start": 0, "end": 1}}), "compaction"),
    (_log({"type": "text-chunks", "seq0": 1, "time0": 1, "data": {"turn": 1, "index": 0, "dt": [], "texts": ["a"]}}),
     "step"),
    (_log({"type": "text-chunks", "seq0": 1, "time0": 1, "data": {"texts": ["a", "b"], "dt": []}}), "chunks"),
    (_log(_chunk(2, 1, {"index": 0})), "chunks"),
    (_log({"type": "compaction/end", "seq": 20, "data": {"turn": 2, "error": "failed"}}), "compaction"),
    (_pruned(start=99), "surface"),
])
def test_what_a_log_lacks_is_refused_by_name(events: list[dict[str, Any]], field: str) -> None:
    with pytest.raises(ImportUnfaithful) as refused:
        calls_of(events)
    assert refused.value.field == field
    message = str(refused.value)
    assert message.startswith(f"IMPORT_UNFAITHFUL: {field}: ") and "; nothing was written; fix: " in message


def test_the_mock_route_and_an_answer_naming_the_cwd_are_refused() -> None:
    mocked = [{**e, "data": {"header": {**e["data"]["header"], "config": {**ROUTE, "provider": "mock"}}}}
              if e["type"] == "request/header" else e for e in _log()]
    with pytest.raises(ImportUnfaithful, match=r"route: model call model#0 .* mock route"):
        model_lines(calls_of(mocked))
    naming = _log(_chunk(2, 1, {"type": "text-delta", "index": 0, "text": f"see {CWD}/notes.md"}), _finish(2, 1))
    with pytest.raises(ImportPrivate, match=r"IMPORT_PRIVATE: model call model#2 \(turn 2, step 1\): .*working"):
        model_lines(calls_of(naming))


def test_an_import_never_overwrites(tmp_path: Path) -> None:
    path = _written(tmp_path, _log())
    before = path.read_bytes()
    with pytest.raises(ModelCassetteExists):
        write_lines(str(path), model_lines(calls_of(_log())))
    assert path.read_bytes() == before and not (tmp_path / "imported.ndjson.partial").exists()


def _cli(tmp_path: Path, *args: str) -> Any:
    return CliRunner().invoke(sidecar, ["import", *args], catch_exceptions=False)


def test_the_cli_imports_a_log_path_and_names_every_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in _log()))

    done = _cli(tmp_path, str(log), "--model-cassette", "m.ndjson", "--request-view", "full")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "dsh-sidecar import: session session-1: wrote m.ndjson: 2 calls (model 2); left out session-title#0 "
        "(the log holds its request, not its stream)",
        "valid: dsh-model-cassette v2: 2 calls (model 2), 4 frames, complete tail, imported from a session log "
        "(docs/import.md)",
        "dsh-sidecar import: not in the log, per field: each call's wait before its first chunk (replays start "
        "streaming at once); tool values (the tools run live at replay; --tools serves them); the session title's "
        "stream (left out; the host keeps its fallback title) (docs/import.md)",
    ]
    verified = CliRunner().invoke(sidecar, ["model-cassette", "verify", "m.ndjson"])
    assert verified.output == done.output.splitlines()[1] + "\n"
    inspected = CliRunner().invoke(sidecar, ["model-cassette", "inspect", "m.ndjson"])
    assert inspected.output.startswith("protocol: dsh-model-cassette v2, requestView full, imported from a session log")
    again = _cli(tmp_path, str(log), "--model-cassette", "m.ndjson")
    assert again.exit_code == 1 and "MODEL_CASSETTE_EXISTS: m.ndjson already exists" in again.output
    tools = _cli(tmp_path, str(log), "--model-cassette", "t.ndjson", "--tools", "bash", "--tool-cassette", "t.tools")
    assert tools.exit_code == 1 and "IMPORT_UNFAITHFUL: tools: no call of a tool matching bash" in tools.output
    assert not (tmp_path / "t.ndjson").exists() and not (tmp_path / "t.tools").exists()  # refused whole, never half
    assert _cli(tmp_path, str(log)).exit_code == 2
    bad = _cli(tmp_path, str(log), "--model-cassette", "x.ndjson", "--filters", '[{"key": "a", "tool": "x"}]')
    assert bad.exit_code == 1 and "modelCassette.filters[0].tool" in bad.output
    (tmp_path / "replay.override.json").write_text("{}")
    override = _cli(tmp_path, str(log), "--model-cassette", "o.ndjson")
    assert override.exit_code == 1 and "IMPORT_UNFAITHFUL: override: replay.override.json: not a ReplayEntry[]" \
        in override.output and not (tmp_path / "o.ndjson").exists()
    (tmp_path / "replay.override.json").unlink()
    missing = _cli(tmp_path, "session-nope", "--model-cassette", "x.ndjson", "--dsh-home", str(tmp_path))
    assert missing.exit_code == 1 and "SESSION_NOT_FOUND: no session log for 'session-nope'" in missing.output


def test_the_generated_test_module_replays_the_task_and_asserts_the_text_and_results() -> None:
    source = module_source(_log(), session_id="session-83ead6e0-54de", cwd=CWD, module_stem="test_paris",
                           filters=["credentials"])
    compile(source, "test_paris.py", "exec")
    assert "\nTASK = 'Weather in Paris?'\n" in source
    assert "TOOL_RESULTS = [\n    ('weather_lookup', 'Paris: sunny'),\n]" in source
    assert "\ndef test_session_83ead6e0(dsh):\n" in source
    assert "ModelCassette(file='cassettes/test_paris/test_session_83ead6e0.model.ndjson'" in source
    assert "['credentials']}),\n                     allow_live_tools=['weather_lookup'])" in source
    assert CWD not in source
    events = _log()
    events.append({"type": "assistant/message", "data": {"message": {"role": "assistant", "content": [
        {"type": "text", "text": "It is sunny."}]}}})
    assert "\nFINAL_TEXT = 'It is sunny.'\n" in module_source(events, session_id="s", cwd=CWD, module_stem="t",
                                                                filters=[])


def test_a_tool_result_naming_the_session_folder_is_asserted_against_the_replay_s_folder() -> None:
    source = module_source(_with_result(_log(), f"wrote {CWD}/a.txt"), session_id="s", cwd=CWD, module_stem="t",
                           filters=[])

    assert CWD not in source and "('weather_lookup', 'wrote <cwd>/a.txt')," in source
    assert "[(r.tool, r.output.replace(str(dsh.cwd), '<cwd>')) for r in result.tool_results]" in source
    compile(source, "t.py", "exec")


def _with_result(events: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    shown = json.loads(json.dumps(RESULT))
    shown["content"][0]["content"][0]["text"] = text
    return [{**e, "data": {**e["data"], "message": shown}} if e["type"] == "tool/result" else e for e in events]


@pytest.mark.parametrize(("change", "refusal"), [
    (lambda e: [*e, {"type": "user/message", "data": TASK, "surfaceOp": "append"}],
     "IMPORT_UNFAITHFUL: test: the session has 2 user messages"),
    (lambda e: [*e, e[-1]], "IMPORT_UNFAITHFUL: test: the session has 2 finished turns"),
    (lambda e: [*e[:-1], {"type": "turn/end", "data": {"reason": {"kind": "error"}}}],
     "IMPORT_UNFAITHFUL: test: the session's turn ended error; a generated test asserts a completed turn"),
    (lambda e: _with_result(e, '{"token": "t-1"}'),
     "IMPORT_PRIVATE: test: tool result 0: it holds a member the credentials filter hides"),
])
def test_what_a_generated_test_cannot_hold_is_refused(change: Any, refusal: str) -> None:
    with pytest.raises((ImportUnfaithful, ImportPrivate)) as refused:
        module_source(change(_log()), session_id="s", cwd=CWD, module_stem="t", filters=[])
    assert str(refused.value).startswith(refusal)


def test_the_cli_writes_the_test_and_its_cassette_where_the_fixture_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in _log()))

    done = _cli(tmp_path, str(log), "--test", "tests/test_paris.py")
    assert done.exit_code == 0, done.output
    assert "wrote tests/test_paris.py: test_session_1 (run it: pytest tests/test_paris.py)" in done.output
    assert verify_file(str(tmp_path / "tests/cassettes/test_paris/test_session_1.model.ndjson")).valid
    again = _cli(tmp_path, str(log), "--test", "tests/test_paris.py")
    assert again.exit_code == 1 and "IMPORT_TEST_EXISTS: test_paris.py already exists" in again.output
    both = _cli(tmp_path, str(log), "--test", "t.py", "--model-cassette", "m.ndjson")
    assert both.exit_code == 2 and not (tmp_path / "t.py").exists()


def _home_log(home: Path, cwd: Path, session_id: str, events: list[dict[str, Any]]) -> None:
    folder = home / "sessions" / project_key(os.path.realpath(cwd)) / encode_segment(session_id)
    folder.mkdir(parents=True)
    (folder / "session.jsonl").write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in events))


def test_a_session_is_found_by_id_or_as_the_newest_and_a_delegating_one_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    _home_log(home, work, "session-1", _log(createdAt=1))
    _home_log(home, work, "session-2", _log(id="session-2", createdAt=2))
    where = ("--cwd", str(work), "--dsh-home", str(home))

    by_id = _cli(tmp_path, "session-1", *where, "--model-cassette", "one.ndjson")
    assert by_id.exit_code == 0 and "session session-1: wrote one.ndjson" in by_id.output
    newest = _cli(tmp_path, "--last", *where, "--model-cassette", "last.ndjson")
    assert newest.exit_code == 0 and "session session-2: wrote last.ndjson" in newest.output
    assert _cli(tmp_path, "session-1", "--last", *where, "--model-cassette", "x.ndjson").exit_code == 2
    assert _cli(tmp_path, *where, "--model-cassette", "x.ndjson").exit_code == 2

    # A child whose calls ran while its parent's did (here: at the very same times) has no
    # admission order in the logs: refused, nothing written.
    _home_log(home, work, "child-1", _log(id="child-1", parentSession="session-2", delegationDepth=1))
    refused = _cli(tmp_path, "session-2", *where, "--model-cassette", "x.ndjson")
    assert refused.exit_code == 1 and "IMPORT_UNFAITHFUL: subagents: calls of two sessions overlap" in refused.output
    assert not (tmp_path / "x.ndjson").exists()
    # A child that ran between its parent's two steps: its call is imported between theirs.
    _home_log(home, work, "child-2", _child("child-2", "session-1"))
    delegated = _cli(tmp_path, "session-1", *where, "--model-cassette", "delegated.ndjson")
    assert delegated.exit_code == 0, delegated.output
    assert "wrote delegated.ndjson: 3 calls (model 3)" in delegated.output
    empty = _cli(tmp_path, "--last", "--cwd", str(tmp_path), "--dsh-home", str(home), "--model-cassette", "x.ndjson")
    assert empty.exit_code == 1 and "SESSION_NOT_FOUND: no session for this folder" in empty.output


def _child(session_id: str, parent: str) -> list[dict[str, Any]]:
    """A subagent's log: one answer, streamed after its parent's first step and before its second."""
    prompt = {"content": [{"type": "text", "text": "CHILD: capital?"}], "source": {"kind": "user"}, "role": "user",
              "id": "c1"}
    return [
        {"type": "session", "version": 0, "id": session_id, "createdAt": 16, "cwd": CWD, "delegationDepth": 1,
         "parentSession": parent},
        {"type": "user/message", "seq": 1, "time": 16, "data": prompt, "surfaceOp": "append"},
        {"type": "request/header", "seq": 2, "time": 16, "data": {"header": {"config": ROUTE, "system": "Child.",
                                                                             "tools": []}}},
        {"type": "text-chunks", "seq0": 3, "time0": 17, "data": {"turn": 1, "step": 1, "index": 0, "dt": [1],
                                                                  "texts": ["Paris", "."]}},
        _finish(1, 1, "stop", 19),
        {"type": "turn/end", "seq": 6, "time": 19, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]


def test_a_subagent_s_calls_are_merged_between_its_parent_s_in_admission_order() -> None:
    log = merged(calls_of(_log()), [calls_of(_child("child-1", "session-1"), child=True)])
    assert [(c.position, c.request["system"]) for c in log.calls] == [
        (0, f"You work in {CWD}."), (1, "Child."), (2, f"You work in {CWD}.")]
    with pytest.raises(ImportUnfaithful, match=r"IMPORT_UNFAITHFUL: session: a child \(subagent\) session"):
        calls_of(_child("child-1", "session-1"))
    elsewhere = calls_of([{**_child("child-1", "session-1")[0], "cwd": "/srv"}, *_child("c", "s")[1:]], child=True)
    with pytest.raises(ImportUnfaithful, match=r"IMPORT_UNFAITHFUL: subagents: a child session ran in another"):
        merged(calls_of(_log()), [elsewhere])


def _two_turns() -> list[dict[str, Any]]:
    """The weather turn, then a second task answered with the first turn's history."""
    second = {"content": [{"type": "text", "text": "And Rome?"}], "source": {"kind": "user"}, "role": "user",
              "id": "u3"}
    return _log(
        {"type": "turn/start", "seq": 20, "time": 30, "data": {"turn": 2}},
        {"type": "user/message", "seq": 21, "time": 30, "data": second, "surfaceOp": "append"},
        {"type": "text-chunks", "seq0": 22, "time0": 31, "data": {
            "turn": 2, "step": 1, "index": 0, "dt": [1], "texts": ["Rome ", "too."]}},
        _finish(2, 1, "stop", 33),
        {"type": "turn/end", "seq": 25, "time": 34, "data": {"turn": 2, "reason": {"kind": "completed"}}},
    )


def test_a_session_of_several_turns_imports_its_first_with_turn_1_and_is_refused_otherwise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _two_turns()
    with pytest.raises(ImportUnfaithful, match=r"IMPORT_UNFAITHFUL: turns: the session has 2 turns and headless DSH"):
        one_turn(events, None)
    with pytest.raises(ImportUnfaithful, match=r"IMPORT_UNFAITHFUL: turn: turn 2 is not the session's first"):
        one_turn(events, 2)
    first = calls_of(one_turn(events, 1))
    assert [(c.turn, c.step) for c in first.calls] == [(1, 1), (1, 2)]
    assert calls_of(one_turn(_log(), None)).calls == calls_of(_log()).calls  # one turn: as it is
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in events))
    refused = _cli(tmp_path, str(log), "--model-cassette", "all.ndjson")
    assert refused.exit_code == 1 and refused.output == (
        "dsh-sidecar: IMPORT_UNFAITHFUL: turns: the session has 2 turns and headless DSH answers one task in a "
        "fresh session; nothing was written; fix: import the first turn with --turn 1\n")
    assert not (tmp_path / "all.ndjson").exists()
    done = _cli(tmp_path, str(log), "--turn", "1", "--model-cassette", "first.ndjson")
    assert done.exit_code == 0, done.output
    assert "wrote first.ndjson: 2 calls (model 2)" in done.output
