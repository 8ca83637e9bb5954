"""How a composed run reaches DSH: a process of its own (``ColdTransport``) or a session of the
warm host of its composition (``WarmTransport``), behind one interface as httpx's transports.

``handle`` returns what the run gave in a process's shape (exit code, output, timeout); a warm
transport returns ``None`` for a run the host cannot take, and the run goes cold.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec

from dsh_sidecar.bridge.api.compose import WARM_PATCH, Composition, patch_text, private_home
from dsh_sidecar.bridge.api.warm_pool import SettleHome, WarmBoot, WarmPool
from dsh_sidecar.bridge.host.staging import home_root, settle, settle_home, staging_root

__all__ = ["ColdTransport", "Outcome", "Transport", "WarmTransport", "warm_suits"]

_KILL_GRACE_S = 5.0


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What the DSH run gave: exit code, output, a timeout, and how long it took."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_ms: int


class Transport(Protocol):
    """Runs one composed task; ``None``: this transport cannot take it."""

    def handle(self, composition: Composition, private: Path, cwd: Path, task: str,
               timeout: float) -> Outcome | None: ...


class ColdTransport:
    """A DSH process of its own: its private home, sessions root and temporary folder under
    ``private``, in a new process group that a timeout ends as a whole."""

    def handle(self, composition: Composition, private: Path, cwd: Path, task: str,
               timeout: float) -> Outcome | None:
        host = composition.host
        patch = private / "run.patch.yml"
        patch.write_text(composition.patch())
        # Later layers win: the caller's files first, then this run's own rows.
        argv = [*composition.argv(), "--patch", str(patch), task]
        environ = dict(composition.environ)
        staging = staging_root(host.dsh_home, private.name)
        root = home_root(host.dsh_home, private.name)
        try:
            home = private_home(host.dsh_home, composition.profile, root, staging)
            environ["DSH_HOME"] = str(home)
            # rc.8 leaves an empty `dsh-spill-*` folder in the temporary folder at every run: this
            # run's own goes away with `private`.
            (private / "tmp").mkdir()
            environ["TMPDIR"] = str(private / "tmp")
            started = time.monotonic()
            code, out, err, timed_out = _execute(argv, cwd, environ, timeout)
            duration_ms = int((time.monotonic() - started) * 1000)
        finally:
            # The run's session logs join the shared folder, where its result and later runs find them;
            # what plugins made in its home joins the shared home, as with a plain `dsh`.
            settle(staging, host.dsh_home / "sessions")
            settle_home(root / "home", host.dsh_home, composition.profile, keep_links=False)
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(root, ignore_errors=True)
        return Outcome(exit_code=code, stdout=out, stderr=err, timed_out=timed_out, duration_ms=duration_ms)


class WarmTransport:
    """A session of the warm host of the run's composition, from ``pool`` (docs/warm-host.md)."""

    def __init__(self, pool: WarmPool) -> None:
        self.pool = pool

    def handle(self, composition: Composition, private: Path, cwd: Path, task: str,
               timeout: float) -> Outcome | None:
        boot = warm_boot(composition)
        started = time.monotonic()
        outcome = self.pool.run(boot.key(composition.extras), boot, composition.sidecar, cwd, task, timeout)
        if outcome is None:
            return None
        return Outcome(exit_code=outcome.exit_code, stdout=outcome.stdout, stderr=outcome.stderr,
                       timed_out=outcome.timed_out, duration_ms=int((time.monotonic() - started) * 1000))


def warm_suits(profile: str, has_subagent_cassette: bool, mock: Mapping[str, Any] | None) -> bool:
    """Whether a run can be a session of a warm host (the sidecar refuses what it cannot see here)."""
    return profile == "headless" and not has_subagent_cassette and (mock is None or mock.get("enabled") is not False)


def warm_boot(composition: Composition) -> WarmBoot:
    """How to boot the warm host of a composition: the cold run's argv and rows, the runner row off."""
    host = composition.host
    base = {k: v for k, v in composition.environ.items() if k not in ("DSH_HOME", "TMPDIR")}

    def patch_for(socket_path: str) -> str:
        return patch_text({"warm": socket_path}, composition.rows, False, False, composition.skipped) + WARM_PATCH

    def make_home(private: Path) -> tuple[Path, Path, SettleHome]:
        staging = staging_root(host.dsh_home, private.name)
        root = home_root(host.dsh_home, private.name)

        def settle_state(ended: bool) -> None:
            # After each run: state a plugin made is in the shared home, linked back for this host.
            settle_home(root / "home", host.dsh_home, composition.profile, keep_links=not ended)
            if ended:
                shutil.rmtree(root, ignore_errors=True)

        try:
            return private_home(host.dsh_home, composition.profile, root, staging), staging, settle_state
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(staging, ignore_errors=True)
            raise

    return WarmBoot(composition.argv(), patch_for, base, make_home, host.dsh_home / "sessions")


def _execute(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str, bool]:
    """Run ``argv`` in its own process group; a timeout ends that group only."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, errors="replace", start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, err = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        return proc.returncode, out, err, True
