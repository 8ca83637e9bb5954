"""Install the shim into a DSH profile the user's way: pack it, then ``dsh plugin add``.

The tarball carries ``install.json`` naming the Python that ran the install, so the row starts
the right interpreter without restating it in config. With an editable install of
dsh-sidecar that interpreter imports ``bridge``/``python_core`` from the working tree: an edit
there takes effect on the next DSH run without reinstalling the plugin.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

from bridge.hostenv import HostEnv, HostError
from node_shim import SHIM_DIR

__all__ = ["HMR_BLOCK", "PACKAGE", "install_plugin", "pack_shim"]

PACKAGE = "dsh-sidecar-shim"
_FILES = ("package.json", "index.js", "rpc.js", "cordis.patch.yml", "README.md")
_BEGIN = "# >>> dsh-sidecar: rc.8 hmr fix (managed by `dsh-sidecar install`)"
_END = "# <<< dsh-sidecar"
HMR_BLOCK = f"""{_BEGIN}
# rc.8's headless launcher needs the hmr service (cordis-plugin-hmr pinned to 1.0.17).
- id: hmr
  disabled: false
  config:
    root: []
{_END}
"""


def pack_shim(out_dir: Path, python: list[str]) -> Path:
    """Write the shim tarball (``package/`` layout, as ``pnpm pack`` makes) into ``out_dir``."""
    members: dict[str, bytes] = {name: (SHIM_DIR / name).read_bytes() for name in _FILES}
    members["install.json"] = (json.dumps({"python": python}, indent=2) + "\n").encode()
    digest = hashlib.sha256()
    for name in sorted(members):
        digest.update(name.encode() + b"\0" + members[name] + b"\0")
    version = json.loads(members["package.json"])["version"]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{PACKAGE}-{version}-{digest.hexdigest()[:12]}.tgz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(members[name])
            info.mode = 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(members[name]))
    target.write_bytes(buffer.getvalue())
    return target


def _installed(profile_dir: Path) -> bool:
    try:
        manifest = json.loads((profile_dir / "package.json").read_text())
    except (OSError, ValueError):
        return False
    return PACKAGE in manifest.get("dependencies", {})


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


def install_plugin(env: HostEnv, profile: str, python: list[str] | None = None) -> Path:
    """Pack the shim and install it into ``profile``; return the profile directory.

    Re-installing removes the previous version first (the rc.8 lockfile otherwise keeps
    pointing at the old tarball). For the ``headless`` profile the rc.8 hmr fix is added to
    the profile's own ``cordis.patch.yml`` inside a managed block, once.
    """
    profile_dir = env.dsh_home / "profiles" / profile
    store = env.dsh_home / "dsh-sidecar"
    old = sorted(store.glob(f"{PACKAGE}-*.tgz")) if store.exists() else []
    tgz = pack_shim(store, python or [sys.executable])
    if _installed(profile_dir):
        _dsh(env, ["plugin", "--profile", profile, "remove", PACKAGE], env.dsh_home)
    _dsh(env, ["plugin", "--profile", profile, "add", str(tgz)], env.dsh_home)
    for stale in old:
        if stale != tgz:
            stale.unlink(missing_ok=True)
    if profile == "headless":
        _ensure_hmr_fix(profile_dir / "cordis.patch.yml")
    return profile_dir
