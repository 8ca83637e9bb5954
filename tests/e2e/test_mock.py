"""The mock model through the real AgentLoop: real headless DSH rc.8, real tools, real results.

Each test drives one or two headless runs and reads what DSH itself wrote: the session log
(assistant messages, tool calls and results, ``step/start`` and chunk times, the sidecar's
``mock/status`` records), the sidecar trace, ``tool-bodies.log`` (one line per real tool body)
and the exit code. Waits are measured from the session log's own ``time`` fields: the latency
of step k is the time of its first ``assistant/chunk`` minus the time of its ``step/start``,
which is exactly where the mock sleeps. Lower bounds are strict, upper bounds generous.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dshrun import DSH_HOME, ROOT, Dsh, Run, read_session, wait_for

MakeDsh = Callable[..., Dsh]
SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
# Host overhead between `step/start` and the first chunk is tens of ms; this absorbs a loaded CI.
SLACK_MS = 1500

Call = tuple[str, dict[str, Any]]


def _write_script(dsh: Dsh, name: str, *steps: dict[str, Any]) -> Path:
    path = dsh.cwd / name
    path.write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": list(steps)}, indent=2))
    return path


def _tool(name: str, **args: Any) -> dict[str, Any]:
    return {"tool": name, "args": args}


def _own(run: Run) -> list[dict[str, Any]]:
    """The newest root session log of ``run``'s cwd (the run's own session)."""
    return run.sessions()[-1]


def _tool_messages(events: list[dict[str, Any]]) -> list[list[Call]]:
    """Each assistant message that issued tool calls, as its ``(name, arguments)`` blocks."""
    out = []
    for event in events:
        if event["type"] != "assistant/message":
            continue
        blocks = [b for b in event["data"]["message"]["content"] if b["type"] == "tool-call"]
        if blocks:
            out.append([(b["name"], json.loads(b["arguments"])) for b in blocks])
    return out


def _results(events: list[dict[str, Any]]) -> list[tuple[bool, str]]:
    """``(isError, text)`` of every tool result, in log order."""
    out = []
    for event in events:
        if event["type"] != "tool/result":
            continue
        for block in event["data"]["message"]["content"]:
            text = "".join(part.get("text", "") for part in block["content"])
            out.append((block.get("isError", False), text))
    return out


def _latency_ms(events: list[dict[str, Any]], step: int) -> int:
    """First chunk time minus ``step/start`` time of turn 1's ``step`` (where the mock waits)."""
    start = next(e["time"] for e in events if e["type"] == "step/start" and e["data"] == {"turn": 1, "step": step})
    chunk = next(
        e["time"] for e in events
        if e["type"] == "assistant/chunk" and e["data"]["turn"] == 1 and e["data"]["step"] == step
    )
    return chunk - start


def _last_status(run: Run) -> dict[str, Any]:
    return [e["data"] for e in _own(run) if e["type"] == "mock/status"][-1]


def _session_files(cwd: Path) -> list[Path]:
    """Every session log DSH wrote for ``cwd`` (root and child sessions), oldest first."""
    found = []
    for path in DSH_HOME.glob("sessions/*/*/session.jsonl*"):
        events = read_session(path)
        if events and events[0].get("cwd") == str(cwd):
            found.append((events[0].get("createdAt", 0), path))
    return [path for _, path in sorted(found)]


def _snapshot(cwd: Path) -> dict[str, bytes]:
    """Every file in ``cwd`` with its bytes (what a replay must never change or add to)."""
    return {p.name: p.read_bytes() for p in cwd.iterdir() if p.is_file()}


def _changed(before: dict[str, bytes], cwd: Path) -> set[str]:
    """Files created or modified since ``before``, apart from the run's own logs."""
    after = _snapshot(cwd)
    ignored = {"tool-bodies.log", "agent-status.log", "sidecar-trace.jsonl", ".dsh-test.patch.yml"}
    return {name for name in after.keys() | before.keys() if before.get(name) != after.get(name)} - ignored


