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

The private ``DSH_HOME`` itself lives beside them too (``HOMES_DIR``): what a plugin creates in it
during a run (a store made on first use through rc.8's ``dshHomePath``) moves into the shared
home when the run ends (``settle_home``), as it would have been made there by a plain ``dsh``;
only the files that are the run's own stay private (its profile's ``cordis.yml``, its sessions).
"""


from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["HOMES_DIR", "SHARED_SESSIONS_VAR", "STAGING_DIR", "home_root", "settle", "settle_home", "staging_root"]

# Beside `sessions` in the shared DSH_HOME: renames into it stay on one filesystem.
STAGING_DIR = ".run-sessions"
# Beside it, the runs' private homes: what a plugin makes in one moves into the shared home by rename.
HOMES_DIR = ".run-homes"
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


def home_root(shared_home: Path, token: str) -> Path:
    """The folder (not yet made) holding the private DSH_HOME of one run (or warm host) ``token``."""
    return shared_home / HOMES_DIR / token


def settle_home(home: Path, shared: Path, profile: str, *, keep_links: bool) -> list[str]:
    """Move what a run created in its private ``home`` into the ``shared`` home; the moved paths.

    Created: an entry of ``home`` (or of its ``profiles`` and ``profiles/<profile>`` folders) that
    is not a link to the shared home, except the run's own ``profiles/<profile>/cordis.yml``
    (rc.8 rewrites it at every boot; ``bridge/api/compose.py``). An entry the shared home got
    meanwhile from another run is merged into (its files replaced: the last writer wins, as with
    two plain ``dsh`` runs). ``keep_links``: a link takes each moved entry's place, so a process
    still running (a warm host) finds its state where it left it, and links what the shared home
    gained meanwhile (another run's settled state).
    """
    moved: list[str] = []
    for folder, skip in ((Path(), ("profiles", "sessions", STAGING_DIR, HOMES_DIR)), (Path("profiles"), (profile,)),
                         (Path("profiles") / profile, ("cordis.yml",))):
        try:
            entries = list(os.scandir(home / folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            if entry.name in skip or entry.is_symlink():
                continue
            _merge(Path(entry.path), shared / folder / entry.name)
            if keep_links:
                Path(entry.path).symlink_to(shared / folder / entry.name)
            moved.append(str(folder / entry.name))
        if keep_links:
            # What was removed from the shared home meanwhile is gone here too (a dangling link
            # would fail the plugin's `mkdir -p` with ENOENT, where a plain `dsh` creates it anew).
            for entry in entries:
                if entry.is_symlink() and not os.path.exists(entry.path):
                    os.unlink(entry.path)
            # What other runs settled meanwhile: a plain `dsh` would see it too.
            for entry in os.scandir(shared / folder):
                mine = home / folder / entry.name
                if entry.name not in skip and not (mine.exists() or mine.is_symlink()):
                    mine.symlink_to(entry.path)
    return moved


def _merge(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``; into an existing folder ``target``, entry by entry."""
    if target.is_dir() and not target.is_symlink() and source.is_dir():
        for child in os.scandir(source):
            _merge(Path(child.path), target / child.name)
        shutil.rmtree(source, ignore_errors=True)
        return
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif source.is_dir() and (target.exists() or target.is_symlink()):
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(source, target)
