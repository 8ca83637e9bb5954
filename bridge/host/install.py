"""Install the shim into a DSH profile the user's way: pack it, then ``dsh plugin add``.

The tarball carries ``install.json`` naming the Python that ran the install, so the row starts
the right interpreter without restating it in config. With an editable install of
dsh-sidecar that interpreter imports ``dsh_sidecar`` from the working tree: an edit
there takes effect on the next DSH run without reinstalling the plugin.
"""

from __future__ import annotations

import compileall
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import dsh_sidecar
import dsh_sidecar.bridge
import dsh_sidecar.node_shim
import dsh_sidecar.python_core
from dsh_sidecar.bridge.host.toolchain import HostEnv, HostError
from dsh_sidecar.node_shim import SHIM_DIR

__all__ = [
    "HMR_BLOCK",
    "HMR_FIX_PROFILES",
    "PACKAGE",
    "compile_sidecar",
    "heal_module_fallback",
    "install_package",
    "install_plugin",
    "pack_package",
    "record_local_plugin",
    "stale_local_plugins",
]

PACKAGE = "dsh-sidecar-shim"
_LOCAL = "local-plugins.json"
_BEGIN = "# >>> dsh-sidecar: rc.8 hmr fix (managed by `dsh-sidecar install`)"
_END = "# <<< dsh-sidecar"
# Profiles whose bundle disables the `hmr` row: `dsh --profile headless` and `dsh web` both
# exit 1 with "user patch-layer watching requires the Cordis HMR service" without the fix.
HMR_FIX_PROFILES = ("headless", "web")
HMR_BLOCK = f"""{_BEGIN}
# rc.8's launcher needs the hmr service (cordis-plugin-hmr pinned to 1.0.17).
- id: hmr
  disabled: false
  config:
    root: []
{_END}
"""


def pack_package(src: Path, out_dir: Path, extra: dict[str, bytes] | None = None) -> Path:
    """Pack the ``files`` of the package at ``src`` (plus ``extra``) as ``pnpm pack`` would.

    The tarball name carries a content hash, so a changed package is a new dependency.
    """
    manifest = json.loads((src / "package.json").read_text())
    members = _members(src, extra)
    digest = _digest(members)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{manifest['name']}-{manifest['version']}-{digest}.tgz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(members[name])
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(members[name]))
    # gzip stamps the current second into its header unless told otherwise: two packs of the same
    # files a second apart would differ.
    target.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return target


def _members(src: Path, extra: dict[str, bytes] | None) -> dict[str, bytes]:
    """The files a pack of ``src`` holds: ``package.json`` and its ``files`` (plus ``extra``)."""
    manifest = json.loads((src / "package.json").read_text())
    names = ["package.json", *manifest.get("files", [])]
    members = {name: (src / name).read_bytes() for name in names if (src / name).is_file()}
    members.update(extra or {})
    return members


