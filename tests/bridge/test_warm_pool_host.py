"""The run API's end of one warm host (``api/warm_pool._Host``) when the host goes away mid-run."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from dsh_sidecar.bridge.api.warm_pool import WarmOutcome, _Host
from dsh_sidecar.bridge.transport.control import WarmRun


def test_a_host_that_resets_the_control_socket_mid_run_is_a_lost_run_not_a_stack(tmp_path: Path) -> None:
    # Caught by a clean-clone run: a host that died with a run's line unread reset the socket, and
    # recv raised ConnectionResetError out of run() instead of the run failing by its exit.
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    stderr = tmp_path / "host.stderr"
    stderr.write_bytes(b"")
    ended: list[bool] = []
    host = _Host("key", tmp_path / "private", proc, ours, stderr, tmp_path / "staging", tmp_path / "sessions",
                 ended.append)
    offset = host.send(WarmRun(id=1, cwd=str(tmp_path), task="t", config={}))
    assert offset == 0
    stderr.write_bytes(b"the host's last words\n")
    theirs.close()  # with the run's line unread: the kernel resets our end
    assert proc.stdin is not None
    proc.stdin.close()  # and the process ends
    outcome = host.receive(1, offset, timeout=30)
    assert outcome == WarmOutcome(exit_code=1, stdout="", stderr="the host's last words\n")
    assert ended == [True]  # the host was closed: its home settled one last time
