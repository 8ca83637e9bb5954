"""Offline means offline, and marker typos fail by name (issue 22).

A user's project (its own pytest.ini: not this suite's ``dsh_allow_live_tools = *``) runs the
``dsh`` fixture in record mode ``none``: a tool call that no cassette serves is refused by the
sidecar's offline guard and fails the test with LIVE_TOOL_BLOCKED and the fix, unless the test
allows live tools (marker key, ini option, command-line flag).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dshrun import user_project, user_pytest

ECHO = '/mock run echo({"text": "hi"})'


def _project(tmp_path: Path, test_body: str, ini: str = "") -> Path:
    return user_project(tmp_path, "import pytest\n\n\n" + test_body, ini)


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return user_pytest(project, *args)


LIVE = f"def test_echo(dsh):\n    dsh.run({ECHO!r})\n"


def test_a_tool_no_cassette_serves_fails_the_test_in_record_mode_none(tmp_path: Path) -> None:
    project = _project(tmp_path, LIVE)
    proc = _pytest(project)
    assert proc.returncode == 1, proc.stdout[-3000:]
    lines = [line for line in proc.stdout.splitlines() if "LIVE_TOOL_BLOCKED" in line]
    assert lines, proc.stdout[-3000:]
    assert "tool echo (call root/0) would run live in record mode none; no cassette serves it" in lines[0]
    assert "--dsh-allow-live-tools" in proc.stdout


def test_live_tools_run_when_the_test_the_ini_or_the_command_line_allows_them(tmp_path: Path) -> None:
    marked = _project(tmp_path / "marker", "@pytest.mark.dsh(allow_live_tools=['echo'])\n" + LIVE)
    assert _pytest(marked).returncode == 0
    ini = _project(tmp_path / "ini", LIVE, ini="dsh_allow_live_tools = echo\n")
    assert _pytest(ini).returncode == 0
    flag = _project(tmp_path / "flag", LIVE)
    proc = _pytest(flag, "--dsh-allow-live-tools")
    assert proc.returncode == 0, proc.stdout[-3000:]
    other = _project(tmp_path / "other", "@pytest.mark.dsh(allow_live_tools=['weather_lookup'])\n" + LIVE)
    assert "LIVE_TOOL_BLOCKED" in _pytest(other).stdout


def test_marker_typos_and_bad_values_fail_with_one_line_naming_them(tmp_path: Path) -> None:
    project = _project(tmp_path, (
        "@pytest.mark.dsh(recordmode='once')\ndef test_key(dsh):\n    pass\n\n\n"
        "@pytest.mark.dsh(record_mode='onse')\ndef test_value(dsh):\n    pass\n\n\n"
        f"def test_option(dsh):\n    dsh.run({ECHO!r}, record_mode='onse')\n"
    ))
    proc = _pytest(project, "--dsh-allow-live-tools")
    out = proc.stdout
    assert ("@pytest.mark.dsh(recordmode=...): unknown key; allowed: cassette, record_mode, config, "
            "allow_live_tools") in out
    assert "@pytest.mark.dsh(record_mode='onse'): not a record mode; allowed: none, once, all" in out
    assert "record_mode 'onse' is not one of none, once, all" in out
    # pytest's short summary repeats a failure's line when it fits the terminal (CI's is wide)
    account = out.split("short test summary info")[0]
    assert account.count("record_mode 'onse' is not one of") == 1, out
    assert "Traceback" not in out and "ValueError" not in out.replace("E   ValueError", ""), out[-3000:]


def test_a_missing_host_is_named_once(tmp_path: Path) -> None:
    project = _project(tmp_path, "def test_it(dsh):\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME",)}
    env["DSH_SIDECAR_HOST"] = str(tmp_path / "nowhere")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1
    account = proc.stdout.split("short test summary info")[0]  # the summary line repeats every failure
    assert account.count("HOST_NOT_FOUND") == 1, proc.stdout
    assert "During handling" not in proc.stdout
