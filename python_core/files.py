"""Opening the files users name: regular files only, never a hang, names safe to print.

Rule: every reader of a user-named file (the three CLIs, cassette loaders, replay sources)
opens it here. The open never blocks (``O_NONBLOCK``: a FIFO with no writer would wait
forever), ``fstat`` on the open descriptor decides (no race with a swapped path), and each
refusal has one wording, so a symlink loop or a directory reads the same in every tool. The
caller wraps ``FileRefused`` in its own named error.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from typing import BinaryIO

from dsh_sidecar.python_core.errors import printable

__all__ = ["FileRefused", "display_name", "open_regular", "reason_of"]

_REASONS = {
    errno.ENOENT: "no such file",
    errno.ELOOP: "is a symlink loop",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.ENOTDIR: "a directory in its path is a file",
    errno.ENAMETOOLONG: "the name is too long",
    errno.EISDIR: "is a directory",
}


class FileRefused(Exception):
    """A user-named file cannot be read; ``reason`` is one path-free phrase."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def display_name(path: str | os.PathLike[str], default: str = "file") -> str:
    """Return the name messages show: the base name, never a directory, control chars escaped."""
    name = os.path.basename(os.fspath(path).rstrip("/"))
    return printable(name) if name else default


def reason_of(exc: OSError) -> str:
    """Describe an OS failure in one path-free phrase."""
    code = exc.errno or 0
    return _REASONS.get(code) or errno.errorcode.get(code, "cannot be read")


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file (symlinks followed unless ``follow=False``).

    Raises:
        FileRefused: missing, a directory, a FIFO/device/socket, a symlink loop, unreadable.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except ValueError:
        raise FileRefused("the name holds a NUL byte") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise FileRefused("is a symlink, refused here") from None
        raise FileRefused(reason_of(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise FileRefused("is a directory")
        if not stat.S_ISREG(mode):
            raise FileRefused("is not a regular file (a FIFO, device or socket)")
        # Regular files never block; clear the flag so reads behave as usual.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
