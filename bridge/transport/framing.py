"""Line framing of the protocol stream, sans-I/O: received bytes in, complete lines out."""

from __future__ import annotations

__all__ = ["LineFramer"]


class LineFramer:
    """Split received chunks into lines; a line over ``max_line`` bytes ends the framing.

    The cap counts the bytes before the newline. Once a line is over it, ``too_long`` is set and
    nothing more is framed: the rest of that line cannot be delimited, and buffering it has no
    bound.
    """

    def __init__(self, max_line: int) -> None:
        self.max_line = max_line
        self.too_long = False
        self._held: list[bytes] = []  # the start of a line whose newline has not arrived yet
        self._held_size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, in order; none after an over-long line."""
        lines: list[bytes] = []
        if self.too_long:
            return lines
        start = 0
        if self._held:
            newline = chunk.find(b"\n")
            if newline < 0:
                self._held.append(chunk)
                self._held_size += len(chunk)
                self.too_long = self._held_size > self.max_line
                return lines
            self._held.append(chunk[:newline])
            line = b"".join(self._held)
            self._held, self._held_size, start = [], 0, newline + 1
            if len(line) > self.max_line:
                self.too_long = True
                return lines
            lines.append(line)
        while (newline := chunk.find(b"\n", start)) >= 0:
            if newline - start > self.max_line:
                self.too_long = True
                return lines
            lines.append(chunk[start:newline])
            start = newline + 1
        if start < len(chunk):
            self._held.append(chunk[start:] if start else chunk)
            self._held_size = len(chunk) - start
            self.too_long = self._held_size > self.max_line
        return lines
