"""The run API (``bridge.api.run``) and ``dsh-sidecar run`` against real headless DSH rc.8.

Every run here is a real ``dsh --profile headless`` process with the shim installed through the
rc.8 CLI; the example tools plugin provides real tool bodies (``weather_lookup`` calls a local
HTTP service that the tests start and stop).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import msgspec
import pytest
from dshrun import DSH_HOME, ROOT, tool_bodies
from weather_service import weather_service

from dsh_sidecar.bridge.api.run import (
    CassetteMissing,
    Diagnostic,
    Row,
    RunResult,
    SubagentCassette,
    ToolCassette,
    run,
)
from dsh_sidecar.python_core.session_log import project_key

WEATHER = '/mock run weather_lookup({"city": "Paris"})'
BROKEN = '/mock run broken({"why": "on purpose"})'
SCHEMA = ROOT / "docs" / "run-result.schema.json"


def _tools(url: str = "http://127.0.0.1:9") -> list[Row]:
    # Port 9 (discard) on loopback: nothing answers, so a real body that runs fails loudly.
    return [Row("example-tools", "dsh-example-tools", {"weatherUrl": url})]


def test_once_records_a_missing_cassette_then_replays_it_with_the_service_stopped(tmp_path: Path) -> None:
    cassette = ToolCassette(file="weather.ndjson", include=["weather_lookup"])
    with weather_service(tmp_path) as service:
        record = run(WEATHER, cwd=tmp_path, rows=_tools(service.url), tool_cassette=cassette, record_mode="once")
    assert record.ok, record.explain()
    assert record.tool_cassette is not None
    assert (record.tool_cassette.mode, record.tool_cassette.recorded, record.tool_cassette.published) == (
        "record", 1, True,
    )
    replay = run(WEATHER, cwd=tmp_path, rows=_tools(service.url), tool_cassette=cassette, record_mode="once")
    assert replay.ok, replay.explain()
    assert service.requests == 1
    assert tool_bodies(tmp_path) == ["weather_lookup"]
    assert replay.tool_cassette is not None
    assert (replay.tool_cassette.mode, replay.tool_cassette.consumed, replay.tool_cassette.unconsumed) == (
        "replay", 1, 0,
    )
    weather = replay.result("weather_lookup")
    assert (weather.is_error, weather.output, weather.path) == (False, "Paris: sunny, 21C", "root/0")
    assert weather.value == {"city": "Paris", "forecast": "sunny", "temperatureC": 21}
    assert [(c.tool, c.path, c.arguments) for c in replay.tool_calls] == [
        ("weather_lookup", "root/0", {"city": "Paris"}),
    ]
    assert replay.final_text == "mock run complete: 1 step, 1 tool call"
    assert replay.mock[-1].state == "succeeded"
    assert replay.session_id is not None and replay.session_path is not None
    assert replay.session_id != record.session_id
    assert replay.events[0]["id"] == replay.session_id
    assert replay.events[-1]["type"] == "turn/end"
    assert sorted(os.listdir(tmp_path)) == ["agent-status.log", "tool-bodies.log", "weather-requests.log",
                                            "weather.ndjson"]


def test_record_mode_none_refuses_a_missing_cassette_before_dsh_starts(tmp_path: Path) -> None:
    with pytest.raises(CassetteMissing) as caught:
        run(WEATHER, cwd=tmp_path, rows=_tools(), record_mode="none",
            tool_cassette=ToolCassette(file="missing.ndjson", include=["weather_lookup"]))
    assert str(caught.value) == (
        "CASSETTE_MISSING: toolCassette.file: missing.ndjson does not exist (record mode none); "
        "record it with record mode `once`"
    )
    assert not (DSH_HOME / "sessions" / project_key(str(tmp_path))).exists()
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_record_mode_all_replaces_the_cassette_only_with_a_complete_recording(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    first = run('/mock run echo({"text": "old"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette,
                record_mode="all")
    assert first.ok, first.explain()
    old = (tmp_path / "echo.ndjson").read_bytes()
    # A re-record that never finishes (killed by the timeout in a long wait) must not touch it.
    failed = run(
        script={"type": "dsh-mock-script", "version": 1, "steps": [
            {"tool": "echo", "args": {"text": "new"}}, {"wait": 600000}, {"tool": "echo", "args": {"text": "x"}}]},
        cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="all", timeout=6,
    )
    assert failed.timed_out
    assert failed.tool_cassette is not None and not failed.tool_cassette.published
    assert (tmp_path / "echo.ndjson").read_bytes() == old
    assert sorted(p for p in os.listdir(tmp_path) if "echo.ndjson" in p) == ["echo.ndjson"]
    second = run('/mock run echo({"text": "new"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette,
                 record_mode="all")
    assert second.ok and second.tool_cassette is not None and second.tool_cassette.published
    replay = run('/mock run echo({"text": "new"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette)
    assert replay.ok, replay.explain()
    assert replay.result("echo").value == {"text": "new"}


def test_a_turn_that_fails_on_purpose_is_still_a_complete_recording(tmp_path: Path) -> None:
    cassette = ToolCassette(file="broken.ndjson", include=["broken"])
    record = run(BROKEN, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="once")
    assert record.exit_code == 1 and record.result("broken").is_error
    assert record.tool_cassette is not None and record.tool_cassette.published
    replay = run(BROKEN, cwd=tmp_path, rows=_tools(), tool_cassette=cassette)
    assert replay.exit_code == 1 and replay.errors == []
    assert replay.tool_cassette is not None and replay.tool_cassette.consumed == 1
    assert replay.result("broken").error_code == record.result("broken").error_code
    assert tool_bodies(tmp_path) == ["broken"]


def test_a_replay_mismatch_explains_which_call_differed_and_how_to_re_record(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    assert run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette,
               record_mode="once").ok
    failed = run('/mock run echo({"text": "b"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette)
    assert failed.exit_code == 1
    assert [e.code for e in failed.errors] == ["CASSETTE_MISMATCH", "CASSETTE_UNCONSUMED"]
    text = failed.explain("pytest t.py::x --dsh-record-mode all")
    lines = text.splitlines()
    assert len(lines) <= 15
    assert lines[1].startswith("  CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:")
    assert lines[-1] == "  to re-record: pytest t.py::x --dsh-record-mode all"
    assert '"b"' not in text.split("\n", 1)[1]  # arguments never reach the diagnostics
    with pytest.raises(Exception, match="RUN_FAILED: dsh run exited 1"):
        failed.check()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_timeout_ends_only_the_runs_own_process_group(tmp_path: Path) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        result = run(
            script={"type": "dsh-mock-script", "version": 1, "steps": [
                {"tool": "echo", "args": {"text": "a"}}, {"wait": 600000},
                {"tool": "echo", "args": {"text": "b"}}]},
            cwd=tmp_path, rows=_tools(), timeout=8,
        )
        assert result.timed_out and not result.ok
        assert result.exit_code in (-signal.SIGTERM, -signal.SIGKILL, 1, 130, 143)
        assert bystander.poll() is None
        trace_pgids = {p for p in _pgids_running(str(tmp_path))}
        assert trace_pgids == set()
        assert tool_bodies(tmp_path) == ["echo"]
    finally:
        bystander.kill()
        bystander.wait()


def _pgids_running(cwd: str) -> list[int]:
    """Process groups of processes still running in ``cwd`` (a leaked dsh or sidecar)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd") == cwd:
                found.append(os.getpgid(int(pid)))
        except OSError:
            continue
    return found