def test_single_call_is_one_assistant_message_and_one_real_result(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run echo({"text": "single", "tags": ["x", "y"]})')

    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    events = _own(run)
    assert _tool_messages(events) == [[("echo", {"text": "single", "tags": ["x", "y"]})]]
    assert _results(events) == [(False, "echo:single")]
    assert run.bodies() == ["echo"]
    headers = [e["data"]["header"]["config"]["provider"] for e in events if e["type"] == "request/header"]
    assert headers == ["mock"]
    status = _last_status(run)
    assert (status["state"], status["mode"], status["step_count"], status["steps_completed"]) == (
        "succeeded", "run", 1, 1)


def test_parallel_group_issues_every_member_in_one_message_in_array_order(raw_dsh: Dsh) -> None:
    run = raw_dsh.run(
        '/mock run [echo({"text": "z"}) sleepy({"label": "m", "ms": 50}) echo({"text": "a"})]'
    )

    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "mock run complete: 1 step, 3 tool calls"
    events = _own(run)
    assert _tool_messages(events) == [[
        ("echo", {"text": "z"}), ("sleepy", {"label": "m", "ms": 50}), ("echo", {"text": "a"}),
    ]]
    assert sorted(_results(events)) == [(False, "echo:a"), (False, "echo:z"), (False, "slept:m")]
    assert sorted(run.bodies()) == ["echo", "echo", "sleepy"]
    assert _last_status(run)["step_count"] == 1


def test_explicit_wait_and_default_gap_show_in_the_logged_latencies(raw_dsh: Dsh) -> None:
    script = _write_script(
        raw_dsh, "timed.json",
        _tool("echo", text="first"), {"wait": 800}, _tool("echo", text="second"), _tool("echo", text="third"),
    )
    before = _snapshot(raw_dsh.cwd)

    run = raw_dsh.run("/mock replay timed.json")

    assert run.rc == 0, run.stderr
    assert run.stdout.strip() == "mock replay complete: 3 steps, 3 tool calls"
    events = _own(run)
    assert [texts for [(_, texts)] in _tool_messages(events)] == [
        {"text": "first"}, {"text": "second"}, {"text": "third"}]
    explicit, default = _latency_ms(events, 2), _latency_ms(events, 3)
    assert 800 <= explicit < 800 + SLACK_MS
    assert 100 <= default < 800
    assert _changed(before, raw_dsh.cwd) == set()
    assert script.read_bytes() == before["timed.json"]


def test_overwrite_wait_time_replaces_explicit_waits_but_not_the_default_gap(raw_dsh: Dsh) -> None:
    _write_script(
        raw_dsh, "slow.json",
        _tool("echo", text="first"), {"wait": 5000}, _tool("echo", text="second"), _tool("echo", text="third"),
    )

    run = raw_dsh.run("/mock replay slow.json --overwrite-wait-time-ms 0")

    assert run.rc == 0, run.stderr
    events = _own(run)
    assert len(_tool_messages(events)) == 3
    assert _latency_ms(events, 2) < 1000
    assert _latency_ms(events, 3) >= 100
    assert run.elapsed < 5


@pytest.mark.parametrize(
    ("code", "bad_step"),
    [
        ("UNKNOWN_TOOL", _tool("no_such_tool", x=1)),
        ("INVALID_ARGS", _tool("echo", nottext=1)),
    ],
    ids=["unknown-tool", "invalid-args"],
)
def test_a_real_runtime_error_stops_every_later_step(raw_dsh: Dsh, code: str, bad_step: dict[str, Any]) -> None:
    script = _write_script(
        raw_dsh, "failing.json",
        _tool("echo", text="before"), bad_step, _tool("sleepy", label="never", ms=1),
    )
    before = _snapshot(raw_dsh.cwd)

    run = raw_dsh.run("/mock replay failing.json")

    assert run.rc == 1
    assert code in run.stderr
    assert run.bodies() == ["echo"]
    events = _own(run)
    assert [name for [(name, _)] in _tool_messages(events)] == ["echo", bad_step["tool"]]
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert results[-1]["message"]["content"][0]["isError"] is True
    assert code in json.dumps(results[-1])
    status = _last_status(run)
    assert (status["state"], status["error_code"], status["failed_tool"], status["failed_step"]) == (
        "failed", code, bad_step["tool"], 2)
    assert (status["steps_started"], status["steps_stopped"]) == (2, 1)
    assert _changed(before, raw_dsh.cwd) == set()
    assert script.read_bytes() == before["failing.json"]


def test_interrupting_a_replay_during_a_wait_runs_no_later_step(raw_dsh: Dsh) -> None:
    script = _write_script(
        raw_dsh, "long-wait.json",
        _tool("echo", text="first"), {"wait": 30000}, _tool("echo", text="never"),
    )
    before = _snapshot(raw_dsh.cwd)
    trace = raw_dsh.cwd / "sidecar-trace.jsonl"

    def waiting() -> bool:
        # The mock logs `llm/stream` for step 2 just before it sleeps the wait.
        lines = [json.loads(line) for line in trace.read_text().splitlines()] if trace.exists() else []
        return any(
            line["method"] == "llm/stream" and line["step"] == 2 and line["purpose"] is None for line in lines
        )

    proc = raw_dsh.start("/mock replay long-wait.json")
    wait_for(lambda: (raw_dsh.cwd / "tool-bodies.log").exists() and waiting())
    proc.send_signal(signal.SIGINT)
    run = raw_dsh.finished(proc, timeout=20)

    assert run.rc != 0
    assert run.bodies() == ["echo"]
    events = _own(run)
    assert [name for [(name, _)] in _tool_messages(events)] == ["echo"]
    assert not [e for e in events if e["type"] == "step/start" and e["data"]["step"] == 3]
    assert _changed(before, raw_dsh.cwd) == set()
    assert script.read_bytes() == before["long-wait.json"]


def test_a_user_cancel_during_a_wait_ends_the_turn_with_a_cancelled_status(raw_dsh: Dsh) -> None:
    _write_script(
        raw_dsh, "cancelled.json", _tool("cancel_later", ms=300), {"wait": 30000}, _tool("echo", text="never"),
    )

    run = raw_dsh.run("/mock replay cancelled.json")

    assert run.rc == 1
    assert run.bodies() == ["cancel_later"]
    events = _own(run)
    assert [e["data"]["reason"]["kind"] for e in events if e["type"] == "turn/end"] == ["aborted"]
    statuses = [e["data"] for e in events if e["type"] == "mock/status"]
    assert (statuses[-1]["state"], statuses[-1]["steps_completed"]) == ("cancelled", 1)
    assert run.elapsed < 25


def test_a_converted_session_log_replays_the_same_tool_calls(make_dsh: MakeDsh) -> None:
    recorder = make_dsh()
    _write_script(
        recorder, "original.json",
        _tool("echo", text="one"),
        {"parallel": [_tool("echo", text="two"), _tool("sleepy", label="three", ms=5)]},
        _tool("echo", text="four", tags=["t"]),
    )
    recorded = recorder.run("/mock replay original.json")
    assert recorded.rc == 0, recorded.stderr
    (log,) = _session_files(recorder.cwd)
    converted = subprocess.run(
        [SIDECAR_CLI, "mock", "convert", str(log)], capture_output=True, text=True, timeout=30, check=False
    )
    assert converted.returncode == 0, converted.stderr
    replayer = make_dsh()
    (replayer.cwd / "converted.json").write_text(converted.stdout)
    log_bytes = log.read_bytes()

    replayed = replayer.run("/mock replay converted.json")
    direct = replayer.run(f"/mock replay {json.dumps(str(log))}")

    expected = [
        [("echo", {"text": "one"})],
        [("echo", {"text": "two"}), ("sleepy", {"label": "three", "ms": 5})],
        [("echo", {"tags": ["t"], "text": "four"})],
    ]
    assert _tool_messages(_own(recorded)) == expected
    assert (replayed.rc, direct.rc) == (0, 0), replayed.stderr + direct.stderr
    sessions = replayed.sessions()
    assert [_tool_messages(events) for events in sessions] == [expected, expected]
    assert replayed.stdout.strip() == "mock replay complete: 3 steps, 4 tool calls"
    assert [e["data"]["source_format"] for e in sessions[1] if e["type"] == "mock/status"][-1] == "dsh-jsonl-zstd"
    assert log.read_bytes() == log_bytes
    assert _session_files(recorder.cwd) == [log]


def test_the_mock_slash_command_queues_a_mock_turn(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run run_command({"line": "/mock run echo({\\"text\\": \\"via command\\"})"})')

    assert run.rc == 0, run.stderr
    assert run.bodies() == ["run_command", "echo"]
    events = _own(run)
    assert _tool_messages(events) == [
        [("run_command", {"line": '/mock run echo({"text": "via command"})'})],
        [("echo", {"text": "via command"})],
    ]
    assert _results(events) == [(False, "success:mock turn queued (run, 1 step)"), (False, "echo:via command")]
    finals = [(s["turn_id"], s["state"]) for s in (e["data"] for e in events if e["type"] == "mock/status")
              if s["state"] not in ("ready", "awaiting-results")]
    assert finals == [("1", "succeeded"), ("2", "succeeded")]


def test_an_ordinary_turn_after_a_mock_turn_uses_the_real_route_again(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run queue_followup({"text": "a plain question, no mock"})')

    assert run.rc == 1
    assert "MISSING_CREDENTIAL" in run.stderr
    assert run.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert run.bodies() == ["queue_followup"]
    events = _own(run)
    turns = [e["data"]["turn"] for e in events if e["type"] == "turn/start"]
    assert turns == [1, 2]
    headers = [
        (e["data"]["reason"], e["data"]["header"]["config"]["provider"])
        for e in events if e["type"] == "request/header"
    ]
    assert headers == [("initial", "mock"), ("change", "deepseek-official")]
    streamed = [line["turn"] for line in run.trace if line["method"] == "llm/stream" and line["purpose"] is None]
    assert set(streamed) == {1}


def test_two_sessions_replay_different_scripts_concurrently_without_crosstalk(make_dsh: MakeDsh) -> None:
    first, second = make_dsh(), make_dsh()
    _write_script(
        first, "s.json", _tool("sleepy", label="a1", ms=300), {"wait": 200}, _tool("echo", text="a2"),
    )
    _write_script(
        second, "s.json",
        _tool("echo", text="b1"), {"parallel": [_tool("echo", text="b2"), _tool("echo", text="b3")]},
        _tool("sleepy", label="b4", ms=50),
    )

    procs = [first.start("/mock replay s.json"), second.start("/mock replay s.json")]
    run_a, run_b = first.finished(procs[0]), second.finished(procs[1])

    assert (run_a.rc, run_b.rc) == (0, 0), run_a.stderr + run_b.stderr
    assert run_a.stdout.strip() == "mock replay complete: 2 steps, 2 tool calls"
    assert run_b.stdout.strip() == "mock replay complete: 3 steps, 4 tool calls"
    assert _tool_messages(_own(run_a)) == [[("sleepy", {"label": "a1", "ms": 300})], [("echo", {"text": "a2"})]]
    assert _tool_messages(_own(run_b)) == [
        [("echo", {"text": "b1"})], [("echo", {"text": "b2"}), ("echo", {"text": "b3"})],
        [("sleepy", {"label": "b4", "ms": 50})],
    ]
    assert _results(_own(run_a)) == [(False, "slept:a1"), (False, "echo:a2")]
    assert (run_a.bodies(), sorted(run_b.bodies())) == (["sleepy", "echo"], ["echo", "echo", "echo", "sleepy"])
    for run in (run_a, run_b):
        own_id = _own(run)[0]["id"]
        assert {e["data"]["session_id"] for e in _own(run) if e["type"] == "mock/status"} == {own_id}
        assert len(run.sessions()) == 1


def test_a_replay_path_with_a_parent_segment_is_refused_naming_the_rule_not_the_path(raw_dsh: Dsh) -> None:
    script = _write_script(raw_dsh, "s.json", _tool("echo", text="never"))
    (raw_dsh.cwd / "private-dir").mkdir()
    before = _snapshot(raw_dsh.cwd)

    run = raw_dsh.run("/mock replay private-dir/../s.json")

    assert run.rc == 1
    assert "PATH_REFUSED" in run.stderr
    assert "parent-segment" in run.stderr
    assert "private-dir" not in run.stderr + run.stdout
    assert run.bodies() == []
    assert _tool_messages(_own(run)) == []
    assert _changed(before, raw_dsh.cwd) == set()
    assert script.read_bytes() == before["s.json"]


def test_the_agent_stays_running_across_steps_and_waits(raw_dsh: Dsh) -> None:
    steps = (_tool("echo", text="a"), {"wait": 300}, _tool("echo", text="b"), _tool("echo", text="c"))
    _write_script(raw_dsh, "paced.json", *steps)

    run = raw_dsh.run("/mock replay paced.json")

    assert run.rc == 0, run.stderr
    assert (raw_dsh.cwd / "agent-status.log").read_text().split() == ["running", "idle"]
