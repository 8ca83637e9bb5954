"""The spine, end to end: real headless DSH rc.8, the shim installed with `dsh plugin add`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from dshrun import ROOT, Dsh, wait_for


def test_mock_run_drives_one_real_tool_call_through_every_hook(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run echo({"text": "hi"})')

    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert run.bodies() == ["echo"]
    calls = run.events("tool/call")
    assert [(c["data"]["name"], json.loads(c["data"]["arguments"])) for c in calls] == [("echo", {"text": "hi"})]
    results = run.events("tool/result")
    assert len(results) == 1
    assert "echo:hi" in json.dumps(results[0]["data"])
    call_id = calls[0]["data"]["callId"]
    seen = [line["method"] for line in run.trace if line.get("handle") == "h1"]
    assert seen == ["tools/execute", "tools/post-execute", "tools/result"]
    streams = [line for line in run.trace if line["method"] == "llm/stream" and line["purpose"] is None]
    assert [s["step"] for s in streams] == [1, 2]
    assert call_id.startswith("mock-1-")


def test_mock_run_parallel_group_emits_both_calls_in_one_response(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run [echo({"text": "a"}) echo({"text": "b"})]')

    assert run.rc == 0, run.stderr
    messages = [m for m in run.events("assistant/message") if any(
        b.get("type") == "tool-call" for b in m["data"]["message"]["content"])]
    assert len(messages) == 1
    blocks = [b for b in messages[0]["data"]["message"]["content"] if b["type"] == "tool-call"]
    assert [json.loads(b["arguments"])["text"] for b in blocks] == ["a", "b"]
    assert sorted(run.bodies()) == ["echo", "echo"]
    assert [line["path"] for line in run.trace if line["method"] == "tools/execute"] == ["root/0", "root/1"]


def test_ordinary_turn_keeps_the_configured_provider(raw_dsh: Dsh) -> None:
    run = raw_dsh.run("hello, no mock here")

    assert run.rc == 1
    assert "MISSING_CREDENTIAL" in run.stderr
    headers = run.events("request/header")
    assert headers and headers[0]["data"]["header"]["config"]["provider"] == "deepseek-official"
    assert not [line for line in run.trace if line["method"] == "llm/stream"]


def test_invalid_mock_command_fails_the_run_without_a_tool_call(raw_dsh: Dsh) -> None:
    run = raw_dsh.run("/mock run echo({text: 'single quotes'})")

    assert run.rc == 1
    assert "INVALID_COMMAND" in run.stderr
    assert run.bodies() == []
    assert run.events("tool/call") == []


def test_config_error_in_the_row_fails_the_boot_naming_the_field(make_dsh) -> None:  # type: ignore[no-untyped-def]
    dsh = make_dsh(sidecar={"toolCassette": {"mode": "replay", "file": "x.ndjson", "include": []}})

    run = dsh.run('/mock run echo({"text": "hi"})')

    assert run.rc == 1
    assert "INVALID_CONFIG: toolCassette.include" in run.stderr
    assert run.bodies() == []


def test_unknown_config_key_fails_the_boot(make_dsh) -> None:  # type: ignore[no-untyped-def]
    run = make_dsh(sidecar={"tool_cassette": {}}).run('/mock run echo({"text": "hi"})')

    assert run.rc == 1
    assert "INVALID_CONFIG: tool_cassette" in run.stderr


def test_killing_the_sidecar_mid_run_fails_closed(raw_dsh: Dsh) -> None:
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


def test_a_second_run_in_the_same_profile_still_works(raw_dsh: Dsh) -> None:
    first = raw_dsh.run('/mock run echo({"text": "one"})')
    second = raw_dsh.run('/mock run echo({"text": "two"})')

    assert (first.rc, second.rc) == (0, 0)
    assert raw_dsh.cwd.joinpath("tool-bodies.log").read_text().split() == ["echo", "echo"]
    assert len(second.sessions()) == 2


def test_the_row_runs_this_checkout_so_python_edits_need_no_reinstall(raw_dsh: Dsh) -> None:
    plan = ROOT / "python_core" / "mock" / "plan.py"
    original = plan.read_text()
    assert '"session-title": "Mock session"' in original
    try:
        plan.write_text(original.replace('"session-title": "Mock session"', '"session-title": "Edited title"'))
        run = raw_dsh.run('/mock run echo({"text": "hi"})')
    finally:
        plan.write_text(original)

    assert run.rc == 0, run.stderr
    assert Path(run.trace[0]["bridge"]) == ROOT / "bridge"
    titles = [e["data"].get("title") for e in run.events("session/title")]
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
    assert lines["boot"].strip() == "ok"


def test_doctor_on_an_empty_prefix_exits_1_with_a_fix_hint(tmp_path: Path) -> None:
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "host", "doctor", "--prefix", str(tmp_path / "nothing")],
        capture_output=True, text=True, timeout=120,
    )

    assert proc.returncode == 1
    assert "dsh:     missing" in proc.stdout
    assert "boot:    not tried" in proc.stdout
    assert proc.stderr.startswith("fix: run `dsh-sidecar host install`")