def _digest(members: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(members):
        digest.update(name.encode() + b"\0" + members[name] + b"\0")
    return digest.hexdigest()[:12]


def stale_local_plugins(dsh_home: Path) -> list[str]:
    """The packages installed with ``add-local-plugin`` whose source changed since (by name).

    A source folder that is gone (a temporary build, a moved checkout) is not stale: there is
    nothing newer to install, and the installed copy is what every run uses.
    """
    try:
        installed = json.loads((dsh_home / "dsh-sidecar" / _LOCAL).read_text())
    except (OSError, ValueError):
        return []
    stale = []
    for package, entry in sorted(installed.items()) if isinstance(installed, dict) else ():
        try:
            source = Path(entry["source"])
            if not (source / "package.json").is_file():
                continue
            current = _digest(_members(source, None))
        except (OSError, ValueError, KeyError, TypeError):
            current = None
        if current != entry.get("digest"):
            stale.append(package)
    return stale


def record_local_plugin(dsh_home: Path, src: Path) -> None:
    """Remember where a local plugin came from and what it held, for ``stale_local_plugins``."""
    path = dsh_home / "dsh-sidecar" / _LOCAL
    try:
        installed = json.loads(path.read_text())
    except (OSError, ValueError):
        installed = {}
    package = json.loads((src / "package.json").read_text())["name"]
    installed[package] = {"source": str(src), "digest": _digest(_members(src, None))}
    path.write_text(json.dumps(installed, indent=2, sort_keys=True) + "\n")


def _installed(profile_dir: Path, package: str) -> bool:
    try:
        manifest = json.loads((profile_dir / "package.json").read_text())
    except (OSError, ValueError):
        return False
    return package in manifest.get("dependencies", {})


def _ensure_hmr_fix(patch_file: Path) -> None:
    text = patch_file.read_text() if patch_file.exists() else ""
    if _BEGIN in text:
        return
    lines = text.splitlines()
    content = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if content == ["[]"]:
        # The initialized layer is an empty flow list; a block list cannot follow it.
        lines = [line for line in lines if line.strip() != "[]"]
    body = "\n".join(lines).rstrip("\n")
    patch_file.write_text((body + "\n\n" if body else "") + HMR_BLOCK)


def _dsh(env: HostEnv, args: list[str], cwd: Path) -> None:
    proc = subprocess.run(
        [str(env.dsh), *args], env=env.environ(), cwd=cwd, capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise HostError(f"`dsh {' '.join(args[:3])} ...` failed with exit {proc.returncode} (output above)")


def install_package(
    env: HostEnv, profile: str, src: Path, extra: dict[str, bytes] | None = None
) -> Path:
    """Pack the package at ``src`` and install it with ``dsh plugin add``; return the profile dir.

    Re-installing removes the previous version first: the rc.8 lockfile otherwise keeps
    pointing at the old tarball.
    """
    package = json.loads((src / "package.json").read_text())["name"]
    profile_dir = env.dsh_home / "profiles" / profile
    store = env.dsh_home / "dsh-sidecar"
    old = sorted(store.glob(f"{package}-*.tgz")) if store.exists() else []
    tgz = pack_package(src, store, extra)
    if _installed(profile_dir, package):
        _dsh(env, ["plugin", "--profile", profile, "remove", package], env.dsh_home)
    _dsh(env, ["plugin", "--profile", profile, "add", str(tgz)], env.dsh_home)
    heal_module_fallback(env, profile)
    for stale in old:
        if stale != tgz:
            stale.unlink(missing_ok=True)
    return profile_dir


def heal_module_fallback(env: HostEnv, profile: str) -> None:
    """Have rc.8 create ``$DSH_HOME/profiles/node_modules``, its flat fallback for the in-box packages.

    rc.8 makes these links only when it boots a profile (``healProfilesModuleFallback``), never at
    ``dsh plugin add``. An out-of-tree plugin resolves its peers (``@deepseek-ai/schemastery``, ...)
    from its real folder through them, so a profile that never booted fails to load. A config
    dump runs the same heal without starting anything.
    """
    _dsh(env, ["--profile", profile, "--dump-default-config"], env.dsh_home)


def compile_sidecar() -> None:
    """Write the bytecode of ``dsh_sidecar`` and its parts (wherever they are imported from).

    The sidecar starts inside every DSH boot; where ``PYTHONDONTWRITEBYTECODE`` is set, Python
    would otherwise compile these sources on each start (pip already compiled the dependencies
    when it installed them). Written explicitly, it is written whatever the variable says.
    """
    # Each part separately: in a checkout they are links, which compile_dir does not follow.
    compileall.compile_file(dsh_sidecar.__file__ or "", quiet=2)
    for package in (dsh_sidecar.bridge, dsh_sidecar.python_core, dsh_sidecar.node_shim):
        for directory in package.__path__:
            compileall.compile_dir(directory, quiet=2)


def install_plugin(env: HostEnv, profile: str, python: list[str] | None = None) -> Path:
    """Install the shim into ``profile``, recording which Python its row starts.

    For the ``headless`` and ``web`` profiles (both bundles disable the ``hmr`` row the rc.8
    launcher needs) the hmr fix is added to the profile's own ``cordis.patch.yml`` inside a
    managed block, once. The sidecar's own modules are compiled to bytecode first.
    """
    compile_sidecar()
    install_json = (json.dumps({"python": python or [sys.executable]}, indent=2) + "\n").encode()
    profile_dir = install_package(env, profile, SHIM_DIR, {"install.json": install_json})
    if profile in HMR_FIX_PROFILES:
        _ensure_hmr_fix(profile_dir / "cordis.patch.yml")
    return profile_dir
