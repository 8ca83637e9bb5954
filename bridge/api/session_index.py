"""The sessions of the last pytest run: which test ran which session, and in which folder.

A pytest run's sessions run in its temporary folders, where ``dsh-sidecar sessions list`` in
the project does not look; the plugin appends a line per ``dsh.run`` to
``<rootdir>/.dsh-sidecar/pytest-sessions.jsonl`` (emptied when a run starts), and
``sessions list --last-run`` / ``--test NODEID`` read it. The lines hold ids and folders only.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

__all__ = ["SESSION_INDEX", "IndexedRun", "append_run"]

SESSION_INDEX = Path(".dsh-sidecar") / "pytest-sessions.jsonl"


class IndexedRun(msgspec.Struct, frozen=True):
    """One ``dsh.run`` of the last pytest run: its test, its session (``None``: refused before
    one started), the folder it ran in and its exit code."""

    nodeid: str
    session: str | None
    cwd: str
    exit: int


def append_run(index: Path, run: IndexedRun) -> None:
    """Append ``run`` to ``index``: one short line, so xdist workers append to one file unlocked."""
    index.parent.mkdir(exist_ok=True)
    with open(index, "ab") as out:
        out.write(msgspec.json.encode(run) + b"\n")
