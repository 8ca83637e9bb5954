"""References to Python the test author writes: ``module:function`` or ``file.py:function``.

Rule: a reference is checked here, as text (no import: the bridge imports it in the sidecar
process, ``bridge/hooks/references.py``); ``module`` is a dotted module name importable with the DSH
cwd first on ``sys.path``, ``file.py`` a path relative to the DSH cwd, ``function`` a dotted
attribute name. Its identity (what a cassette header fingerprints) is the module's last name
or the file's stem with the function's qualified name, so the same function named from another
directory, or by file and by module, is the same function; its code is not part of it.
"""

from __future__ import annotations

import re

from dsh_sidecar.python_core.errors import ConfigError

__all__ = ["check_reference", "reference_identity"]

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def check_reference(field: str, ref: object) -> str:
    """Return ``ref`` if it is a well-formed reference.

    Raises:
        ConfigError: names ``field`` and a value-free reason.
    """
    if not isinstance(ref, str) or ref.count(":") < 1:
        raise ConfigError(field, "must be a string module:function or file.py:function")
    module, _, function = ref.rpartition(":")
    if not _DOTTED.fullmatch(function):
        raise ConfigError(field, "must end with :function (a dotted Python name)")
    if not module.endswith(".py") and not _DOTTED.fullmatch(module):
        raise ConfigError(field, "module must be a dotted module name or a path ending in .py")
    if "\0" in module:
        raise ConfigError(field, "must not contain NUL")
    return ref


def reference_identity(ref: str) -> str:
    """``name:qualname``: the module's last name or the file's stem, and the function's name."""
    module, _, function = ref.rpartition(":")
    if module.endswith(".py"):
        name = module.replace("\\", "/").rsplit("/", 1)[-1][: -len(".py")]
    else:
        name = module.rsplit(".", 1)[-1]
    return f"{name}:{function}"
