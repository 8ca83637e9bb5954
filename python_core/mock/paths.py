"""Where ``/mock replay <path>`` may read from (docs/mock.md, "Replay path policy").

Rule (docs/mock.md "Replay path policy"), checked in this order, each with a named rule:

1. ``invalid-path``: empty, or contains NUL.
2. ``home-expansion``: starts with ``~``; nothing expands it (no environment is read).
3. ``parent-segment``: any ``..`` segment, even one that would stay inside a root.
4. ``no-session-cwd``: a relative path needs the session's absolute working directory.
5. Relative paths resolve against the session cwd; absolute paths are taken as written.
6. ``outside-allowed-roots``: the path, before symlinks are resolved, must lie inside the
   session cwd or one of the extra allowed roots (the bridge passes the DSH sessions root).
7. ``symlink-escape``: after resolving symlinks it must still lie inside a real root.
8. ``not-a-regular-file``: the resolved target must be an existing regular file (no FIFOs,
   devices or directories, so reading can neither hang nor stream a device).

Errors name the rule only, never the path. The function touches the file system only through
the injected ``realpath`` and ``is_file`` (``os.path`` by default).
"""

from __future__ import annotations

import os.path
from collections.abc import Callable, Sequence

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.mock.errors import PathRefused

__all__ = ["resolve_replay_path"]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_replay_path(
    arg: str,
    *,
    session_cwd: str,
    allowed_roots: Sequence[str] = (),
    realpath: Callable[[str], str] = os.path.realpath,
    is_file: Callable[[str], bool] = os.path.isfile,
) -> str:
    """Apply the replay path policy and return the real path to read.

    Args:
        arg: the path exactly as written in ``/mock replay``.
        session_cwd: the DSH session's absolute working directory.
        allowed_roots: further absolute directories replay may read (e.g. the sessions root).
        realpath: resolves symlinks (injected for tests).
        is_file: tells whether a resolved path is an existing regular file.

    Returns:
        The absolute, symlink-free path of the source file.

    Raises:
        PathRefused: a rule refused the path; the message names the rule, not the path.
        ConfigError: an allowed root is not absolute.
    """
    if not arg or "\x00" in arg:
        raise PathRefused("invalid-path", "the path is empty or contains a NUL character")
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        raise PathRefused("invalid-path", "the path holds a lone surrogate") from None
    if arg.startswith("~"):
        raise PathRefused("home-expansion", "~ is not expanded; write the path without it")
    if ".." in arg.replace("\\", "/").split("/"):
        raise PathRefused("parent-segment", "'..' segments are not allowed in a replay path")
    has_cwd = bool(session_cwd) and os.path.isabs(session_cwd)
    if not os.path.isabs(arg) and not has_cwd:
        raise PathRefused(
            "no-session-cwd", "a relative path needs the session's absolute working directory"
        )
    if any(not os.path.isabs(root) for root in allowed_roots):
        raise ConfigError("mock.allowedRoots", "every allowed root must be an absolute path")
    roots = [
        os.path.normpath(root)
        for root in ((session_cwd,) if has_cwd else ()) + tuple(allowed_roots)
    ]
    lexical = os.path.normpath(os.path.join(session_cwd, arg) if not os.path.isabs(arg) else arg)
    if not any(_inside(lexical, root) for root in roots):
        raise PathRefused(
            "outside-allowed-roots",
            "the path is outside the session working directory and the allowed roots",
        )
    resolved = realpath(lexical)
    if not any(_inside(resolved, realpath(root)) for root in roots):
        raise PathRefused(
            "symlink-escape",
            "a symbolic link leads outside the session working directory and the allowed roots",
        )
    if not is_file(resolved):
        raise PathRefused("not-a-regular-file", "the path is not an existing regular file")
    return resolved
