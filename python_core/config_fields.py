"""What every section of the row config shares: the closed Struct base and field naming.

Rule: a section parses into a frozen Struct that forbids unknown fields; every refusal is a
``ConfigError`` naming ``section.field`` and a value-free reason, never the value itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, TypeVar

import msgspec

from dsh_sidecar.python_core.errors import ConfigError

__all__ = ["ConfigSection", "Mode", "convert_section", "field_of"]

Mode = Literal["record", "replay"]

_Section = TypeVar("_Section", bound=msgspec.Struct)


class ConfigSection(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every parsed config section: frozen, and an unknown key is an error.

    msgspec passes both options on to subclasses; a subclass restates ``frozen=True`` only
    because type checkers read the class header.
    """


def field_of(message: str) -> tuple[str, str]:
    """Split a msgspec validation message into (field path, value-free reason).

    The path is relative to the converted object; ``config`` stands for the object itself.
    """
    text, _, location = message.partition(" - at ")
    field = location.strip("`").removeprefix("$").lstrip(".") or "config"
    if text.startswith("Object contains unknown field"):
        name = text.removeprefix("Object contains unknown field ").strip("`")
        return (f"{field}.{name}" if field != "config" else name), "unknown field"
    if text.startswith("Object missing required field"):
        name = text.removeprefix("Object missing required field ").strip("`")
        return (f"{field}.{name}" if field != "config" else name), "required"
    if text.startswith("Expected"):
        # "Expected `int`, got `str`" keeps the expectation only; constraints carry no value.
        return field, text.split(",")[0].replace("Expected", "expected", 1)
    return field, "invalid value"


def convert_section(raw: object, kind: type[_Section], section: str) -> _Section:
    """Convert the row's ``section`` into ``kind``.

    Raises:
        ConfigError: names ``section.field`` (or ``section`` when it is not an object).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(section, "must be an object")
    try:
        return msgspec.convert(raw, kind)
    except UnicodeEncodeError:
        raise ConfigError(section, "lone surrogate in a string or object key") from None
    except msgspec.ValidationError as exc:
        field, reason = field_of(str(exc))
        raise ConfigError(section if field == "config" else f"{section}.{field}", reason) from None
