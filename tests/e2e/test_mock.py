"""The mock model through the real AgentLoop: real headless DSH rc.8, real tools, real results.

Each test drives one or two headless runs through the pytest plugin's ``dsh`` fixture and reads
the typed result (tool calls and results, the sidecar's ``mock/status`` records, the exit code)
and what DSH itself wrote: the run's own session log events (assistant messages, ``step/start``
and chunk times), the sidecar trace and ``tool-bodies.log`` (one line per real tool body).
Waits are measured from the session log's own ``time`` fields: the latency of step k is the
time of its first ``assistant/chunk`` minus the time of its ``step/start``, which is exactly
where the mock sleeps. Lower bounds are strict, upper bounds generous. Interrupting a replay
sends SIGINT to a running DSH, which the run API does not model: that test uses ``raw_dsh``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dshrun import ROOT, Dsh, Run, tool_bodies, wait_for

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import RunResult
from dsh_sidecar.python_core.session_log import project_key

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
TRACE = "sidecar-trace.jsonl"
# Host overhead between `step/start` and the first chunk is tens of ms; this absorbs a loaded CI.
SLACK_MS = 1500

Call = tuple[str, dict[str, Any]]


def _write_script(cwd: Path, name: str, *steps: dict[str, Any]) -> Path:
    path = cwd / name
    path.write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": list(steps)}, indent=2))
    return path


def _tool(name: str, **args: Any) -> dict[str, Any]:
    return {"tool": name, "args": args}


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


def _calls(result: RunResult) -> list[Call]:
    """``(tool, arguments)`` of the run's tool calls, in log order."""
    return [(c.tool, c.arguments) for c in result.tool_calls]


def _results(result: RunResult) -> list[tuple[bool, str]]:
    """``(isError, text)`` of every tool result, in log order."""
    return [(r.is_error, r.output) for r in result.tool_results]


def _latency_ms(events: list[dict[str, Any]], step: int) -> int:
    """First chunk time minus ``step/start`` time of turn 1's ``step`` (where the mock waits)."""
    start = next(e["time"] for e in events if e["type"] == "step/start" and e["data"] == {"turn": 1, "step": step})
    chunk = next(
        e["time"] for e in events
        if e["type"] == "assistant/chunk" and e["data"]["turn"] == 1 and e["data"]["step"] == step
    )
    return chunk - start


def _session_dirs(dsh: DshRunner, cwd: Path) -> list[str]:
    """Every session folder DSH made for ``cwd`` (root and child sessions): one path, one listing."""
    folder = dsh.host.dsh_home / "sessions" / project_key(str(cwd))
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def _snapshot(cwd: Path) -> dict[str, bytes]:
    """Every file in ``cwd`` with its bytes (what a replay must never change or add to)."""
    return {p.name: p.read_bytes() for p in cwd.iterdir() if p.is_file()}


def _changed(before: dict[str, bytes], cwd: Path) -> set[str]:
    """Files created or modified since ``before``, apart from the run's own logs."""
    after = _snapshot(cwd)
    ignored = {"tool-bodies.log", "agent-status.log", TRACE, ".dsh-test.patch.yml"}
    return {name for name in after.keys() | before.keys() if before.get(name) != after.get(name)} - ignored


def test_single_call_is_one_assistant_message_and_one_real_result(dsh: DshRunner) -> None:
    result = dsh.run('/mock run echo({"text": "single", "tags": ["x", "y"]})')

    assert result.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert _tool_messages(result.events) == [[("echo", {"text": "single", "tags": ["x", "y"]})]]
    assert _calls(result) == [("echo", {"text": "single", "tags": ["x", "y"]})]
    assert _results(result) == [(False, "echo:single")]
    assert tool_bodies(dsh.cwd) == ["echo"]
    headers = [e["data"]["header"]["config"]["provider"] for e in result.events if e["type"] == "request/header"]
    assert headers == ["mock"]
    status = result.mock[-1]
    assert (status.state, status.mode, status.step_count, status.steps_completed) == ("succeeded", "run", 1, 1)


