"""DSH rc.8's own built-in tools through the tool cassette, end to end (issue 21, items 3 and 4).

Each case records with the real built-in, changes the world so a real call would answer
otherwise, replays, and checks the recorded answer was served (``serve`` in the sidecar trace)
while the real body did not run. Several calls share one mock script to keep DSH boots few.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dshrun import trace_actions

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import RecordMode, RunResult, ToolCassette, run

CASSETTE = "c.ndjson"
TRACE = "sidecar-trace.jsonl"


def _run(dsh: DshRunner, steps: Sequence[dict[str, Any]], record_mode: RecordMode,
         include: Sequence[str]) -> RunResult:
    script = {"type": "dsh-mock-script", "version": 1, "steps": list(steps)}
    result = run(
        None, script=script, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches,
        tool_cassette=ToolCassette(file=CASSETTE, include=list(include)), record_mode=record_mode, hook_log=TRACE,
    )
    dsh.runs.append(result)
    return result


def _actions(cwd: Path) -> list[tuple[str, str]]:
    return trace_actions(cwd / TRACE)


def test_create_goal_records_although_the_goal_follow_up_turn_aborts(dsh: DshRunner) -> None:
    # Headless DSH aborts the follow-up turn the goal driver starts: no selected call is open
    # then, so the recording is complete (it used to exit 1 RECORDING_INTERRUPTED).
    steps = [{"tool": "create_goal", "args": {"objective": "ship it"}}]
    recorded = _run(dsh, steps, "once", ["create_goal"])
    assert recorded.ok, recorded.explain()
    assert "tool cassette record: 1 selected calls, 1 recorded, published: yes" in recorded.stderr
    assert "RECORDING_INTERRUPTED" not in recorded.stderr
    assert sorted(p.name for p in dsh.cwd.iterdir() if CASSETTE in p.name) == [CASSETTE]

    replayed = _run(dsh, steps, "none", ["create_goal"])
    assert replayed.ok, replayed.explain()
    assert _actions(dsh.cwd) == [("create_goal", "serve")]
    assert [r.is_error for r in replayed.tool_results] == [False]


def _texts(result: RunResult) -> list[tuple[bool, str, str | None]]:
    return [(r.is_error, r.output, r.error_code) for r in result.tool_results]


def test_a_replayed_read_and_todo_write_leave_the_host_state_the_real_calls_left(dsh: DshRunner) -> None:
    # read and todo_write are selected; the edit between them is not: it runs for real on
    # replay too, and needs the observation the replayed read must leave (else FS_NOT_OBSERVED).
    notes = dsh.cwd / "notes.txt"
    notes.write_text("alpha\n")
    todos = [{"content": "ship it", "status": "pending"}]
    steps = [
        {"tool": "read", "args": {"file_path": "notes.txt"}},
        {"tool": "edit", "args": {"file_path": "notes.txt", "old_string": "alpha", "new_string": "beta"}},
        {"tool": "todo_write", "args": {"todos": todos}},
    ]
    include = ["read", "todo_write"]
    recorded = _run(dsh, steps, "once", include)
    assert recorded.ok, recorded.explain()
    assert notes.read_text() == "beta\n"
    lines = [json.loads(line) for line in (dsh.cwd / CASSETTE).read_text().splitlines()]
    assert lines[0]["version"] == 5
    hosts = [line.get("host") for line in lines if line["kind"] == "call/result"]
    assert hosts[0]["observe"] == ["notes.txt"]
    assert hosts[1]["events"][0]["type"] == "todo/write"

    notes.write_text("alpha, changed\n")  # a real read would now answer otherwise
    replayed = _run(dsh, steps, "none", include)
    assert replayed.ok, replayed.explain()
    assert _actions(dsh.cwd) == [("read", "serve"), ("edit", "next"), ("todo_write", "serve")]
    assert _texts(replayed)[0] == _texts(recorded)[0]  # the recorded read, not "changed"
    assert "changed" not in _texts(replayed)[0][1]
    assert _texts(replayed)[1][0] is False  # the real edit was guarded by the restored observation
    assert notes.read_text() == "beta, changed\n"
    written = [e for e in replayed.events if e.get("type") == "todo/write"]
    assert [e["data"]["todos"] for e in written] == [[{"content": "ship it", "status": "pending"}]]


def test_an_unselected_call_using_a_selected_calls_outside_effect_is_named_at_record_and_replay(
    dsh: DshRunner,
) -> None:
    # A served write writes no file, a served background bash starts no job: the unselected
    # read and job_output after them depend on effects a replay cannot have.
    steps = [
        {"tool": "write", "args": {"file_path": "made.txt", "content": "made\n"}},
        {"tool": "bash", "args": {"command": "echo done", "description": "say done", "run_in_background": True}},
        {"parallel": [
            {"tool": "read", "args": {"file_path": "made.txt"}},
            {"tool": "job_output", "args": {"job_id": "bash-1", "wait": True, "timeout_ms": 10000}},
        ]},
    ]
    include = ["write", "bash"]
    recorded = _run(dsh, steps, "once", include)
    assert recorded.ok, recorded.explain()
    assert ("warning: TOOL_DEPENDENCY: unselected read at root/2 uses made.txt, which the selected write at "
            "root/0 made outside DSH; a replay serves write without doing it; fix: select both calls' tools in "
            "toolCassette.include, or neither (docs/builtin-tools.md)") in recorded.stderr
    assert ("warning: TOOL_DEPENDENCY: unselected job_output at root/3 reads a background job, which the "
            "selected bash at root/1 made outside DSH") in recorded.stderr
    assert "published: yes" in recorded.stderr

    (dsh.cwd / "made.txt").unlink()
    replayed = _run(dsh, steps, "none", include)
    assert not replayed.ok
    assert _actions(dsh.cwd)[:2] == [("write", "serve"), ("bash", "serve")]
    assert not (dsh.cwd / "made.txt").exists()
    codes = sorted(e.code for e in replayed.errors if e.code == "TOOL_DEPENDENCY")
    assert codes == ["TOOL_DEPENDENCY", "TOOL_DEPENDENCY"]
    assert "TOOL_DEPENDENCY: unselected read at root/2 uses made.txt" in replayed.stderr
    assert "fix: select both calls' tools in toolCassette.include, or neither" in replayed.stderr


def test_a_replayed_write_in_another_folder_reports_that_folders_path_and_writes_nothing(dsh: DshRunner) -> None:
    steps = [{"tool": "write", "args": {"file_path": "out.txt", "content": "made\n"}}]
    recorded = _run(dsh, steps, "once", ["write"])
    assert recorded.ok, recorded.explain()
    assert str(dsh.cwd) in recorded.tool_results[0].output
    moved = dsh.cwd / "moved"
    moved.mkdir()
    (moved / CASSETTE).write_bytes((dsh.cwd / CASSETTE).read_bytes())
    script = {"type": "dsh-mock-script", "version": 1, "steps": steps}
    replayed = run(None, script=script, cwd=moved, host=dsh.host, patches=dsh.patches,
                   tool_cassette=ToolCassette(file=CASSETTE, include=["write"]), record_mode="none", hook_log=TRACE)
    dsh.runs.append(replayed)
    assert replayed.ok, replayed.explain()
    output = replayed.tool_results[0].output
    assert f"{moved}/out.txt" in output and f"{dsh.cwd}/out.txt" not in output
    assert not (moved / "out.txt").exists()


def test_read_only_built_ins_replay_the_recorded_answers_after_the_world_changed(dsh: DshRunner) -> None:
    # glob, grep, a foreground bash, str_replace_editor's view and the job, goal and agent
    # listings: each answer depends on the world, which changes between record and replay.
    (dsh.cwd / "notes.txt").write_text("alpha one\n")
    steps = [
        {"tool": "glob", "args": {"pattern": "*.txt"}},
        {"tool": "grep", "args": {"pattern": "alpha", "path": "."}},
        {"tool": "bash", "args": {"command": "cat notes.txt", "description": "print the notes"}},
        {"tool": "str_replace_editor", "args": {"command": "view", "path": str(dsh.cwd / "notes.txt")}},
        {"tool": "job_list", "args": {}},
        {"tool": "get_goal", "args": {}},
        {"tool": "list_agents", "args": {}},
    ]
    include = [step["tool"] for step in steps]
    recorded = _run(dsh, steps, "once", include)
    assert recorded.ok, recorded.explain()
    assert [r.is_error for r in recorded.tool_results] == [False] * len(steps), _texts(recorded)
    assert "alpha one" in _texts(recorded)[2][1]

    (dsh.cwd / "notes.txt").write_text("alpha changed\n")
    (dsh.cwd / "later.txt").write_text("alpha later\n")
    replayed = _run(dsh, steps, "none", include)
    assert replayed.ok, replayed.explain()
    assert _actions(dsh.cwd) == [(tool, "serve") for tool in include]
    assert _texts(replayed) == _texts(recorded)
    assert not any("changed" in text or "later" in text for _, text, _ in _texts(replayed))
