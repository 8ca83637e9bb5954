"""Byte streams over raw pipe file descriptors, driven by the event loop (no threads).

stdin and the protocol copy of stdout are put in non-blocking mode and read/written with
``anyio.wait_readable``/``wait_writable``: a buffered ``read(n)`` would wait for n bytes on a
pipe, and a thread per read would double the round-trip latency.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

__all__ = ["FdReceiveStream", "FdSendStream", "NowaitReceive", "claim_stdout"]

_CHUNK = 1 << 16


@runtime_checkable
class NowaitReceive(Protocol):
    """A receive stream that can also be polled without waiting."""

    def receive_nowait(self) -> bytes:
        """The bytes available now; ``b""`` when there are none (end of input included)."""
        ...


class FdReceiveStream(ByteReceiveStream):
    """Receive bytes from a pipe fd; end of file raises ``anyio.EndOfStream``."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)

    async def receive(self, max_bytes: int = _CHUNK) -> bytes:
        """Return the next available bytes (at least one)."""
        while True:
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    def receive_nowait(self) -> bytes:
        """The bytes available now; ``b""`` when there are none (``receive`` tells end of file)."""
        try:
            return os.read(self._fd, _CHUNK)
        except BlockingIOError:
            return b""

    async def aclose(self) -> None:
        """Leave the fd open: it belongs to the process."""


class FdSendStream(ByteSendStream):
    """Send bytes to a pipe fd, waiting while the pipe is full."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        os.set_blocking(fd, False)

    def send_nowait(self, item: bytes) -> int:
        """Write what the pipe takes now, without waiting; return the number of bytes written.

        Raises:
            anyio.BrokenResourceError: the reading end is closed.
        """
        try:
            return os.write(self._fd, item)
        except BlockingIOError:
            return 0
        except BrokenPipeError:
            raise anyio.BrokenResourceError from None

    async def send(self, item: bytes) -> None:
        """Write all of ``item``."""
        view = memoryview(item)
        while view:
            try:
                written = os.write(self._fd, view)
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
                continue
            except BrokenPipeError:
                raise anyio.BrokenResourceError from None
            view = view[written:]

    async def aclose(self) -> None:
        """Close the protocol fd so the peer sees end of file."""
        os.close(self._fd)


def claim_stdout() -> int:
    """Reserve the real stdout for the protocol and point fd 1 (and ``print``) at stderr.

    Returns the fd that now carries the protocol. Stray prints from any library, Python or C,
    land on stderr and can never corrupt the wire.
    """
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return protocol_fd
