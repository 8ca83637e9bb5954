"""The warm host's control plane: the lines the run API (``bridge/api/warm_pool.py``) and a
warm host's sidecar (``bridge/session/warm.py``) exchange over a Unix socket, one JSON object
per line. Both sides import them from here, so neither imports the other.
"""

from __future__ import annotations

import msgspec

__all__ = ["MAX_CONTROL_LINE", "WarmReply", "WarmRun"]

# A run's config is a few kilobytes; a reply carries the session's stderr lines.
MAX_CONTROL_LINE = 16 * 1024 * 1024


class WarmRun(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One run the run API asks the warm host for: its row config, working folder and task."""

    id: int
    cwd: str
    task: str
    config: dict[str, object]


class WarmReply(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A run's outcome as a cold process would have shown it: exit code, stdout and stderr.

    ``unsuited``: the run cannot share this host (why, in words); nothing of it ran. ``ended``:
    the host is exiting under the run (what it prints as it goes belongs to the run's stderr).
    """

    id: int
    sessionId: str = ""
    exitCode: int = 0
    stdout: str = ""
    stderr: str = ""
    unsuited: str = ""
    ended: bool = False