def test_parallel_group_issues_every_member_in_one_message_in_array_order(dsh: DshRunner) -> None:
    result = dsh.run('/mock run [echo({"text": "z"}) sleepy({"label": "m", "ms": 50}) echo({"text": "a"})]')

    assert result.stdout.strip() == "mock run complete: 1 step, 3 tool calls"
    assert _tool_messages(result.events) == [[
        ("echo", {"text": "z"}), ("sleepy", {"label": "m", "ms": 50}), ("echo", {"text": "a"}),
    ]]
    assert [c.path for c in result.tool_calls] == ["root/0", "root/1", "root/2"]
    assert sorted(_results(result)) == [(False, "echo:a"), (False, "echo:z"), (False, "slept:m")]
    assert sorted(tool_bodies(dsh.cwd)) == ["echo", "echo", "sleepy"]
    assert result.mock[-1].step_count == 1


def test_explicit_wait_and_default_gap_show_in_the_logged_latencies(dsh: DshRunner) -> None:
    script = _write_script(
        dsh.cwd, "timed.json",
        _tool("echo", text="first"), {"wait": 800}, _tool("echo", text="second"), _tool("echo", text="third"),
    )
    before = _snapshot(dsh.cwd)

    result = dsh.run(script="timed.json")

    assert result.stdout.strip() == "mock replay complete: 3 steps, 3 tool calls"
    assert [texts for [(_, texts)] in _tool_messages(result.events)] == [
        {"text": "first"}, {"text": "second"}, {"text": "third"}]
    explicit, default = _latency_ms(result.events, 2), _latency_ms(result.events, 3)
    assert 800 <= explicit < 800 + SLACK_MS
    assert 100 <= default < 800
    assert _changed(before, dsh.cwd) == set()
    assert script.read_bytes() == before["timed.json"]


def test_overwrite_wait_time_replaces_explicit_waits_but_not_the_default_gap(dsh: DshRunner) -> None:
    _write_script(
        dsh.cwd, "slow.json",
        _tool("echo", text="first"), {"wait": 5000}, _tool("echo", text="second"), _tool("echo", text="third"),
    )

    result = dsh.run(script="slow.json", overwrite_wait_time_ms=0)

    assert result.task == '/mock replay "slow.json" --overwrite-wait-time-ms 0'
    assert len(_tool_messages(result.events)) == 3
    assert _latency_ms(result.events, 2) < 1000
    assert _latency_ms(result.events, 3) >= 100


@pytest.mark.parametrize(
    ("code", "bad_step"),
    [
        ("UNKNOWN_TOOL", _tool("no_such_tool", x=1)),
        ("INVALID_ARGS", _tool("echo", nottext=1)),
    ],
    ids=["unknown-tool", "invalid-args"],
)
def test_a_real_runtime_error_stops_every_later_step(dsh: DshRunner, code: str, bad_step: dict[str, Any]) -> None:
    script = _write_script(
        dsh.cwd, "failing.json",
        _tool("echo", text="before"), bad_step, _tool("sleepy", label="never", ms=1),
    )
    before = _snapshot(dsh.cwd)

    result = dsh.run(script="failing.json", check=False)

    assert result.exit_code == 1
    assert code in result.stderr
    assert tool_bodies(dsh.cwd) == ["echo"]
    assert [name for [(name, _)] in _tool_messages(result.events)] == ["echo", bad_step["tool"]]
    assert [c.tool for c in result.tool_calls] == ["echo", bad_step["tool"]]
    failed = result.tool_results[-1]
    assert failed.is_error is True
    assert failed.error_code == code
    status = result.mock[-1]
    assert (status.state, status.error_code, status.failed_tool, status.failed_step) == (
        "failed", code, bad_step["tool"], 2)
    assert (status.steps_started, status.steps_stopped) == (2, 1)
    assert _changed(before, dsh.cwd) == set()
    assert script.read_bytes() == before["failing.json"]


def _own(run: Run) -> list[dict[str, Any]]:
    """The newest root session log of a raw run's cwd (the run's own session)."""
    return run.sessions()[-1]


