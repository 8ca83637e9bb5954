"""The plugin composition a cassette was recorded with: packages and versions, never their config.

Rule: a recording keeps which plugins were composed (a package name, or a plain module file's base
name, to its version) because a plugin's hooks can shape what is recorded (a pre-step hook that
rewrites the task text changes the recorded arguments). When a replay no longer matches, the
difference between the recorded composition and the replay's names the likely cause: rows
absent, added or upgraded since. The shim reports the loader's rows as it finds them
(``PluginRow``); this module decides what counts: enabled rows, the loader's own ``cordis:``
builtins left out, a ``file:`` module named by its package (the nearest ``package.json``) or its
base name, never a directory. A file recorded without the field, or a replay whose shim
reported nothing, says nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from dsh_sidecar.python_core.errors import printable

__all__ = ["Composition", "PluginRow", "compose", "describe_change"]

Composition = dict[str, str | None]
"""Package (or module base name) to version (``None``: the module has no ``package.json``)."""

_SHOWN = 3


class PluginRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One loader row as the shim sees it: the row's module name, whether it is enabled, and the
    ``name`` and ``version`` of the package the module belongs to (``None`` when it has none)."""

    name: str
    enabled: bool
    package: str | None = None
    version: str | None = None


def _label(row: PluginRow) -> str:
    if row.package:
        return row.package
    name = row.name.removeprefix("file://")
    return name.rstrip("/").rsplit("/", 1)[-1] or name


def compose(rows: Sequence[PluginRow]) -> Composition:
    """The composition of ``rows``: each enabled plugin's package (or base name) and version."""
    return {_label(row): row.version for row in sorted(rows, key=lambda r: r.name)
            if row.enabled and not row.name.startswith("cordis:")}


def _version(version: str | None) -> str:
    return "" if version is None else f" {printable(version)}"


def describe_change(recorded: Mapping[str, str | None], current: Mapping[str, str | None]) -> str:
    """What changed from ``recorded`` to ``current``, as a phrase, or ``""`` when nothing did.

    ``dsh-mask-plugin 1.2.0 is absent, dsh-web-reader 2.0.0 was added, dsh-vault 1.0.0 -> 1.1.0``
    (absent first, then added, then upgraded; at most three, then ``and N more``).
    """
    absent = [f"{printable(name)}{_version(recorded[name])} is absent" for name in sorted(recorded)
              if name not in current]
    added = [f"{printable(name)}{_version(current[name])} was added" for name in sorted(current)
             if name not in recorded]
    moved = [f"{printable(name)}{_version(recorded[name]) or ' (no version)'} ->"
             f"{_version(current[name]) or ' (no version)'}"
             for name in sorted(recorded) if name in current and recorded[name] != current[name]]
    changes = [*absent, *added, *moved]
    if not changes:
        return ""
    shown = ", ".join(changes[:_SHOWN])
    return shown + (f" and {len(changes) - _SHOWN} more" if len(changes) > _SHOWN else "")
