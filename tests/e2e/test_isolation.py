"""One failing test does not fail the next (issue 23, item 4), through the pytest plugin.

A user's project, run by pytest in a subprocess: a replay that mismatches (and poisons its
cassette) is followed by a good replay, and a test whose sidecar dies mid-call (a stub that
ends the sidecar's process) by a good test. Each bad test fails with its named error; the good
ones pass. Today every ``dsh`` run is its own DSH process; a warm host must keep these results.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from dshrun import user_project, user_pytest

GOOD = '''
def test_b_good(dsh):
    result = dsh.run('/mock run echo({"text": "hi"})', tools=["echo"])
    assert result.ok, result.explain()
'''


def _project(tmp_path: Path, tests: str) -> Path:
    return user_project(tmp_path, tests)


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return user_pytest(project, *args)


def test_a_mismatching_replay_is_followed_by_a_good_one_that_passes(tmp_path: Path) -> None:
    bad = '''
def test_a_mismatch(dsh):
    result = dsh.run('/mock run echo({"text": "TEXT"})', tools=["echo"])
    assert result.ok, result.explain()
'''
    project = _project(tmp_path, bad.replace("TEXT", "hi") + GOOD)
    recorded = _pytest(project, "--dsh-record-mode", "once")
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    (project / "test_it.py").write_text(bad.replace("TEXT", "changed") + GOOD)
    replayed = _pytest(project)
    assert replayed.returncode == 1
    assert "1 failed, 1 passed" in replayed.stdout, replayed.stdout[-3000:]
    assert "FAILED test_it.py::test_a_mismatch" in replayed.stdout
    assert "CASSETTE_MISMATCH: echo at root/0, ordinal 0" in replayed.stdout


def test_a_test_whose_sidecar_dies_mid_call_fails_alone(tmp_path: Path) -> None:
    # The stub runs in the sidecar's process: ending that process mid-call is a dead sidecar.
    dies = '''
import os

import pytest


def die(args):
    os._exit(9)


@pytest.mark.dsh(config={"stubs": {"echo": die}})
def test_a_sidecar_dies(dsh):
    result = dsh.run('/mock run echo({"text": "x"})')
    assert result.ok, result.explain()
'''
    project = _project(tmp_path, dies + GOOD)
    assert _pytest(project, "--dsh-record-mode", "once", "-k", "good").returncode == 0
    proc = _pytest(project)
    assert proc.returncode == 1
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout[-3000:]
    assert "FAILED test_it.py::test_a_sidecar_dies" in proc.stdout
    account = proc.stdout.split("short test summary info")[0]
    # The sidecar's exit is told once; the turn's error says what failed, not the same line again.
    assert account.count("sidecar exited (code 9, signal null)") == 1, account
    assert ("SIDECAR_UNAVAILABLE: the mock model cannot answer without the sidecar (its exit is reported above)"
            in account), account
