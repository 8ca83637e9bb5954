"""A recording's writes run off the reader: other requests are answered while a write is blocked.

The real ``Sidecar`` records a tool cassette; its line writer is wrapped so that a write blocks
on a ``threading.Event`` in the worker thread, which the test releases. Synchronisation is by
events and answers, never sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from dsh_sidecar.bridge.session.sidecar import Sidecar
from dsh_sidecar.bridge.transport.server import Server
from dsh_sidecar.python_core.tool_cassette.errors import CassetteIOError

# Helpers of the server tests (importlib mode: import the module by its path).
from tests.bridge.test_server import Peer, serving

pytestmark = pytest.mark.anyio

SELECTED = {"path": "root/0", "tool": "weather_lookup", "args": '{"city":"Paris"}'}
OK = {"isError": False, "content": [], "value": {"sky": "sunny"}}


def execute(id_: int, tool: str = "weather_lookup") -> dict[str, Any]:
    return {"id": id_, "method": "tools/execute",
            "params": {**SELECTED, "tool": tool, "handle": f"h{id_}", "callId": f"c{id_}"}}


class BlockedWrites:
    """Wraps a blocking line writer: each write announces itself, then waits for ``release``."""

    def __init__(self, write: Callable[[Sequence[bytes]], None]) -> None:
        self._write = write
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def __call__(self, lines: Sequence[bytes]) -> None:
        self.entered.set()
        self.release.wait()
        self.batches.append(len(lines))
        self._write(lines)


async def start(peer: Peer, cwd: Path) -> None:
    config = {"toolCassette": {"mode": "record", "file": "c.jsonl", "include": ["weather_*"]}}
    await peer.send(id="init", method="initialize",
                    params={"protocolVersion": 1, "host": {}, "config": config, "cwd": str(cwd), "pid": 1})
    assert "result" in await peer.read()


def blocked(sidecar: Sidecar) -> BlockedWrites:
    assert sidecar.tools is not None and sidecar.tools.writer is not None
    writer = sidecar.tools.writer
    wrapped = BlockedWrites(writer._write)
    writer._write = wrapped
    return wrapped


async def test_cancel_and_other_calls_are_answered_while_a_recorded_line_is_being_written(
    tmp_path: Path,
) -> None:
    sidecar = Sidecar()
    async with serving(Server(sidecar), initialize=False) as peer:
        await start(peer, tmp_path)
        writes = blocked(sidecar)
        try:
            await peer.send(**execute(1))
            await anyio.to_thread.run_sync(writes.entered.wait)
            # The fsync of call 1 is in progress: the reader still answers everything else.
            await peer.send(id="c", method="$/cancelRequest", params={"id": 42})
            assert await peer.read() == {"jsonrpc": "2.0", "id": "c", "result": None}
            await peer.send(**execute(2, tool="unselected"))
            assert (await peer.read())["id"] == 2
            # Two more recorded calls queue behind the blocked write, in arrival order.
            await peer.send(**execute(3))
            await peer.send(**execute(4))
            await peer.send(id="c2", method="$/cancelRequest", params={"id": 43})
            assert (await peer.read())["id"] == "c2"
        finally:
            writes.release.set()
        answers = {(m := await peer.read())["id"]: m["result"]["action"] for _ in range(3)}
        assert answers == {1: "next", 3: "next", 4: "next"}
        # One batch for call 1, one fsync for calls 3 and 4 together (group commit), whose
        # answers leave together in one write.
        assert writes.batches == [1, 2]
        together = [w for w in peer.server_streams[1].writes if b'"id":3' in w or b'"id":4' in w]
        assert len(together) == 1 and together[0].count(b"\n") == 2
        lines = (tmp_path / "c.jsonl.partial").read_bytes().splitlines()
        starts = [msgspec.json.decode(line) for line in lines[1:]]
        assert [(s["ordinal"], s["path"]) for s in starts] == [(0, "root/0"), (1, "root/0"), (2, "root/0")]
        await peer.send(id="end", method="shutdown", params={})
        assert (await peer.read())["id"] == "end"
        await peer.close()


async def test_a_failed_write_refuses_the_waiting_call_and_fails_the_recording(tmp_path: Path) -> None:
    sidecar = Sidecar()
    async with serving(Server(sidecar), initialize=False) as peer:
        await start(peer, tmp_path)
        assert sidecar.tools is not None and sidecar.tools.writer is not None

        def fail(_lines: Sequence[bytes]) -> None:
            raise CassetteIOError("write", "c.jsonl.partial", "ENOSPC")

        sidecar.tools.writer._write = fail
        await peer.send(**execute(1))
        answer = await peer.read()
        assert answer["result"]["action"] == "refuse"
        assert answer["result"]["code"] == "CASSETTE_IO"
        await peer.send(id="end", method="shutdown", params={})
        status = (await peer.read())["result"]
        assert status["exitCode"] == 1
        assert status["errors"][0] == "CASSETTE_IO: cannot write c.jsonl.partial: ENOSPC"
        assert not (tmp_path / "c.jsonl").exists()
        await peer.close()
