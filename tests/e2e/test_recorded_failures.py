"""Recorded failures are named once, and a failed run's account shows the tool's own message (issue 22).

A recording made while a tool fails (its service down) replays that failure in every later run;
the run ends with one ``TOOL_FAILURE_RECORDED`` warning naming each failed call by tool, path and
runtime code (no error: the exit code stays rc.8's own). In pytest, a test that passes warns with
``RecordedFailure``; a test that fails shows the failed tool's message and a ``sessions show``
command that works pasted in the user's folder, not pytest's temporary one.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from dshrun import ROOT, user_project, user_pytest

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import ToolCassette, run

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
BOTH = '/mock run [echo({"text": "a"}) broken({"why": "service down"})]'
WARNING = (
    "TOOL_FAILURE_RECORDED: 1 of 2 recorded call(s) failed (broken at root/1 with no runtime code); the cassette "
    "is published anyway and replays them; if a tool should succeed, fix it (or the service it needs) and "
    "re-record (record mode all)"
)


def test_a_recording_that_holds_a_failed_call_says_so_once_and_adds_no_error(dsh: DshRunner) -> None:
    cassette = ToolCassette(file="c.ndjson", include=["echo", "broken"])

    recorded = run(BOTH, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches, tool_cassette=cassette, record_mode="once")
    dsh.runs.append(recorded)

    assert [line for line in recorded.stderr.splitlines() if "TOOL_FAILURE_RECORDED" in line] == [
        f"dsh-sidecar: {WARNING}"
    ]
    assert "service down" not in recorded.stderr.split("TOOL_FAILURE_RECORDED")[1]  # never the message
    s = recorded.tool_cassette
    assert s is not None and (s.recorded, s.failed, s.published) == (2, 1, True)
    # A warning: no named error; the exit code is the failed turn's own (the mock stops at it).
    assert recorded.errors == [] and recorded.exit_code == 1

    replayed = run(BOTH, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches, tool_cassette=cassette,
                   record_mode="none")
    dsh.runs.append(replayed)

    assert "TOOL_FAILURE_RECORDED" not in replayed.stderr
    assert replayed.tool_cassette is not None and replayed.tool_cassette.consumed == 2


def test_a_recording_without_failures_prints_no_warning(dsh: DshRunner) -> None:
    result = run('/mock run echo({"text": "a"})', cwd=dsh.cwd, host=dsh.host, patches=dsh.patches,
                 tool_cassette=ToolCassette(file="c.ndjson", include=["echo"]), record_mode="once")
    dsh.runs.append(result)

    assert "TOOL_FAILURE_RECORDED" not in result.stderr
    assert result.tool_cassette is not None and result.tool_cassette.failed == 0


USER_TESTS = '''
def test_records_an_outage(dsh):
    result = dsh.run('/mock run broken({"why": "service down"})', tools=["broken"], check=False)
    assert result.tool_cassette.published


def test_fails_on_the_tool(dsh):
    dsh.run('/mock run broken({"why": "disk on fire"})', tools=["broken"])
'''


def test_pytest_warns_for_a_passing_recording_and_a_failing_one_shows_the_message_and_a_working_command(
    tmp_path: Path,
) -> None:
    project = user_project(tmp_path, USER_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "DSH_HOME"}

    proc = user_pytest(project, "--dsh-record-mode", "once", env=env)

    out = proc.stdout
    assert proc.returncode == 1 and "1 failed, 1 passed" in out, out[-3000:]
    account, summary = out.split("warnings summary")
    # The passing test's recording: a warning (its stderr is never shown).
    assert summary.count("RecordedFailure: TOOL_FAILURE_RECORDED: 1 of 1 recorded call(s) failed (broken at root/0 "
                         "with no runtime code)") == 1, out[-3000:]
    # The failing test's account: the tool's own message, the recorded-failure line once.
    assert "  broken at root/0 failed: Error: broken on purpose: disk on fire" in account, account
    assert account.count("TOOL_FAILURE_RECORDED") == 1
    assert "its full message is in the session log" not in account
    (command,) = re.findall(r"  session log: (dsh-sidecar sessions show session-[0-9a-f-]{36})\n", account)

    # Pasted where the user is: the project folder, not pytest's temporary one.
    shown = subprocess.run([SIDECAR_CLI, *shlex.split(command)[1:]], cwd=project, env=env, capture_output=True,
                           text=True, timeout=60)

    assert shown.returncode == 0, shown.stderr
    assert "Error: broken on purpose: disk on fire" in shown.stdout
