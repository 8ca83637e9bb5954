"""The file side of every cassette's ``reseal``: read the lines, replace the file atomically.

Rule: the new text goes to a private temporary file beside the cassette (mode 0600), is
fsync-ed, then ``os.replace``-d over it and the directory synced; on failure the temporary
file is removed and the cassette is untouched. Callers map ``OSError``/``FileRefused`` to
their cassette's named I/O error.
"""

from __future__ import annotations

import os
import tempfile

from dsh_sidecar.python_core.cassette_io import fsync_dir
from dsh_sidecar.python_core.files import open_regular

__all__ = ["read_lines", "replace_file"]


def read_lines(path: str) -> list[bytes]:
    """Every line of the regular file at ``path``, newlines kept.

    Raises:
        FileRefused: not a regular file.
        OSError: the file cannot be read.
    """
    with open_regular(path) as handle:
        return handle.readlines()


def replace_file(path: str, data: bytes) -> None:
    """Replace the file at ``path`` with ``data`` atomically and durably.

    Raises:
        OSError: the temporary file cannot be written or moved; ``path`` is unchanged.
    """
    fd, temporary = tempfile.mkstemp(prefix=".reseal-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise
    fsync_dir(path)
