"""The run report: what one sidecar connection saw, written at ``shutdown`` for the run API.

Enabled by the row key ``report`` (a path). It names the sessions the run created (so the run
API finds *this* run's logs without scanning), the structural path of every tool call, each
cassette's counts and the errors that failed the run. It is written atomically (temp file and
rename) and read back by ``bridge.api.run``; it is not a user-facing format.
"""

from __future__ import annotations

import os
import tempfile

import msgspec

__all__ = ["CallPath", "CassetteCounts", "ReportedError", "RunReport", "read_report", "write_report"]

REPORT_VERSION = 1


class CallPath(msgspec.Struct, frozen=True):
    """The sidecar's structural path of one tool call, keyed by the host's call id."""

    callId: str
    tool: str
    path: str | None
    value: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b"null"))
    """The structured output (``null`` when the tool returned none)."""


class CassetteCounts(msgspec.Struct, frozen=True, kw_only=True):
    """One cassette's outcome: counts, and whether a recording was published complete."""

    kind: str
    mode: str
    selected: int = 0
    recorded: int = 0
    consumed: int = 0
    unconsumed: int = 0
    poisoned: bool = False
    published: bool = False
    missed: int = 0
    injected: int = 0
    faults: str | None = None
    failed: int = 0
    """Recorded calls (or child runs) that ended in an error: replays serve those failures."""
    stoodUp: list[str] = msgspec.field(default_factory=list)


class ReportedError(msgspec.Struct, frozen=True):
    """A named error that failed the run."""

    code: str
    message: str


class RunReport(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the run API needs from the sidecar that the session log does not hold."""

    version: int = REPORT_VERSION
    cwd: str
    sessions: list[str]
    calls: list[CallPath]
    cassettes: list[CassetteCounts]
    errors: list[ReportedError]
    notes: list[str]
    exitCode: int


def write_report(path: str, report: RunReport) -> None:
    """Write ``report`` to ``path`` atomically."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".report-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(msgspec.json.encode(report))
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_report(path: str) -> RunReport | None:
    """Read a report; ``None`` when the sidecar never wrote one (boot failure, killed run)."""
    try:
        with open(path, "rb") as handle:
            return msgspec.json.decode(handle.read(), type=RunReport)
    except FileNotFoundError:
        return None
