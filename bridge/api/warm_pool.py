"""Warm hosts for the run API: one long-lived headless DSH rc.8 process per composition, a
bounded number of them per pool (least recently used ended first).

A composition is everything a DSH process is booted with (host, profile, rows, patches,
environment); runs of the same composition share one process, each as a session of its own
with its own config and working folder (docs/warm-host.md). The process's sidecar connects
to a Unix socket of this module's; a run is one ``WarmRun`` line out and one ``WarmReply``
line back. A host that dies, times out or refuses is closed; the next run boots a fresh one.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import msgspec

from dsh_sidecar.bridge.host.staging import settle
from dsh_sidecar.bridge.transport.control import MAX_CONTROL_LINE, WarmReply, WarmRun
from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["HostBootFailed", "PoolStats", "SettleHome", "WarmBoot", "WarmOutcome", "WarmPool", "composition_key",
           "default_pool"]

# A boot takes about a second; a loaded 2-core machine has been seen at 6.
_BOOT_TIMEOUT_S = 90.0
_KILL_GRACE_S = 5.0
# Environment that changes from one test to the next without changing the host.
_VOLATILE_ENV = ("PYTEST_CURRENT_TEST",)


# Settles a host's private DSH_HOME into the shared one; ``True``: the host ended, remove the home.
SettleHome = Callable[[bool], None]


class WarmOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a warm run gave, in the shape of a process's: exit code, output, a timeout."""

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False


def composition_key(argv: Sequence[str], patch_text: str, extras: Sequence[Path], environ: Mapping[str, str]) -> str:
    """A digest of what a host is booted with: two runs share a host only when it is equal."""
    digest = hashlib.sha256()
    for part in argv:
        digest.update(part.encode() + b"\0")
    digest.update(patch_text.encode() + b"\0")
    for extra in extras:
        # A patch file's content, not its name: a test that rewrites it gets another host.
        digest.update(str(extra).encode() + b"\0" + extra.read_bytes() + b"\0")
    for name in sorted(environ):
        if name not in _VOLATILE_ENV:
            digest.update(f"{name}={environ[name]}".encode() + b"\0")
    return digest.hexdigest()