def test_concurrent_runs_in_one_cwd_each_get_their_own_session(tmp_path: Path) -> None:
    def one(i: int) -> RunResult:
        return run(f'/mock run echo({{"text": "run-{i}"}})', cwd=tmp_path, rows=_tools())

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, range(4)))
    assert [r.exit_code for r in results] == [0, 0, 0, 0]
    assert [r.result("echo").output for r in results] == [f"echo:run-{i}" for i in range(4)]
    assert len({r.session_id for r in results}) == 4
    for i, r in enumerate(results):
        assert r.tool_calls[0].arguments == {"text": f"run-{i}"}


def test_an_in_memory_script_replays_a_parallel_group_and_leaves_no_file(tmp_path: Path) -> None:
    script = {"type": "dsh-mock-script", "version": 1, "steps": [
        {"parallel": [{"tool": "echo", "args": {"text": "a"}}, {"tool": "echo", "args": {"text": "b"}}]},
        {"wait": 5}, {"tool": "echo", "args": {"text": "c"}}]}
    result = run(script=script, cwd=tmp_path, rows=_tools(), overwrite_wait_time_ms=0)
    assert result.ok, result.explain()
    assert [(c.path, c.arguments["text"]) for c in result.tool_calls] == [("root/0", "a"), ("root/1", "b"),
                                                                           ("root/2", "c")]
    assert result.mock[-1].step_count == 2 and result.mock[-1].state == "succeeded"
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".mock.json")]


