"""The raw headless DSH runner (imported by ``conftest.py`` and tests), and shared paths.

Most end-to-end tests run DSH through the run API (``bridge.api.run``, the plugin's ``dsh``
fixture). ``Dsh`` writes a hand-made ``--patch`` layer and runs ``dsh`` itself, for what the API
does not model on purpose: a run started in the background and signalled, a sidecar row with
keys the API never writes (an unknown key, the engine's own ``record`` mode).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_sidecar.bridge.api.compose import private_home
from dsh_sidecar.python_core.session_log import project_key, read_session_log

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / ".host"
DSH = HOST / "bin" / "dsh"
DSH_HOME = HOST / "dsh-home"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Times, ids and the seq numbers that shift with the asynchronous session-title event.
_VOLATILE = frozenset({"time", "time0", "createdAt", "dt", "seq", "seq0", "sourceEventSeqs", "id"})


def stable(value: Any) -> Any:
    """A session event (or any JSON value) without its times, ids and seq numbers; UUIDs masked."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return _UUID.sub("<uuid>", value) if isinstance(value, str) else value


def user_project(folder: Path, tests: str, ini: str = "") -> Path:
    """A user's own pytest project under ``folder``: the example tools row patched in, ``tests``."""
    project = folder / "project"
    project.mkdir(parents=True)
    row = {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {}}
    (project / "tools.patch.yml").write_text(f"- {json.dumps(row)}\n")
    (project / "pytest.ini").write_text(f"[pytest]\ndsh_patches = tools.patch.yml\n{ini}")
    (project / "test_it.py").write_text(tests)
    return project


def user_pytest(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run pytest in ``project`` against this checkout's host, on a wide terminal as CI's (pytest's
    short summary then carries each failure's whole line)."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--dsh-host={HOST}", *args],
        cwd=project, env={**(os.environ if env is None else env), "COLUMNS": "400"},
        capture_output=True, text=True, timeout=600,
    )


def trace_actions(trace: Path) -> list[tuple[str, str]]:
    """``(tool, action)`` of each ``tools/execute`` decision of the last run that wrote ``trace``."""
    lines = [json.loads(line) for line in trace.read_text().splitlines() if line]
    start = [i for i, line in enumerate(lines) if line["method"] == "initialize"][-1]
    return [(line["tool"], line["action"]) for line in lines[start:] if line["method"] == "tools/execute"]


def tool_bodies(cwd: Path) -> list[str]:
    """Tool names whose real bodies ran in ``cwd``: the example tools append one line per body, every
    run, to ``cwd/tool-bodies.log``."""
    log = cwd / "tool-bodies.log"
    return log.read_text().split() if log.exists() else []


def read_session(path: Path) -> list[dict[str, Any]]:
    """Decode a DSH session log (``.jsonl`` or concatenated zstd frames)."""
    return read_session_log(path)


@dataclass
class Run:
    """One finished headless run."""

    rc: int
    stdout: str
    stderr: str
    cwd: Path
    trace_path: Path
    elapsed: float

    @property
    def trace(self) -> list[dict[str, Any]]:
        """The sidecar's structural trace lines."""
        if not self.trace_path.exists():
            return []
        return [json.loads(line) for line in self.trace_path.read_text().splitlines() if line]

    def sessions(self) -> list[list[dict[str, Any]]]:
        """Every session log written for this run's cwd, oldest first (rc.8 groups them by cwd)."""
        logs = []
        for path in (DSH_HOME / "sessions" / project_key(str(self.cwd))).glob("*/session.jsonl*"):
            events = read_session(path)
            if events and events[0].get("cwd") == str(self.cwd):
                logs.append((events[0].get("createdAt", 0), events))
        return [events for _, events in sorted(logs, key=lambda item: item[0])]

    def events(self, kind: str) -> list[dict[str, Any]]:
        """Events of one type across this cwd's sessions."""
        return [e for log in self.sessions() for e in log if e.get("type") == kind]

    def bodies(self) -> list[str]:
        """Tool names whose real bodies ran (one line per run body)."""
        return tool_bodies(self.cwd)


@dataclass
class Dsh:
    """Runs ``dsh --profile headless`` with the sidecar and example tools rows enabled."""

    cwd: Path
    sidecar: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)
    extra_patch: str = ""
    sidecar_enabled: bool = True

    def patch_file(self) -> Path:
        """Write this run's ``--patch`` layer (JSON is YAML flow syntax)."""
        config = {"trace": "sidecar-trace.jsonl", **self.sidecar}
        rows = [
            {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": self.tools},
        ]
        if self.sidecar_enabled:
            rows.append({"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": config})
        text = "".join(f"- {json.dumps(row)}\n" for row in rows) + self.extra_patch
        path = self.cwd / ".dsh-test.patch.yml"
        path.write_text(text)
        return path

    def argv(self, task: str) -> list[str]:
        """The command line for ``task``."""
        return [str(DSH), "--profile", "headless", "--patch", str(self.patch_file()), task]

    def environ(self) -> dict[str, str]:
        """The environment of a run: the project host, telemetry off, no keys.

        ``DSH_HOME`` is a home of this run's own that links every entry of the project's (its
        sessions root too) but the profile's ``cordis.yml``, as the run API's private homes do:
        rc.8 rewrites that file at every boot, and two plain ``dsh`` boots in one home (two xdist
        workers) raced on it: one booted without the sidecar row (``MISSING_CREDENTIAL``).
        """
        env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
        private = Path(tempfile.mkdtemp(prefix=".dsh-home-", dir=self.cwd.parent))
        home = private_home(DSH_HOME, "headless", private, DSH_HOME / "sessions")
        env.update(DSH_HOME=str(home), DSH_TELEMETRY_DISABLED="1")
        env["PATH"] = f"{HOST / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, task: str, timeout: float = 90) -> Run:
        """Run ``task`` headless to completion."""
        start = time.monotonic()
        proc = subprocess.run(
            self.argv(task), cwd=self.cwd, env=self.environ(), capture_output=True, text=True,
            timeout=timeout,
        )
        return Run(
            proc.returncode, proc.stdout, proc.stderr, self.cwd, self.cwd / "sidecar-trace.jsonl",
            time.monotonic() - start,
        )

    def start(self, task: str) -> subprocess.Popen[str]:
        """Start ``task`` headless in the background."""
        return subprocess.Popen(
            self.argv(task), cwd=self.cwd, env=self.environ(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )

    def finished(self, proc: subprocess.Popen[str], timeout: float = 90) -> Run:
        """Wait for a started run."""
        stdout, stderr = proc.communicate(timeout=timeout)
        return Run(proc.returncode, stdout, stderr, self.cwd, self.cwd / "sidecar-trace.jsonl", 0.0)




def wait_for(predicate: Callable[[], bool], timeout: float = 60.0,
             proc: subprocess.Popen[str] | None = None) -> None:
    """Wait until ``predicate()`` holds, polling a file-backed condition (never a fixed sleep).

    With ``proc``, a process that exits first fails the wait at once with what it printed (a
    timeout would hide why the condition never came).
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            _, stderr = proc.communicate()
            raise AssertionError(f"the run exited {proc.returncode} before the condition: {stderr[-2000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached before the timeout")
        time.sleep(0.02)
