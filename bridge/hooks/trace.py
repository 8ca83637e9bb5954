"""A structural JSONL trace of forwarded hooks (row config ``trace: <path>``).

One line per hook the sidecar saw: method, tool, path, handle and the decision. Never
arguments, results or texts, so a trace can be attached to a bug report; except with
``traceValues: true`` (the run API's trace, docs/trace.md), where a model mismatch's filtered
request views are written too, for the trace page to show beside each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import msgspec

__all__ = ["Trace"]


class Trace:
    """Append-only trace file; a no-op when no path is configured."""

    def __init__(self, path: str | None, *, values: bool = False) -> None:
        self._file: IO[bytes] | None = None
        self.values = values and path is not None
        """Whether values may be written (``traceValues``)."""
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "ab", buffering=0)

    @property
    def enabled(self) -> bool:
        """Whether a path is configured (a disabled trace writes nothing)."""
        return self._file is not None

    def write(self, method: str, **fields: Any) -> None:
        """Record one hook."""
        if self._file is not None:
            self._file.write(msgspec.json.encode({"method": method, **fields}) + b"\n")

    def close(self) -> None:
        """Close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None
