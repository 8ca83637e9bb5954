"""Where a run's session logs are written while it runs, and their move into the shared folder.

rc.8's JSONL store resolves a session id by scanning every project folder of its sessions root
(``findLog``: four ``stat`` calls per project folder, on every durability checkpoint and flush).
A test suite makes a project folder per test, so against the shared ``$DSH_HOME/sessions`` each
session cost grew with every test before it: measured here, 54-79 ms per warm session with an
empty root and 1.3-1.5 s with 1,725 project folders. A run's private ``DSH_HOME`` therefore gets
a sessions root of its own (a staging folder beside the shared one, on the same filesystem), and
its session folders move into the shared root when the run ends, where the run API, ``dsh-sidecar
sessions`` and every later run find them. The mock's ``/mock replay`` still reads the shared root
(``SHARED_SESSIONS_VAR``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["SHARED_SESSIONS_VAR", "STAGING_DIR", "settle", "staging_root"]

# Beside `sessions` in the shared DSH_HOME: renames into it stay on one filesystem.
STAGING_DIR = ".run-sessions"
# The shared sessions root, for the sidecar (a replay may read a log stored there).
SHARED_SESSIONS_VAR = "DSH_SIDECAR_SHARED_SESSIONS"


def staging_root(shared_home: Path, token: str) -> Path:
    """A new, empty sessions root for one run (or one warm host) named ``token``."""
    root = shared_home / STAGING_DIR / token
    root.mkdir(parents=True)
    return root


def settle(staging: Path, sessions: Path) -> None:
    """Move every session folder of ``staging`` into ``sessions`` (project folders merged).

    A session folder already in ``sessions`` is kept (a late write after its move made a second
    copy); the rest of ``staging`` stays for the next settle, empty project folders go.
    """
    try:
        projects = list(os.scandir(staging))
    except FileNotFoundError:
        return
    for project in projects:
        if not project.is_dir(follow_symlinks=False):
            continue
        target = sessions / project.name
        target.mkdir(parents=True, exist_ok=True)
        for session in os.scandir(project.path):
            destination = target / session.name
            if destination.exists():
                shutil.rmtree(session.path, ignore_errors=True)
                continue
            os.replace(session.path, destination)
        try:
            os.rmdir(project.path)
        except OSError:
            pass  # a session folder made meanwhile stays for the next settle