def test_the_session_of_an_unusual_cwd_is_found_by_rc8s_own_path_rule(tmp_path: Path) -> None:
    cwd = tmp_path / "my project ~ü" / "sub"
    cwd.mkdir(parents=True)
    result = run('/mock run echo({"text": "x"})', cwd=cwd, rows=_tools())
    assert result.ok and result.session_path is not None
    assert Path(result.session_path).parent.parent.name == project_key(str(cwd))
    assert "~0020" in project_key(str(cwd)) and "~00FC" in project_key(str(cwd))
    assert result.result("echo").output == "echo:x"


def test_a_failed_tool_result_carries_the_runtime_code(tmp_path: Path) -> None:
    result = run('/mock run broken({})', cwd=tmp_path, rows=_tools())
    assert result.exit_code == 1
    broken = result.result("broken")
    assert broken.is_error and broken.error_code is not None
    assert result.mock[-1].state == "failed" and result.mock[-1].failed_tool == "broken"


CHILD = {"description": "audit", "prompt": '/mock run echo({"text": "from child"})', "run_in_background": False}


def test_one_call_tree_mock_parent_tool_cassette_and_subagent_cassette_replay_offline(tmp_path: Path) -> None:
    tools = ToolCassette(file="tree.tools.ndjson", include=["weather_lookup"])
    children = SubagentCassette(file="tree.subagents.jsonl")
    # The parent's history (the /mock command included) is part of the child's identity, so the
    # recording and the replay run the same script file.
    (tmp_path / "tree.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": [
        {"tool": "weather_lookup", "args": {"city": "Paris"}}, {"tool": "subagent", "args": CHILD}]}))
    with weather_service(tmp_path) as service:
        record = run(script=tmp_path / "tree.json", cwd=tmp_path, rows=_tools(service.url), tool_cassette=tools,
                     subagent_cassette=children, record_mode="once")
    assert record.ok, record.explain()
    assert record.subagent_cassette is not None and record.subagent_cassette.published
    assert len(record.child_session_ids) == 1
    assert tool_bodies(tmp_path) == ["weather_lookup", "echo"]
    replay = run(script=tmp_path / "tree.json", cwd=tmp_path, rows=_tools(service.url), tool_cassette=tools,
                 subagent_cassette=children)
    assert replay.ok, replay.explain()
    assert sorted(tool_bodies(tmp_path)) == ["echo", "weather_lookup"]  # nothing ran again
    assert service.requests == 1
    assert replay.child_session_ids == []
    assert replay.subagent_cassette is not None and replay.subagent_cassette.consumed == 1
    assert replay.result("weather_lookup").output == "Paris: sunny, 21C"
    assert replay.result("subagent").output == record.result("subagent").output
    assert not replay.result("subagent").is_error


def test_a_replay_script_may_not_delegate_without_a_subagent_cassette(tmp_path: Path) -> None:
    result = run(script={"type": "dsh-mock-script", "version": 1, "steps": [{"tool": "subagent", "args": CHILD}]},
                 cwd=tmp_path, rows=_tools())
    assert result.exit_code == 3
    assert "UNSUPPORTED_NESTED_TOOL" in result.stderr
    assert tool_bodies(tmp_path) == []


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_run_json_validates_against_the_documented_schema(tmp_path: Path) -> None:
    patch = tmp_path / "tools.patch.yml"
    patch.write_text(f"- {json.dumps({'id': 'example-tools', 'name': 'dsh-example-tools', 'disabled': False})}\n")
    work = tmp_path / "work"
    work.mkdir()
    args = ["--tool-cassette", "e.ndjson", "--include", "echo", "--patch", str(patch), "--json"]
    missing = _cli(*args, "--", '/mock run echo({"text": "x"})', cwd=work)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        "dsh-sidecar: CASSETTE_MISSING: toolCassette.file: e.ndjson does not exist (record mode none); "
        "record it with `--record-mode once`\n"
    )
    recorded = _cli(*args, "--record-mode", "once", "--", '/mock run echo({"text": "x"})', cwd=work)
    assert recorded.returncode == 0, recorded.stderr
    document = json.loads(recorded.stdout)
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    result = msgspec.json.decode(recorded.stdout, type=RunResult)
    assert result.tool_cassette is not None and result.tool_cassette.published
    failed = _cli(*args, "--", '/mock run echo({"text": "y"})', cwd=work)
    assert failed.returncode == 1
    jsonschema.validate(json.loads(failed.stdout), json.loads(SCHEMA.read_text()))
    plain = _cli("--tool-cassette", "e.ndjson", "--include", "echo", "--patch", str(patch), "--",
                 '/mock run echo({"text": "x"})', cwd=work)
    assert (plain.returncode, plain.stdout) == (0, "mock run complete: 1 step, 1 tool call\n")


