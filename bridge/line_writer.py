"""The store layer of a recording: sealed lines written off the reader, in order, durably.

The engines decide in the reader and hand over sealed lines; ``submit`` queues them at once (so
the file order is the decision order) and ``written`` waits until they are on disk. The writes
and their ``fsync`` run on an anyio worker thread, one batch at a time: every line queued while
a batch was being written goes out in the next batch with a single ``fsync`` (group commit).
A line is durable before ``written`` returns for it, so an answer sent after it depends only on
durable lines. After the first failure nothing more is written (a later line would break the
hash chain): every waiting and later ticket gets that failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio

from python_core.errors import SidecarError

__all__ = ["LineWriter", "Ticket"]


class Ticket:
    """One ``submit``: done once its lines were written, or failed with ``failure``."""

    __slots__ = ("done", "failure")

    def __init__(self) -> None:
        self.done = False
        self.failure: SidecarError | None = None


class LineWriter:
    """Writes one cassette's lines with ``write`` (blocking, durable on return) off the reader."""

    def __init__(self, write: Callable[[Sequence[bytes]], None]) -> None:
        self._write = write
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

    async def written(self, ticket: Ticket) -> SidecarError | None:
        """Wait until ``ticket``'s lines are durable; return the failure that lost them, if any."""
        async with self._lock:
            if not ticket.done:
                lines, self._lines = self._lines, []
                tickets, self._tickets = self._tickets, []
                if lines and self.failure is None:
                    try:
                        await anyio.to_thread.run_sync(self._write, lines)
                    except SidecarError as error:
                        self.failure = error
                for waiting in tickets:
                    waiting.done = True
                    waiting.failure = self.failure
        return ticket.failure

    async def drain(self) -> SidecarError | None:
        """Wait until every submitted line is durable; return the first failure, if any."""
        return await self.written(self.submit(()))