class _Host:
    """One warm DSH process and its control connection."""

    def __init__(self, key: str, private: Path, proc: subprocess.Popen[bytes], conn: socket.socket,
                 stderr: Path, staging: Path, sessions: Path, settle_home: SettleHome) -> None:
        self.key = key
        self.private = private
        # Moves what plugins made in the host's private DSH_HOME into the shared one (True: the last time).
        self.settle_home = settle_home
        # The host's own sessions root and the shared one its session folders move to (session_staging.py).
        self.staging = staging
        self.sessions = sessions
        # Runs sent whose replies were not read yet: session folders and the private home are settled
        # only when none is (moving a folder a running session writes into pulls it from under it:
        # rc.8 failed ENOENT on a session log whose project folder had moved).
        self._in_flight: set[int] = set()
        self.proc = proc
        self.conn = conn
        self.stderr = stderr
        self._buffer = b""
        self._replies: dict[int, WarmReply] = {}
        self._pidfd = os.pidfd_open(proc.pid)
        self._closed = False

    @classmethod
    def boot(cls, key: str, argv: list[str], cwd: Path, environ: dict[str, str], private: Path,
             socket_path: Path, staging: Path, sessions: Path, settle_home: SettleHome) -> _Host:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(socket_path))
            listener.listen(1)
            stderr = private / "host.stderr"
            # Its stdout carries nothing of a run (the runner row is off; a run's text is in its reply).
            with open(stderr, "wb") as err:
                proc = subprocess.Popen(argv, cwd=cwd, env=environ, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            pidfd = os.pidfd_open(proc.pid)
            try:
                ready, _, _ = select.select([listener.fileno(), pidfd], [], [], _BOOT_TIMEOUT_S)
            finally:
                os.close(pidfd)
            if listener.fileno() not in ready:
                _kill(proc)
                raise HostBootFailed(f"the warm host {'hung' if not ready else 'exited'} before its sidecar connected; "
                                     "its runs boot cold")
            conn, _ = listener.accept()
        finally:
            listener.close()
        return cls(key, private, proc, conn, stderr, staging, sessions, settle_home)

    def run(self, request: WarmRun, timeout: float) -> WarmOutcome | WarmReply:
        """Send ``request``; its reply, or the outcome of a host that died or timed out meanwhile."""
        self.settle_home(False)  # state other runs left in the shared home is this run's to see
        offset = self.send(request)
        if offset is None:
            return self._lost(0, timed_out=False)
        return self.receive(request.id, offset, timeout)

    def send(self, request: WarmRun) -> int | None:
        """Send one run; the host's stderr offset at that moment (``None``: the host is gone).

        Several runs may be sent before their replies are read: their sessions run concurrently.
        """
        offset = self.stderr.stat().st_size
        try:
            self.conn.sendall(msgspec.json.encode(request) + b"\n")
        except OSError:
            return None
        self._in_flight.add(request.id)
        return offset

    def receive(self, run_id: int, offset: int, timeout: float) -> WarmOutcome | WarmReply:
        """The reply of run ``run_id`` (replies of other runs read meanwhile are kept for them)."""
        deadline = time.monotonic() + timeout
        while run_id not in self._replies:
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self.conn.fileno(), self._pidfd], [], [], max(left, 0))
                if self.conn.fileno() not in ready:
                    return self._lost(offset, timed_out=not ready)
                try:
                    chunk = self.conn.recv(1 << 20)
                except OSError:  # ECONNRESET: the host died with a line of ours unread
                    chunk = b""
                if not chunk or len(self._buffer) + len(chunk) > MAX_CONTROL_LINE:
                    return self._lost(offset, timed_out=False)
                self._buffer += chunk
            line, _, self._buffer = self._buffer.partition(b"\n")
            reply = msgspec.json.decode(line, type=WarmReply)
            self._replies[reply.id] = reply
        reply = self._replies.pop(run_id)
        self._in_flight.discard(run_id)
        if reply.ended:
            # The host is exiting under the run: what it prints until its end is the run's too.
            lost = self._lost(offset, timed_out=False)
            return WarmOutcome(exit_code=max(lost.exit_code, reply.exitCode), stdout=reply.stdout,
                               stderr=lost.stderr + reply.stderr)
        if not self._in_flight:
            settle(self.staging, self.sessions)
            self.settle_home(False)
        return msgspec.structs.replace(reply, stderr=self._stderr_since(offset) + reply.stderr)

    def _stderr_since(self, offset: int) -> str:
        with open(self.stderr, "rb") as err:
            err.seek(offset)
            return err.read().decode(errors="replace")

    def _lost(self, offset: int, *, timed_out: bool) -> WarmOutcome:
        """The host is gone or gave up: end it; the run's outcome is what it printed until its end."""
        self._end(kill=timed_out)
        stderr = self._stderr_since(offset)
        self.close()  # its session folders move to the shared root
        code = self.proc.returncode
        return WarmOutcome(exit_code=1 if code is None or code <= 0 else code, stdout="", stderr=stderr,
                           timed_out=timed_out)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def _end(self, *, kill: bool = False) -> None:
        # The control socket's end tells the host to exit (its runner gets `stop`); then signals.
        self.conn.close()
        if kill:
            _kill(self.proc)
            return
        try:
            self.proc.wait(timeout=_KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            _kill(self.proc)

    def close(self) -> None:
        """End the process and remove its folder (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._end()
        finally:
            os.close(self._pidfd)
            settle(self.staging, self.sessions)
            self.settle_home(True)
            shutil.rmtree(self.staging, ignore_errors=True)
            shutil.rmtree(self.private, ignore_errors=True)


class HostBootFailed(SidecarError):
    """A warm host exited or hung before its sidecar connected: its runs boot cold instead, where
    the boot's failure is printed as the run's own."""

    code = "WARM_HOST_BOOT_FAILED"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


class PoolStats(msgspec.Struct, frozen=True, kw_only=True):
    """A pool's counts as values: hosts running now and their bound, hosts booted and ended to
    make room so far, runs served as sessions and runs a host could not take (they ran cold),
    and the resident memory of every running host's processes (DSH and its sidecar) now."""

    hosts: int
    max_hosts: int
    boots: int
    evictions: int
    sessions: int
    unsuited: int
    rss_bytes: int


class WarmPool:
    """The warm hosts of this process: one per composition, at most ``max_hosts`` of them; a run
    of another composition when the pool is full ends the least recently used host first.

    A suite alternating two compositions keeps both hosts (the default bound is 2: each host is a
    DSH process and a sidecar, about 190 MiB resident here, docs/warm-host.md). Thread-safe:
    threads sharing a pool take turns, one run at a time (for runs in parallel, give each thread
    a pool of its own, or use pytest-xdist workers).

    Raises:
        ValueError: ``max_hosts`` is below 1.
    """

    def __init__(self, max_hosts: int = 2) -> None:
        if max_hosts < 1:
            raise ValueError(f"WarmPool(max_hosts={max_hosts}): a pool holds at least one host")
        self.max_hosts = max_hosts
        self._lock = threading.Lock()
        # Least recently used first.
        self._hosts: OrderedDict[str, _Host] = OrderedDict()
        # Compositions whose host did not start: their runs go cold at once, not after a failed boot each.
        self._unbootable: set[str] = set()
        self._next_id = 0
        self.boots = 0
        self._evictions = 0
        self._sessions = 0
        self._unsuited = 0

    def run(self, key: str, boot: WarmBoot, config: dict[str, object], cwd: Path, task: str,
            timeout: float) -> WarmOutcome | None:
        """Run one task as a session of the host for ``key`` (booted by ``boot`` if needed).

        ``None``: the run cannot share a host (its reply said why); run it in a process of its own.
        """
        with self._lock:
            return self._run(key, boot, WarmRun(id=0, cwd=str(cwd), task=task, config=config), timeout)

    def _run(self, key: str, boot: WarmBoot, request: WarmRun, timeout: float) -> WarmOutcome | None:
        host = self._hosts.get(key)
        if host is not None and not host.alive():
            del self._hosts[key]
            host.close()
            host = None
        if host is None:
            if key in self._unbootable:
                return None
            while len(self._hosts) >= self.max_hosts:
                # Room first: two hosts booting over a full pool would exceed the bound for a while.
                _, lru = self._hosts.popitem(last=False)
                lru.close()
                self._evictions += 1
            try:
                host = boot.start(key)
            except HostBootFailed:
                self._unbootable.add(key)
                return None  # the cold path boots it again and prints why, in the run's own output
            self.boots += 1
        self._hosts[key] = host
        self._hosts.move_to_end(key)
        self._next_id += 1
        answer = host.run(msgspec.structs.replace(request, id=self._next_id), timeout)
        if isinstance(answer, WarmOutcome):
            self._hosts.pop(key, None)  # it ended under the run
            self._sessions += 1
            return answer
        if answer.unsuited:
            self._unsuited += 1
            return None
        self._sessions += 1
        return WarmOutcome(exit_code=answer.exitCode, stdout=answer.stdout, stderr=answer.stderr)

    def pids(self) -> list[int]:
        """The warm hosts' processes and their children (the sidecars among them), least recently
        used host first, for diagnostics and memory figures."""
        found: list[int] = []
        for host in list(self._hosts.values()):
            if host.alive():
                found += _tree(host.proc.pid)
        return found

    def statistics(self) -> PoolStats:
        """The pool's counts and its hosts' resident memory, now."""
        with self._lock:
            return PoolStats(hosts=len(self._hosts), max_hosts=self.max_hosts, boots=self.boots,
                             evictions=self._evictions, sessions=self._sessions, unsuited=self._unsuited,
                             rss_bytes=sum(_rss(pid) for pid in self.pids()))

    def close(self) -> None:
        """End every warm host (idempotent; the pool boots new ones if used again)."""
        with self._lock:
            self._close()

    def __enter__(self) -> WarmPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _close(self) -> None:
        while self._hosts:
            _, host = self._hosts.popitem(last=False)
            host.close()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    found = [pid]
    for parent in found:
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as children:
                    found += [int(child) for child in children.read().split()]
        except OSError:
            continue  # ended meanwhile
    return found


def _rss(pid: int) -> int:
    """A process's resident memory in bytes (0: it ended)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class WarmBoot:
    """How to start the host of one composition: its argv, the patch layer for a control socket,
    its environment, the maker of its private DSH_HOME (that home, its own sessions root, and
    what settles what plugins made in it into the shared home) and the shared sessions root its
    session folders move to."""

    def __init__(self, argv: list[str], patch_for: Callable[[str], str], environ: dict[str, str],
                 make_home: Callable[[Path], tuple[Path, Path, SettleHome]], sessions: Path) -> None:
        self.argv = argv
        self.patch_for = patch_for
        self.environ = environ
        self.make_home = make_home
        self.sessions = sessions

    def key(self, extras: Sequence[Path]) -> str:
        """The composition this boot makes (the socket path aside)."""
        return composition_key(self.argv, self.patch_for(""), extras, self.environ)

    def start(self, key: str) -> _Host:
        """Boot the host and wait for its sidecar to connect."""
        private = Path(tempfile.mkdtemp(prefix="dsh-warm-"))
        staging: Path | None = None
        settle_home: SettleHome | None = None
        try:
            environ = dict(self.environ)
            home, staging, settle_home = self.make_home(private)
            environ["DSH_HOME"] = str(home)
            (private / "tmp").mkdir()
            environ["TMPDIR"] = str(private / "tmp")
            # The process's own cwd: plugins that write under process.cwd() write here (docs/warm-host.md).
            (private / "cwd").mkdir()
            socket_path = private / "control.sock"
            patch = private / "warm.patch.yml"
            patch.write_text(self.patch_for(str(socket_path)))
            # The task positional stays: rc.8's headless-startup parses it; the runner row is off.
            argv = [*self.argv, "--patch", str(patch), "warm-host"]
            return _Host.boot(key, argv, private / "cwd", environ, private, socket_path, staging, self.sessions,
                              settle_home)
        except BaseException:
            if settle_home is not None:
                settle_home(True)
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(private, ignore_errors=True)
            raise


_DEFAULT: WarmPool | None = None


def default_pool() -> WarmPool:
    """This process's pool (closed at exit)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = WarmPool()
        atexit.register(_DEFAULT.close)
    return _DEFAULT
