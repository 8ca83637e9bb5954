"""What a run composes: the profile rows it enables or leaves out, its own ``--patch`` layer,
its environment, the task text of a script, and a private DSH home for a process of its own.

Both transports (``bridge.api.transport``) start DSH from one ``Composition``: a warm host is
booted with the cold run's argv, rows and environment, so the two see the same profile.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from dsh_sidecar.bridge.api.types import Row, StalePlugin
from dsh_sidecar.bridge.host.discovery import HostNotFound
from dsh_sidecar.bridge.host.install import PACKAGE, heal_module_fallback, stale_local_plugins
from dsh_sidecar.bridge.host.staging import HOMES_DIR, SHARED_SESSIONS_VAR, STAGING_DIR
from dsh_sidecar.bridge.host.toolchain import HostEnv
from dsh_sidecar.python_core.mock import Script, encode_script, validate_script
from dsh_sidecar.python_core.subagent_cassette.host import ONE_SHOT_PATCH

__all__ = [
    "COMPILE_CACHE_DIR",
    "DORMANT_PROVIDER_ROW",
    "WARM_PATCH",
    "Composition",
    "compose",
    "patch_text",
    "private_home",
    "script_task",
    "unused_rows",
]

# Node's compile cache for runs, under the host prefix (one per installed host and Node).
COMPILE_CACHE_DIR = "node-compile-cache"
# Rows a run composes only when it can use them (docs/cold-boot.md). rc.8 mounts the pi-ai
# multi-provider adapter dormant (no route) until a `llm-pi-ai:` settings section names one;
# dormant, it only loads its provider SDKs (~0.25 s of a ~1.1 s boot).
DORMANT_PROVIDER_ROW = "llm-pi-ai"
# Where a pi-ai route can come from: the settings row (its document path) or the adapter's row.
_PROVIDER_SOURCES = (DORMANT_PROVIDER_ROW, "dsh-settings-file")
_SETTINGS_DOCUMENTS = ("settings.yaml", "settings.yml", "settings.json")
_SETTINGS_ROW = re.compile(r"""\bid["']?\s*:\s*["']?settings\b""")
# A warm host's runner replaces rc.8's one-shot runner (docs/warm-host.md).
WARM_PATCH = '- {"id": "headless-runner", "disabled": true}\n'


class Composition(msgspec.Struct, kw_only=True):
    """One run's composition: the host and profile, the caller's rows and patch files, the rows
    left out, the sidecar row's config, and the environment DSH starts with."""

    host: HostEnv
    profile: str
    rows: Sequence[Row]
    extras: list[Path]
    skipped: list[str]
    sidecar: dict[str, Any]
    one_shot: bool = False
    transparent_spawn: bool = False
    environ: dict[str, str]

    def argv(self) -> list[str]:
        """``dsh --profile P`` with the caller's patch files (the run's own layer comes last)."""
        argv = [str(self.host.dsh), "--profile", self.profile]
        for extra in self.extras:
            argv += ["--patch", os.fspath(extra)]
        return argv

    def patch(self) -> str:
        """The run's own patch layer: its sidecar row, its rows, the rows it leaves out."""
        return patch_text(self.sidecar, self.rows, self.one_shot, self.transparent_spawn, self.skipped)


def compose(host: HostEnv, profile: str, rows: Sequence[Row], patches: Sequence[str | os.PathLike[str]],
            sidecar: dict[str, Any], env: Mapping[str, str] | None, *, one_shot: bool, transparent_spawn: bool,
            skip_unused_rows: bool, compile_cache: bool) -> Composition:
    """Compose a run (and heal the profile's module links, warn of stale local plugins)."""
    extras = [Path(extra).resolve() for extra in patches]
    skipped = unused_rows(host, profile, rows, extras) if skip_unused_rows else []
    environ = host.environ({**os.environ, **(env or {})})
    if not (host.dsh_home / "profiles" / "node_modules").is_dir():
        # Made by rc.8 at a boot; a run's private home would make it where the plugins'
        # real folders cannot see it (a profile installed before install healed it).
        heal_module_fallback(host, profile)
    for package in stale_local_plugins(host.dsh_home):
        warnings.warn(StalePlugin(
            f"PLUGIN_STALE: {package} changed since `dsh-sidecar add-local-plugin` installed it; this run "
            "uses the installed copy: run `dsh-sidecar add-local-plugin <its folder>` again"
        ), stacklevel=3)
    environ[SHARED_SESSIONS_VAR] = os.path.realpath(host.dsh_home / "sessions")
    if compile_cache:
        # V8 code cache of the ~1,650 modules a boot loads: same code, less compiling.
        environ.setdefault("NODE_COMPILE_CACHE", str(host.prefix / COMPILE_CACHE_DIR))
    return Composition(host=host, profile=profile, rows=rows, extras=extras, skipped=skipped, sidecar=sidecar,
                       one_shot=one_shot, transparent_spawn=transparent_spawn, environ=environ)


def script_task(script: str | os.PathLike[str] | Mapping[str, Any] | Script, cwd: Path, wait_ms: int | None,
                scratch: list[Path]) -> str:
    if isinstance(script, (str, os.PathLike)):
        path = os.fspath(script)
    else:
        value = script if isinstance(script, Script) else validate_script(dict(script), source="script")
        # Replay reads only below the session cwd (or the sessions folder): the file goes there.
        file = cwd / f".dsh-run-{secrets.token_hex(6)}.mock.json"
        file.write_bytes(encode_script(value))
        scratch.append(file)
        path = file.name
    task = f"/mock replay {json.dumps(path)}"
    return task if wait_ms is None else f"{task} --overwrite-wait-time-ms {wait_ms}"


def unused_rows(host: HostEnv, profile: str, rows: Sequence[Row], patches: Sequence[Path]) -> list[str]:
    """The profile rows this run cannot use, so it does not compose them (docs/cold-boot.md).

    ``llm-pi-ai`` has no route unless a settings document, the profile's patch layer, the
    caller's patches or rows name it (or move the settings document): any mention keeps it.
    """
    if any(r.id in (DORMANT_PROVIDER_ROW, "settings") for r in rows):
        return []
    sources = [host.dsh_home / name for name in _SETTINGS_DOCUMENTS]
    sources += [host.dsh_home / "profiles" / profile / "cordis.patch.yml", *patches]
    for source in sources:
        try:
            text = source.read_text(errors="replace")
        except FileNotFoundError:
            continue
        except OSError:
            return []  # unreadable: it may name a route; keep the row (fail closed)
        if any(word in text for word in _PROVIDER_SOURCES) or _SETTINGS_ROW.search(text):
            return []
    return [DORMANT_PROVIDER_ROW]


def patch_text(sidecar: dict[str, Any], rows: Sequence[Row], one_shot: bool, transparent_spawn: bool,
               skipped: Sequence[str] = ()) -> str:
    # JSON is YAML flow syntax: no YAML writer needed and no quoting surprises.
    entries: list[dict[str, Any]] = [{"id": row, "disabled": True} for row in skipped]
    entries.append({"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": sidecar})
    entries += [
        {"insert": [{"id": r.id, "name": r.name, "config": r.config}]} if r.insert
        else {"id": r.id, "name": r.name, "disabled": False, "config": r.config}
        for r in rows
    ]
    text = "".join(f"- {json.dumps(entry)}\n" for entry in entries)
    if one_shot:
        text += ONE_SHOT_PATCH
    if transparent_spawn:
        # The transparent setup registers the cassette as `spawn`: the real provider moves aside.
        text += '- {"id": "subagent-spawn-in-process", "config": {"providerName": "spawn-upstream"}}\n'

    return text



def private_home(shared: Path, profile: str, private: Path, sessions: Path) -> Path:
    """A DSH_HOME for one run: links to everything of ``shared`` but the profile's ``cordis.yml``,
    and ``sessions``, its own sessions root (``bridge/host/staging.py``).

    rc.8 rewrites ``profiles/<profile>/cordis.yml`` (truncate, then write) at every boot and reads
    it back; a second run booting at that moment reads an empty file and fails to load. A run
    whose profile folder is its own, with every other entry linked, never shares that file,
    while plugins and patches stay the shared ones. What the run creates in the home is moved
    into the shared one when it ends (``bridge.host.staging.settle_home``): make ``private`` on
    the shared home's filesystem (``home_root``), so that is a rename.
    """
    if not (shared / "profiles" / profile / "node_modules" / PACKAGE).is_dir():
        raise HostNotFound(
            f"the plugin is not installed in profile {profile}; run `dsh-sidecar install --profile {profile}`"
        )
    home = private / "home"
    profile_dir = home / "profiles" / profile
    profile_dir.mkdir(parents=True)
    (shared / "sessions").mkdir(parents=True, exist_ok=True)
    for entry in shared.iterdir():
        if entry.name not in ("profiles", "sessions", STAGING_DIR, HOMES_DIR):
            (home / entry.name).symlink_to(entry)
    (home / "sessions").symlink_to(sessions)
    for entry in (shared / "profiles").iterdir():
        if entry.name != profile:
            (home / "profiles" / entry.name).symlink_to(entry)
    for entry in (shared / "profiles" / profile).iterdir():
        if entry.name != "cordis.yml":
            (profile_dir / entry.name).symlink_to(entry)
    return home
