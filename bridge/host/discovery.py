"""Finding the DSH host a command or a run uses, the way git finds its repository."""

from __future__ import annotations

import os
from pathlib import Path

from dsh_sidecar.bridge.host.toolchain import HostEnv, host_env
from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["HOST_ENV_VAR", "HostNotFound", "default_dsh_home", "find_host"]

HOST_ENV_VAR = "DSH_SIDECAR_HOST"


class HostNotFound(SidecarError):
    """No installed DSH host was found."""

    code = "HOST_NOT_FOUND"


def default_dsh_home() -> Path:
    """The DSH home ``dsh-sidecar sessions`` reads without ``--dsh-home``: ``$DSH_HOME``, else the
    home of the host ``find_host`` finds from the current folder, else ``~/.dsh`` (as rc.8)."""
    home = os.environ.get("DSH_HOME", "").strip()
    if home:
        return Path(home)
    try:
        return find_host().dsh_home
    except HostNotFound:
        return Path.home() / ".dsh"


def find_host(start: str | os.PathLike[str] | None = None) -> HostEnv:
    """Find the DSH host the way git finds its repository.

    ``$DSH_SIDECAR_HOST`` when set; else the first ``.host`` with ``bin/dsh`` in ``start``, the
    current directory or one of their parents, else beside this checkout (editable install).
    ``DSH_HOME`` is ``$DSH_HOME`` when set, else the host's own ``dsh-home``.

    Raises:
        HostNotFound: nothing installed there; the message says how to install it.
    """
    explicit = os.environ.get(HOST_ENV_VAR, "").strip()
    if explicit:
        candidates = [Path(explicit)]
    else:
        candidates = []
        for base in (Path(start or os.getcwd()).resolve(), Path.cwd().resolve()):
            candidates += [p / ".host" for p in (base, *base.parents)]
        candidates.append(Path(__file__).resolve().parents[2] / ".host")
    home = os.environ.get("DSH_HOME", "").strip()
    for prefix in candidates:
        if (prefix / "bin" / "dsh").exists():
            return host_env(prefix, Path(home) if home else None)
    where = f"${HOST_ENV_VAR}" if explicit else "a .host folder here or in a parent folder"
    raise HostNotFound(
        f"no DSH host at {where}; install one with `dsh-sidecar host install` and "
        "`dsh-sidecar install --profile headless` (or set DSH_SIDECAR_HOST to its prefix)"
    )