def test_interrupting_a_replay_during_a_wait_runs_no_later_step(raw_dsh: Dsh) -> None:
    # SIGINT to a running DSH: the run API runs a turn to completion, so this drives DSH directly.
    script = _write_script(
        raw_dsh.cwd, "long-wait.json",
        _tool("echo", text="first"), {"wait": 30000}, _tool("echo", text="never"),
    )
    before = _snapshot(raw_dsh.cwd)
    trace = raw_dsh.cwd / TRACE

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


def test_a_user_cancel_during_a_wait_ends_the_turn_with_a_cancelled_status(dsh: DshRunner) -> None:
    _write_script(
        dsh.cwd, "cancelled.json", _tool("cancel_later", ms=300), {"wait": 30000}, _tool("echo", text="never"),
    )

    result = dsh.run(script="cancelled.json", check=False)

    assert result.exit_code == 1
    assert tool_bodies(dsh.cwd) == ["cancel_later"]
    assert [e["data"]["reason"]["kind"] for e in result.events if e["type"] == "turn/end"] == ["aborted"]
    assert (result.mock[-1].state, result.mock[-1].steps_completed) == ("cancelled", 1)
    assert result.duration_ms < 25000


def test_a_converted_session_log_replays_the_same_tool_calls(dsh: DshRunner, tmp_path: Path) -> None:
    _write_script(
        dsh.cwd, "original.json",
        _tool("echo", text="one"),
        {"parallel": [_tool("echo", text="two"), _tool("sleepy", label="three", ms=5)]},
        _tool("echo", text="four", tags=["t"]),
    )
    recorded = dsh.run(script="original.json")
    assert recorded.session_path is not None
    log = Path(recorded.session_path)
    assert _session_dirs(dsh, dsh.cwd) == [log.parent.name]
    converted = subprocess.run(
        [SIDECAR_CLI, "mock", "convert", str(log)], capture_output=True, text=True, timeout=30, check=False
    )
    assert converted.returncode == 0, converted.stderr
    replayer = tmp_path / "replayer"
    replayer.mkdir()
    (replayer / "converted.json").write_text(converted.stdout)
    log_bytes = log.read_bytes()

    replayed = dsh.run(script="converted.json", cwd=replayer)
    direct = dsh.run(script=log, cwd=replayer)

    expected = [
        [("echo", {"text": "one"})],
        [("echo", {"text": "two"}), ("sleepy", {"label": "three", "ms": 5})],
        [("echo", {"tags": ["t"], "text": "four"})],
    ]
    assert _tool_messages(recorded.events) == expected
    assert [_tool_messages(r.events) for r in (replayed, direct)] == [expected, expected]
    assert _session_dirs(dsh, replayer) == sorted(Path(r.session_path or "").parent.name for r in (replayed, direct))
    assert replayed.stdout.strip() == "mock replay complete: 3 steps, 4 tool calls"
    assert direct.mock[-1].source_format == "dsh-jsonl-zstd"
    # Fresh live call ids: none of the source log's ids comes back (all three runs are turn 1).
    source_ids = {c.call_id for c in recorded.tool_calls}
    assert len(source_ids) == 4
    assert not source_ids & {c.call_id for r in (replayed, direct) for c in r.tool_calls}
    assert log.read_bytes() == log_bytes
    assert _session_dirs(dsh, dsh.cwd) == [log.parent.name]


def test_the_mock_slash_command_queues_a_mock_turn(dsh: DshRunner) -> None:
    result = dsh.run('/mock run run_command({"line": "/mock run echo({\\"text\\": \\"via command\\"})"})')

    assert tool_bodies(dsh.cwd) == ["run_command", "echo"]
    assert _tool_messages(result.events) == [
        [("run_command", {"line": '/mock run echo({"text": "via command"})'})],
        [("echo", {"text": "via command"})],
    ]
    assert _results(result) == [(False, "success:mock turn queued (run, 1 step)"), (False, "echo:via command")]
    finals = [(s.turn_id, s.state) for s in result.mock if s.state not in ("ready", "awaiting-results")]
    assert finals == [("1", "succeeded"), ("2", "succeeded")]