def test_the_committed_schema_is_the_one_the_code_produces() -> None:
    assert json.loads(SCHEMA.read_text()) == msgspec.json.schema(RunResult)


def _sessions(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "sessions", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "DSH_HOME": str(DSH_HOME)})


def test_sessions_list_and_show_find_the_last_run_without_ls(tmp_path: Path) -> None:
    first = run('/mock run echo({"text": "one"})', cwd=tmp_path, rows=_tools())
    second = run('/mock run broken({})', cwd=tmp_path, rows=_tools())
    listed = _sessions("list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    summaries = json.loads(listed.stdout)
    assert [s["session_id"] for s in summaries] == [second.session_id, first.session_id]
    assert (summaries[0]["tool_errors"], summaries[0]["mock_state"], summaries[1]["end_reasons"]) == (
        1, "failed", ["completed"],
    )
    shown = json.loads(_sessions("show", "--json", cwd=tmp_path).stdout)
    assert shown["summary"]["session_id"] == second.session_id
    assert [(c["tool"], c["arguments"]) for c in shown["tool_calls"]] == [("broken", {})]
    text = _sessions("show", str(first.session_id), cwd=tmp_path).stdout
    assert 'call     mock-1-1-0 echo (turn 1, step 1)\n  args   {"text":"one"}\n  result ok: echo:one\n' in text
    missing = _sessions("show", "session-nope", cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        "dsh-sidecar: SESSION_NOT_FOUND: session session-nope is in no folder's sessions of this DSH home; list a "
        "folder's with `dsh-sidecar sessions list --cwd DIR`, or name the home with --dsh-home\n"
    )


def test_a_new_row_is_inserted_where_an_id_targeted_row_only_warns(tmp_path: Path) -> None:
    # rc.8 only warns about an id-targeted patch for a row the profile lacks: the tool never registers.
    task = '/mock run echo({"text": "hi"})'
    targeted = run(task, rows=[Row("tools-2", "dsh-example-tools")], cwd=tmp_path, timeout=120)
    assert targeted.result("echo").error_code == "UNKNOWN_TOOL"

    inserted = run(task, rows=[Row("tools-2", "dsh-example-tools", insert=True)], cwd=tmp_path, timeout=120)
    assert inserted.ok, inserted.explain()
    assert inserted.result("echo").output == "echo:hi"

    row = json.dumps({"id": "tools-2", "name": "dsh-example-tools", "config": {}})
    cli = _cli("--insert-row", row, "--", task, cwd=tmp_path)
    assert (cli.returncode, cli.stdout) == (0, "mock run complete: 1 step, 1 tool call\n"), cli.stderr
    bad = _cli("--insert-row", '{"id": "x"}', "--", task, cwd=tmp_path)
    assert bad.returncode == 2
    assert "--insert-row" in bad.stderr and "value 1: Object missing required field `name`" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_run_refused_at_session_start_has_the_refusal_in_errors_and_a_fix_naming_the_argument(
    tmp_path: Path,
) -> None:
    refused = run("hello", cwd=tmp_path, tool_cassette=ToolCassette(file="t.ndjson", include=[]),
                  record_mode="once")
    assert refused.exit_code == 1 and refused.session_id is None
    assert refused.errors == [Diagnostic("INVALID_CONFIG", "toolCassette.include: must not be empty")]
    explained = refused.explain()
    assert explained.count("must not be empty") == 1
    assert "fix: correct the `include` argument" in explained and "cordis.patch.yml" not in explained


def test_a_failed_inline_script_names_the_line_that_gave_it_not_its_deleted_file(tmp_path: Path) -> None:
    script = {"type": "dsh-mock-script", "version": 1, "steps": [{"tool": "nope", "args": {}}]}
    line = sys._getframe().f_lineno + 1
    failed = run(script=script, cwd=tmp_path, rows=_tools())
    assert failed.exit_code == 1
    here = f"<script from {Path(__file__).resolve().relative_to(Path.cwd())}:{line}>"
    assert failed.task == f"/mock replay {here}"
    explained = failed.explain()
    assert explained.startswith(f"dsh run exited 1: /mock replay {here}")
    assert ".dsh-run-" not in explained and ".dsh-run-" not in failed.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".dsh-run-")] == []
