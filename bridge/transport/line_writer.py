"""The store layer of a recording: sealed lines written off the reader, in order, durably.

The engines decide in the reader and hand over sealed lines; ``submit`` queues them at once (so
the file order is the decision order) and ``flush`` makes everything queued so far durable. The
writes and their ``fsync`` run on an anyio worker thread, one batch at a time: every line queued
while a batch was being written goes out in the next batch with a single ``fsync`` (group
commit). A ticket is done only once its lines are durable, so an answer sent after it depends
only on durable lines. After the first failure nothing more is written (a later line would
break the hash chain): every waiting and later ticket gets that failure, and ``on_failure``
hears of it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio

from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["LineWriter", "Ticket"]


class Ticket:
    """One ``submit``: done once its lines were written, or failed with ``failure``."""

    __slots__ = ("done", "failure")

    def __init__(self) -> None:
        self.done = False
        self.failure: SidecarError | None = None


class LineWriter:
    """Writes one cassette's lines with ``write`` (blocking, durable on return) off the reader."""

    def __init__(self, write: Callable[[Sequence[bytes]], None],
                 on_failure: Callable[[SidecarError], None]) -> None:
        self._write = write
        self._on_failure = on_failure
        self._lines: list[bytes] = []
        self._tickets: list[Ticket] = []
        self._lock = anyio.Lock()
        self.failure: SidecarError | None = None

    def submit(self, lines: Sequence[bytes]) -> Ticket:
        """Queue ``lines`` after everything submitted before; never blocks."""
        ticket = Ticket()
        self._lines.extend(lines)
        self._tickets.append(ticket)
        return ticket

    async def flush(self) -> None:
        """Return once every ticket submitted before the call is done (written or failed)."""
        async with self._lock:
            # A holder before us wrote what was queued when it took the lock's turn; what was
            # submitted after that is ours to write, whoever submitted it.
            if not self._tickets:
                return
            lines, self._lines = self._lines, []
            tickets, self._tickets = self._tickets, []
            if lines and self.failure is None:
                try:
                    await anyio.to_thread.run_sync(self._write, lines)
                except SidecarError as error:
                    self.failure = error
                    self._on_failure(error)
            for ticket in tickets:
                ticket.done = True
                ticket.failure = self.failure

    async def written(self, ticket: Ticket) -> SidecarError | None:
        """Wait until ``ticket``'s lines are durable; return the failure that lost them, if any."""
        if not ticket.done:
            await self.flush()
        return ticket.failure

    async def drain(self) -> SidecarError | None:
        """Wait until every submitted line is durable; return the first failure, if any."""
        return await self.written(self.submit(()))
