"""The plugin row's ``toolCassette`` section, parsed once into a frozen Struct.

Rule: three required keys (``mode``, ``file``, ``include``) and the optional test-logic keys
(``filters``, ``allowRedactedReplay``, ``match``, ``faults``, ``volatile``: docs/test-logic.md);
every refusal is a ``ConfigError`` naming the field, never echoing its value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import msgspec

from dsh_sidecar.python_core.config_fields import ConfigSection, Mode
from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.filters import FilterFunction, FilterRule, parse_filters
from dsh_sidecar.python_core.json_pointers import encodable, parse_pointer
from dsh_sidecar.python_core.tool_cassette.faults import FaultOverlay, parse_faults
from dsh_sidecar.python_core.tool_cassette.matching import MatchRule, parse_match

__all__ = ["ToolCassetteConfig", "parse_config", "parse_volatile", "same_selection"]

_SECTION = "toolCassette"
_KEYS = ("mode", "file", "include")
_OPTIONAL = ("filters", "allowRedactedReplay", "match", "faults", "volatile")


def _matches(pattern: str, name: str) -> bool:
    """Match ``name`` against ``pattern`` where ``*`` stands for any run of characters."""
    pieces = pattern.split("*")
    if len(pieces) == 1:
        return pattern == name
    head, *middle, tail = pieces
    if len(name) < len(head) + len(tail) or not name.startswith(head) or not name.endswith(tail):
        return False
    position = len(head)
    end = len(name) - len(tail)
    for piece in middle:
        found = name.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


class ToolCassetteConfig(ConfigSection, frozen=True):
    """Validated cassette settings; ``file`` is already resolved against the host cwd.

    ``functions`` is never read from the row: the bridge fills it, in the sidecar process,
    with the function each ``call`` filter names (``bridge/hooks/references.py``).
    """

    mode: Mode
    file: str
    include: tuple[str, ...]
    filters: tuple[FilterRule, ...] = ()
    allowRedactedReplay: bool = False
    match: dict[str, MatchRule] = msgspec.field(default_factory=dict)
    faults: FaultOverlay | None = None
    volatile: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    """Per tool, the result pointers a replay's divergence check leaves out (docs/test-logic.md)."""
    functions: Mapping[str, FilterFunction] = msgspec.field(default_factory=dict)

    def selects(self, tool: str) -> bool:
        """Tell whether ``tool`` is covered by an ``include`` pattern."""
        return any(_matches(pattern, tool) for pattern in self.include)

    def unmatched(self, tools: Sequence[str]) -> tuple[str, ...]:
        """The ``include`` patterns that match none of ``tools``."""
        return tuple(p for p in self.include if not any(_matches(p, tool) for tool in tools))


def same_selection(a: Sequence[str], b: Sequence[str]) -> bool:
    """Tell whether two ``include`` lists select the same tools (pattern order selects nothing)."""
    return frozenset(a) == frozenset(b)


def _field(name: str) -> str:
    return f"{_SECTION}.{name}"


def parse_config(raw: object, *, cwd: str) -> ToolCassetteConfig:
    """Validate the ``toolCassette`` section and resolve ``file`` against ``cwd``.

    Raises:
        ConfigError: a key is missing, unknown or of the wrong type, ``file`` is empty, or
            ``include`` is empty, holds an empty pattern or repeats a pattern.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(_SECTION, "must be an object")
    for key in raw:
        if key not in _KEYS and key not in _OPTIONAL:
            name = _field(key) if isinstance(key, str) else _SECTION
            raise ConfigError(name, "is not a known key (allowed: mode, file, include, filters, "
                                    "allowRedactedReplay, match, faults, volatile)")
    for key in _KEYS:
        if key not in raw:
            raise ConfigError(_field(key), "is required")
    mode = raw["mode"]
    if mode != "record" and mode != "replay":
        raise ConfigError(_field("mode"), "must be 'record' or 'replay'")
    file = raw["file"]
    if not isinstance(file, str):
        raise ConfigError(_field("file"), "must be a string")
    if not file.strip():
        raise ConfigError(_field("file"), "must not be empty")
    if "\0" in file:
        raise ConfigError(_field("file"), "must not contain NUL")
    include = raw["include"]
    if not isinstance(include, list | tuple):
        raise ConfigError(_field("include"), "must be a list of strings")
    if not include:
        raise ConfigError(_field("include"), "must not be empty")
    seen: dict[str, int] = {}
    for index, pattern in enumerate(include):
        if not isinstance(pattern, str):
            raise ConfigError(_field("include"), f"pattern {index} must be a string")
        if not pattern.strip():
            raise ConfigError(_field("include"), f"pattern {index} is empty")
        if pattern in seen:
            raise ConfigError(
                _field("include"), f"pattern {index} duplicates pattern {seen[pattern]}"
            )
        seen[pattern] = index
    resolved = os.path.normpath(os.path.join(cwd, file))
    allow = raw.get("allowRedactedReplay", False)
    if not isinstance(allow, bool):
        raise ConfigError(_field("allowRedactedReplay"), "must be true or false")
    faults = None if raw.get("faults") is None else parse_faults(raw["faults"])
    if faults is not None and mode == "record":
        raise ConfigError(_field("faults"), "applies to replay only; a recording never fakes a failure")
    return ToolCassetteConfig(
        mode=mode, file=resolved, include=tuple(include),
        filters=parse_filters(raw.get("filters", [])), allowRedactedReplay=allow,
        match=parse_match(raw["match"]) if "match" in raw else {}, faults=faults,
        volatile=parse_volatile(raw["volatile"]) if "volatile" in raw else {},
    )


def parse_volatile(raw: object, field: str = "toolCassette.volatile") -> dict[str, tuple[str, ...]]:
    """Validate ``{tool: [pointer, ...]}``: result members whose live value may differ from the
    recording's without the replay having diverged (a duration, a chunk id).

    Raises:
        ConfigError: names the tool or pointer entry and a value-free reason.
    """
    if not encodable(raw):
        raise ConfigError(field, "holds a lone surrogate or a value with no JSON form")
    if not isinstance(raw, Mapping):
        raise ConfigError(field, "must be an object of tool name to [pointer, ...]")
    rules: dict[str, tuple[str, ...]] = {}
    for tool, pointers in raw.items():
        if not isinstance(tool, str) or not tool.strip():
            raise ConfigError(field, "tool names must be non-empty strings")
        where = f"{field}.{tool}"
        if not isinstance(pointers, list | tuple) or not pointers:
            raise ConfigError(where, "must be a non-empty list of JSON pointers")
        for index, pointer in enumerate(pointers):
            if not isinstance(pointer, str) or not parse_pointer(pointer):
                raise ConfigError(f"{where}[{index}]", "must be a JSON pointer below the root, as /a/0")
        if len(set(pointers)) != len(pointers):
            raise ConfigError(where, "repeats a pointer")
        rules[tool] = tuple(sorted(pointers))
    return rules
