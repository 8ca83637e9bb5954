"""Fuzz: garbled control lines on a warm host's socket open a session or fail by name (moved from
``tests/bridge/test_warm.py``). ``DSH_FUZZ_SEED`` picks the seed (default 23, printed)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import anyio
import msgspec
import pytest

from dsh_sidecar.bridge.transport.protocol import ShutdownParams
from dsh_sidecar.python_core.errors import ProtocolError
from tests.bridge.test_warm import Control, _connected, _next, _run

pytestmark = pytest.mark.anyio
SEED = int(os.environ.get("DSH_FUZZ_SEED", "23"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _garbled(rng: random.Random, tmp_path: Path) -> bytes:
    good = msgspec.json.encode(_run(tmp_path, rng.randrange(1 << 31), {"trace": "t.jsonl"}))
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))).replace(b"\n", b"") + b"\n"
    if kind == 1:
        cut = rng.randrange(len(good))
        return good[:cut] + good[cut + 1:] + b"\n"
    if kind == 2:
        return b'{"id": "x", "cwd": 1, "task": null, "config": []}\n'
    if kind == 3:
        return b'{"id": 1, "cwd": "/", "task": "t", "config": {}, "extra": 1}\n'
    return good + b"\n"


async def test_fuzz_control_lines_open_a_session_or_fail_by_name(tmp_path: Path) -> None:
    # 300 lines, each through a fresh sidecar (a refused line ends that host's runner); the
    # socket's write side closes after the line, so a run answered on the socket ends in stop.
    print(f"warm control line fuzz seed {SEED} (set DSH_FUZZ_SEED to replay)")
    rng = random.Random(SEED)
    outcomes = {"session": 0, "answered": 0, "refused": 0}
    for i in range(300):
        sidecar, stream = await _connected(tmp_path, f"f{i}.sock")
        async with stream:
            await stream.send(_garbled(rng, tmp_path))
            await stream.send_eof()
            with anyio.fail_after(10):
                try:
                    job = await _next(sidecar)
                except ProtocolError as error:
                    assert str(error).startswith("PROTOCOL_ERROR: warm: the control line is not a run")
                    outcomes["refused"] += 1
                else:
                    if job.stop:
                        # Answered on the socket: a named line and its fix, exit 1, no session.
                        reply = await Control(stream).reply()
                        assert reply.exitCode == 1 and not reply.sessionId, reply
                        assert reply.stderr.startswith("dsh-sidecar: ") and reply.stderr.split(":")[1].strip().isupper()
                        outcomes["answered"] += 1
                    else:
                        assert job.sessionId.startswith("session-")
                        outcomes["session"] += 1
                await sidecar.shutdown(ShutdownParams())
    assert min(outcomes.values()) > 10, (SEED, outcomes)
