"""The spine, end to end: real headless DSH rc.8, the shim installed with `dsh plugin add`.

Runs go through the pytest plugin's ``dsh`` fixture (the run API). Two tests drive DSH through
``raw_dsh``/``make_dsh``: an unknown row key (the run API writes only the keys it models) and
killing the sidecar mid-run (a background DSH and a signal).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dshrun import ROOT, Dsh, tool_bodies, wait_for

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import ToolCassette, run
from dsh_sidecar.python_core.session_log import project_key

TRACE = "sidecar-trace.jsonl"


def _trace(cwd: Path) -> list[dict[str, Any]]:
    """The sidecar's structural trace lines in ``cwd``."""
    return [json.loads(line) for line in (cwd / TRACE).read_text().splitlines() if line]


def test_mock_run_drives_one_real_tool_call_through_every_hook(dsh: DshRunner) -> None:
    result = dsh.run('/mock run echo({"text": "hi"})', hook_log=TRACE)

    assert result.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert tool_bodies(dsh.cwd) == ["echo"]
    assert [(c.tool, c.arguments) for c in result.tool_calls] == [("echo", {"text": "hi"})]
    assert [(r.is_error, r.output) for r in result.tool_results] == [(False, "echo:hi")]
    call_id = result.tool_calls[0].call_id
    trace = _trace(dsh.cwd)
    # Handles are the host process's (a warm host's sessions share one counter): this call's.
    handle = next(line["handle"] for line in trace if line["method"] == "tools/execute")
    seen = [line["method"] for line in trace if line.get("handle") == handle]
    assert seen == ["tools/execute", "tools/post-execute", "tools/result"]
    streams = [line for line in trace if line["method"] == "llm/stream" and line["purpose"] is None]
    assert [s["step"] for s in streams] == [1, 2]
    assert call_id.startswith("mock-1-")


def test_mock_run_parallel_group_emits_both_calls_in_one_response(dsh: DshRunner) -> None:
    result = dsh.run('/mock run [echo({"text": "a"}) echo({"text": "b"})]')

    messages = [e for e in result.events if e["type"] == "assistant/message" and any(
        b.get("type") == "tool-call" for b in e["data"]["message"]["content"])]
    assert len(messages) == 1
    blocks = [b for b in messages[0]["data"]["message"]["content"] if b["type"] == "tool-call"]
    assert [json.loads(b["arguments"])["text"] for b in blocks] == ["a", "b"]
    assert sorted(tool_bodies(dsh.cwd)) == ["echo", "echo"]
    assert [c.path for c in result.tool_calls] == ["root/0", "root/1"]


def test_ordinary_turn_keeps_the_configured_provider(dsh: DshRunner) -> None:
    result = dsh.run("hello, no mock here", check=False, hook_log=TRACE)

    assert result.exit_code == 1
    assert "MISSING_CREDENTIAL" in result.stderr
    headers = [e for e in result.events if e["type"] == "request/header"]
    assert headers and headers[0]["data"]["header"]["config"]["provider"] == "deepseek-official"
    assert not [line for line in _trace(dsh.cwd) if line["method"] == "llm/stream"]


def test_invalid_mock_command_fails_the_run_without_a_tool_call(dsh: DshRunner) -> None:
    result = dsh.run("/mock run echo({text: 'single quotes'})", check=False)

    assert result.exit_code == 3
    assert "INVALID_COMMAND" in result.stderr
    assert tool_bodies(dsh.cwd) == []
    assert result.tool_calls == []


def test_config_error_in_the_row_fails_the_boot_naming_the_field(dsh: DshRunner) -> None:
    # Record mode `none` needs the file to exist; the row is refused before it is read.
    (dsh.cwd / "x.ndjson").write_bytes(b"")
    result = run('/mock run echo({"text": "hi"})', cwd=dsh.cwd, host=dsh.host, patches=dsh.patches,
                 tool_cassette=ToolCassette(file="x.ndjson", include=[]), record_mode="none")
    dsh.runs.append(result)

    assert result.exit_code == 1
    assert "INVALID_CONFIG: toolCassette.include" in result.stderr
    assert tool_bodies(dsh.cwd) == []
    assert (dsh.cwd / "x.ndjson").read_bytes() == b""


