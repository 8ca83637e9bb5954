"""Path fields of the plugin row, checked at ``initialize`` so a bad path fails the boot by name.

Rule: every path a feature will open is checked here before any file is created: no NUL byte
(the OS would refuse it later as an ``INTERNAL`` error), no directory where a file goes, an
existing directory to write into, an existing regular file to replay from. Messages name the
field and the fix, never the path (it may be absolute).
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Literal

from python_core.errors import ConfigError

__all__ = ["check_nul", "check_path"]

Use = Literal["write", "read"]


def check_nul(field: str, value: str) -> None:
    """Refuse a path holding a NUL byte.

    Raises:
        ConfigError: names ``field``.
    """
    if "\0" in value:
        raise ConfigError(field, "must not contain a NUL byte")


def check_path(field: str, path: str, use: Use) -> None:
    """Check that ``path`` (absolute, resolved) can serve as a file to ``use``.

    ``write``: the path is not a directory and its directory exists. ``read``: the path is an
    existing regular file (symlinks followed).

    Raises:
        ConfigError: names ``field`` and the fix.
    """
    check_nul(field, path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(field, "holds a lone surrogate; no file can have that name") from None
    try:
        mode: int | None = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise ConfigError(field, f"cannot be checked ({_errno(exc)}); fix the path") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise ConfigError(field, "is a directory; name a file inside it")
    if use == "read":
        if mode is None:
            if os.path.lexists(path):
                raise ConfigError(field, "is a dangling or looping symlink; fix the path")
            raise ConfigError(field, "no such file; record it first (mode: record) or fix the path")
        if not stat.S_ISREG(mode):
            raise ConfigError(field, "is not a regular file; name a cassette file")
        return
    parent = os.path.dirname(path) or "."
    if not os.path.isdir(parent):
        raise ConfigError(field, "its directory does not exist; create it or fix the path")


def _errno(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "OSError")
