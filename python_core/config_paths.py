"""Path fields of the plugin row, checked at ``initialize`` so a bad path fails the boot by name.

Rule: every path a feature will open is checked here before any file is created: no NUL byte
(the OS would refuse it later as an ``INTERNAL`` error), no directory where a file goes, an
existing directory to write into, an existing regular file to replay from. Messages name the
field and the file's base name, never its directory (it may be absolute); the hint says the fix.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Literal

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.files import display_name

__all__ = ["check_nul", "check_path"]

Use = Literal["write", "create", "read"]


def check_nul(field: str, value: str) -> None:
    """Refuse a path holding a NUL byte.

    Raises:
        ConfigError: names ``field``.
    """
    if "\0" in value:
        raise ConfigError(field, "must not contain a NUL byte")


def check_path(field: str, path: str, use: Use) -> None:
    """Check that ``path`` (absolute, resolved) can serve as a file to ``use``.

    ``write``: the path is not a directory and its directory exists. ``create``: as ``write``,
    but missing directories are fine (the writer makes them) unless a part of the path is a
    file. ``read``: the path is an existing regular file (symlinks followed).

    Raises:
        ConfigError: names ``field`` and the file; its hint is the fix.
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
    except NotADirectoryError as exc:
        if use != "create":
            raise ConfigError(field, f"cannot be checked ({_errno(exc)}); fix the path") from None
        mode = None  # a part of the path is a file: named below
    except OSError as exc:
        raise ConfigError(field, f"cannot be checked ({_errno(exc)}); fix the path") from None
    name = display_name(path)
    if mode is not None and stat.S_ISDIR(mode):
        raise ConfigError(field, f"{name} is a directory",
                          hint=f"name a file inside it ({field}: {name}/<name>) or fix the path")
    if use == "read":
        if mode is None:
            if os.path.lexists(path):
                raise ConfigError(field, f"{name} is a dangling or looping symlink",
                                  hint=f"point {field} at the cassette file itself")
            raise ConfigError(field, f"{name} does not exist (replay reads it)", hint=_record_first(field))
        if not stat.S_ISREG(mode):
            raise ConfigError(field, f"{name} is not a regular file",
                              hint=f"point {field} at a cassette file (not a FIFO, device or socket)")
        return
    parent = os.path.dirname(path) or "."
    if use == "create":
        while not os.path.lexists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise ConfigError(field, f"the directory of {name} cannot be made (a part of its path is a file)",
                              hint="fix the path")
        return
    if not os.path.isdir(parent):
        raise ConfigError(field, f"the directory of {name} does not exist",
                          hint="create the directory (mkdir -p) or fix the path")


def _record_first(field: str) -> str:
    """The fix for a replay of a file that was never recorded."""
    section = field.partition(".")[0]
    return (
        f"record it first: run the same task once with {section}.mode: record, then replay; "
        "or fix the path"
    )


def _errno(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, "OSError")
