"""``scripts/demo``, the README's first command, and ``scripts/demo_import``, end to end."""

from __future__ import annotations

import subprocess
import sys

from dshrun import ROOT


def test_the_demo_records_once_and_replays_with_zero_real_calls() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo.py")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "tool body runs                   1         0   1 / 0" in lines
    assert "HTTP requests                    1         0   1 / 0" in lines
    assert "records consumed        1 consumed, 0 unconsumed, poisoned: no" in lines
    assert lines[-1] == "demo: ok: recorded once, replayed offline with zero real tool calls"


def test_the_import_demo_replays_a_plain_session_as_a_pytest_test_with_no_request_or_tool_body() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_import.py")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "provider requests                3         0   3 / 0" in lines
    assert "weather requests                 1         0   1 / 0" in lines
    assert lines[-1] == ("demo-import: ok: a session run with no sidecar replayed as a pytest test, offline, "
                         "no tool body")