def test_unknown_config_key_fails_the_boot(make_dsh: Callable[..., Dsh]) -> None:
    # The run API builds the row from typed fields and cannot write an unknown key.
    run = make_dsh(sidecar={"tool_cassette": {}}).run('/mock run echo({"text": "hi"})')

    assert run.rc == 1
    assert "INVALID_CONFIG: tool_cassette" in run.stderr


def test_killing_the_sidecar_mid_run_fails_closed(raw_dsh: Dsh) -> None:
    # A background DSH and a signal to its sidecar: the run API runs a turn to completion.
    script = raw_dsh.cwd / "two-steps.json"
    script.write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": [
        {"tool": "sleepy", "args": {"label": "first", "ms": 2000}},
        {"tool": "echo", "args": {"text": "must never run"}},
    ]}))
    proc = raw_dsh.start("/mock replay two-steps.json")
    trace = raw_dsh.cwd / "sidecar-trace.jsonl"
    wait_for(lambda: trace.exists() and '"tools/execute"' in trace.read_text())
    pid = json.loads(trace.read_text().splitlines()[0])["pid"]
    os.kill(pid, signal.SIGKILL)

    run = raw_dsh.finished(proc)

    assert run.rc != 0
    assert "SIDECAR_UNAVAILABLE" in run.stderr
    assert run.bodies() == ["sleepy"]


def test_a_second_run_in_the_same_profile_still_works(dsh: DshRunner) -> None:
    first = dsh.run('/mock run echo({"text": "one"})')
    second = dsh.run('/mock run echo({"text": "two"})')

    assert (first.exit_code, second.exit_code) == (0, 0)
    assert (first.result("echo").output, second.result("echo").output) == ("echo:one", "echo:two")
    assert tool_bodies(dsh.cwd) == ["echo", "echo"]
    sessions = sorted(os.listdir(dsh.host.dsh_home / "sessions" / project_key(str(dsh.cwd))))
    assert len(sessions) == 2 and first.session_id != second.session_id


# A process of its own: a warm host's sidecar imported the checkout when the host booted.
@pytest.mark.dsh(cold=True)
def test_the_row_runs_this_checkout_so_python_edits_need_no_reinstall(dsh: DshRunner) -> None:
    plan = ROOT / "python_core" / "mock" / "plan.py"
    original = plan.read_text()
    assert '"session-title": "Mock session"' in original
    try:
        plan.write_text(original.replace('"session-title": "Mock session"', '"session-title": "Edited title"'))
        result = dsh.run('/mock run echo({"text": "hi"})', hook_log=TRACE)
    finally:
        plan.write_text(original)

    assert Path(_trace(dsh.cwd)[0]["bridge"]).resolve() == ROOT / "bridge"
    titles = [e["data"].get("title") for e in result.events if e["type"] == "session/title"]
    assert "Edited title" in titles


def test_host_install_on_a_set_up_prefix_changes_nothing() -> None:
    state = ROOT / ".host" / "host.json"
    before = state.stat().st_mtime_ns

    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "host", "install", "--prefix", str(ROOT / ".host")],
        capture_output=True, text=True, timeout=120,
    )

    assert proc.returncode == 0, proc.stderr
    assert state.stat().st_mtime_ns == before
    assert proc.stderr == ""


def test_doctor_reports_versions_and_a_working_headless_boot() -> None:
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "host", "doctor", "--prefix", str(ROOT / ".host")],
        capture_output=True, text=True, timeout=180,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = dict(line.split(":", 1) for line in proc.stdout.splitlines())
    assert lines["dsh"].strip() == "0.1.0-rc.8"
    assert lines["plugin"].strip() == "installed"
    assert lines["boot"].strip().startswith("ok:")


def test_doctor_on_an_empty_prefix_exits_1_with_a_fix_hint(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "host", "doctor", "--prefix", str(tmp_path / "nothing")],
        capture_output=True, text=True, timeout=120,
    )

    assert proc.returncode == 1
    assert "dsh:     missing" in proc.stdout
    assert "boot:    not tried" in proc.stdout
    assert proc.stderr.startswith("fix: run `dsh-sidecar host install`")