def test_an_ordinary_turn_after_a_mock_turn_uses_the_real_route_again(dsh: DshRunner) -> None:
    result = dsh.run('/mock run queue_followup({"text": "a plain question, no mock"})', check=False, hook_log=TRACE)

    assert result.exit_code == 1
    assert "MISSING_CREDENTIAL" in result.stderr
    assert result.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert tool_bodies(dsh.cwd) == ["queue_followup"]
    turns = [e["data"]["turn"] for e in result.events if e["type"] == "turn/start"]
    assert turns == [1, 2]
    headers = [
        (e["data"]["reason"], e["data"]["header"]["config"]["provider"])
        for e in result.events if e["type"] == "request/header"
    ]
    assert headers == [("initial", "mock"), ("change", "deepseek-official")]
    trace = [json.loads(line) for line in (dsh.cwd / TRACE).read_text().splitlines()]
    streamed = [line["turn"] for line in trace if line["method"] == "llm/stream" and line["purpose"] is None]
    assert set(streamed) == {1}


def test_two_sessions_replay_different_scripts_concurrently_without_crosstalk(
    dsh: DshRunner, tmp_path: Path,
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    _write_script(first, "s.json", _tool("sleepy", label="a1", ms=300), {"wait": 200}, _tool("echo", text="a2"))
    _write_script(
        second, "s.json",
        _tool("echo", text="b1"), {"parallel": [_tool("echo", text="b2"), _tool("echo", text="b3")]},
        _tool("sleepy", label="b4", ms=50),
    )

    with ThreadPoolExecutor(2) as pool:
        run_a, run_b = pool.map(lambda cwd: dsh.run(script="s.json", cwd=cwd), (first, second))

    assert run_a.stdout.strip() == "mock replay complete: 2 steps, 2 tool calls"
    assert run_b.stdout.strip() == "mock replay complete: 3 steps, 4 tool calls"
    assert _tool_messages(run_a.events) == [[("sleepy", {"label": "a1", "ms": 300})], [("echo", {"text": "a2"})]]
    assert _tool_messages(run_b.events) == [
        [("echo", {"text": "b1"})], [("echo", {"text": "b2"}), ("echo", {"text": "b3"})],
        [("sleepy", {"label": "b4", "ms": 50})],
    ]
    assert _results(run_a) == [(False, "slept:a1"), (False, "echo:a2")]
    assert (tool_bodies(first), sorted(tool_bodies(second))) == (["sleepy", "echo"], ["echo", "echo", "echo", "sleepy"])
    for result, cwd in ((run_a, first), (run_b, second)):
        assert result.session_id is not None and result.events[0]["id"] == result.session_id
        assert {s.session_id for s in result.mock} == {result.session_id}
        assert len(_session_dirs(dsh, cwd)) == 1


def test_a_replay_path_with_a_parent_segment_is_refused_naming_the_rule_not_the_path(dsh: DshRunner) -> None:
    script = _write_script(dsh.cwd, "s.json", _tool("echo", text="never"))
    (dsh.cwd / "private-dir").mkdir()
    before = _snapshot(dsh.cwd)

    result = dsh.run(script="private-dir/../s.json", check=False)

    assert result.exit_code == 3
    assert "PATH_REFUSED" in result.stderr
    assert "parent-segment" in result.stderr
    assert "private-dir" not in result.stderr + result.stdout
    assert tool_bodies(dsh.cwd) == []
    assert _tool_messages(result.events) == []
    assert result.tool_calls == []
    assert _changed(before, dsh.cwd) == set()
    assert script.read_bytes() == before["s.json"]


def test_the_agent_stays_running_across_steps_and_waits(dsh: DshRunner) -> None:
    steps = (_tool("echo", text="a"), {"wait": 300}, _tool("echo", text="b"), _tool("echo", text="c"))
    _write_script(dsh.cwd, "paced.json", *steps)

    result = dsh.run(script="paced.json")

    assert result.mock[-1].state == "succeeded"
    assert (dsh.cwd / "agent-status.log").read_text().split() == ["running", "idle"]
