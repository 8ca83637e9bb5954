"""The line writer: order, group commit, every queued line written, failure sticky and reported once.

Writes block on ``threading.Event`` in the worker thread; the tests wait on events and on
``wait_all_tasks_blocked``, never on sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import anyio
import pytest

from dsh_sidecar.bridge.transport.line_writer import LineWriter
from dsh_sidecar.python_core.errors import SidecarError

pytestmark = pytest.mark.anyio


class Disk:
    """A blocking ``write``: records each batch once ``release`` is set; may fail instead."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[list[bytes]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def write(self, lines: Sequence[bytes]) -> None:
        self.entered.set()
        self.release.wait()
        if self.fail:
            raise SidecarError("disk full")
        self.batches.append(list(lines))


async def test_a_line_queued_behind_a_waiter_whose_lines_were_taken_is_still_written() -> None:
    disk = Disk()
    failures: list[SidecarError] = []
    writer = LineWriter(disk.write, failures.append)
    first, second = writer.submit([b"a"]), writer.submit([b"b"])
    async with anyio.create_task_group() as tg:
        tg.start_soon(writer.written, first)
        await anyio.to_thread.run_sync(disk.entered.wait)  # "a" and "b" are being written
        tg.start_soon(writer.written, second)  # its lines are taken already: it waits anyway
        await anyio.wait_all_tasks_blocked()
        third = writer.submit([b"c"])
        disk.release.set()
    assert disk.batches == [[b"a", b"b"], [b"c"]]
    assert third.done and third.failure is None and failures == []


async def test_after_a_failure_nothing_more_is_written_and_the_engine_hears_once() -> None:
    disk = Disk(fail=True)
    disk.release.set()
    failures: list[SidecarError] = []
    writer = LineWriter(disk.write, failures.append)
    lost = await writer.written(writer.submit([b"a"]))
    later = await writer.written(writer.submit([b"b"]))
    assert lost is later is writer.failure and str(lost) == "SIDECAR_ERROR: disk full"
    assert disk.batches == [] and failures == [lost]
    assert await writer.drain() is lost
