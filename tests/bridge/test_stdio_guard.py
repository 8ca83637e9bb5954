"""``python -m dsh_sidecar.bridge`` owns its stdout: stray prints go to stderr, never onto the wire."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec

# Runs the real entry point with ``initialize`` patched to print (Python and fd level) after
# ``claim_stdout`` has run, as a library would.
NOISY_SIDECAR = """
import os
import dsh_sidecar.bridge.__main__ as entry
from dsh_sidecar.bridge.session.sidecar import Sidecar

original = Sidecar.initialize

async def noisy(self, params):
    print("stray print from a handler")
    os.write(1, b"stray fd 1 write from a handler\\n")
    return await original(self, params)

Sidecar.initialize = noisy
entry.main()
"""


def request(id_: int, method: str, params: dict[str, Any]) -> bytes:
    message = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    return msgspec.json.encode(message) + b"\n"


def run_sidecar(code: list[str], stdin: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    # communicate() closes stdin after writing: the sidecar must answer, then exit on EOF.
    return subprocess.run(
        [sys.executable, *code], input=stdin, capture_output=True, cwd=cwd, timeout=60, check=False
    )


def handshake(cwd: Path) -> bytes:
    initialize = {"protocolVersion": 1, "host": {}, "config": {}, "cwd": str(cwd), "pid": 1}
    return request(1, "initialize", initialize) + request(2, "shutdown", {})


def test_stray_prints_go_to_stderr_and_stdout_stays_json_rpc(tmp_path: Path) -> None:
    done = run_sidecar(["-c", NOISY_SIDECAR], handshake(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.splitlines()
    messages = [msgspec.json.decode(line) for line in lines]
    assert all(m["jsonrpc"] == "2.0" for m in messages)
    assert [m["id"] for m in messages] == [1, 2]
    assert messages[0]["result"]["protocolVersion"] == 1
    assert messages[1]["result"] == {"exitCode": 0, "errors": []}
    assert b"stray" not in done.stdout
    assert b"stray print from a handler\n" in done.stderr
    assert b"stray fd 1 write from a handler\n" in done.stderr


def test_closing_stdin_makes_the_sidecar_exit_zero(tmp_path: Path) -> None:
    done = run_sidecar(["-m", "dsh_sidecar.bridge"], b"", tmp_path)
    assert (done.returncode, done.stdout) == (0, b"")


def test_handshake_through_python_m_bridge(tmp_path: Path) -> None:
    done = run_sidecar(["-m", "dsh_sidecar.bridge"], handshake(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert [msgspec.json.decode(line)["id"] for line in done.stdout.splitlines()] == [1, 2]
