"""Fault overlay: chosen replayed calls fail with a given runtime code, without editing the cassette.

Rule: an overlay has a ``name`` and rules; a rule selects calls by ``tool``, ``ordinal`` and/or
``path`` (all given ones must hold) and makes the call fail with ``code`` and ``message``, or
(``delayMs``, with or without a failure) answers it that many milliseconds late. The
call must still match its record (identity is checked as always, and the record is consumed);
only the served outcome is replaced. Every injected failure's message starts with
``[injected by fault overlay NAME]``, so it is never mistaken for a real one; the run result
names the overlay and counts the injected calls. Replay only: a recording never fakes a failure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.json_pointers import encodable

__all__ = ["FaultOverlay", "FaultRule", "parse_faults"]

_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class FaultRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """Which calls fail (every given selector must hold) and how."""

    code: str | None = None
    message: str | None = None
    delayMs: int | None = None
    tool: str | None = None
    ordinal: int | None = None
    path: str | None = None

    def selects(self, tool: str, path: str, ordinal: int) -> bool:
        """Tell whether the call ``(tool, path, ordinal)`` gets this fault."""
        return ((self.tool is None or self.tool == tool) and (self.path is None or self.path == path)
                and (self.ordinal is None or self.ordinal == ordinal))


class FaultOverlay(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A named list of fault rules; the first rule that selects a call applies."""

    name: str
    rules: tuple[FaultRule, ...]

    def fault(self, tool: str, path: str, ordinal: int) -> FaultRule | None:
        """The rule that applies to the call, if any."""
        return next((rule for rule in self.rules if rule.selects(tool, path, ordinal)), None)


def parse_faults(raw: object, field: str = "toolCassette.faults") -> FaultOverlay:
    """Validate ``{"name": ..., "rules": [{code, message, tool?, ordinal?, path?}, ...]}``.

    Raises:
        ConfigError: names the entry and a value-free reason.
    """
    if not encodable(raw):
        raise ConfigError(field, "holds a lone surrogate or a value with no JSON form")
    if not isinstance(raw, Mapping):
        raise ConfigError(field, "must be an object with name and rules")
    try:
        overlay = msgspec.convert(raw, FaultOverlay)
    except msgspec.ValidationError:
        raise ConfigError(field, "takes name (string) and rules (list of {code?, message?, delayMs?, "
                                 "tool?, ordinal?, path?})") from None
    if not _NAME.fullmatch(overlay.name):
        raise ConfigError(f"{field}.name", "must be 1 to 64 letters, digits, '.', '_' or '-'")
    if not overlay.rules:
        raise ConfigError(f"{field}.rules", "must not be empty")
    for index, rule in enumerate(overlay.rules):
        where = f"{field}.rules[{index}]"
        if (rule.code is None) != (rule.message is None):
            raise ConfigError(where, "code and message go together")
        if rule.code is None and rule.delayMs is None:
            raise ConfigError(where, "must fail the call (code, message) or delay it (delayMs)")
        if rule.code is not None and not _CODE.fullmatch(rule.code):
            raise ConfigError(f"{where}.code", "must be an upper-case code such as TIMEOUT")
        if rule.message is not None and (not rule.message.strip() or len(rule.message) > 1000):
            raise ConfigError(f"{where}.message", "must be 1 to 1000 characters")
        if rule.delayMs is not None and not 0 <= rule.delayMs <= 600_000:
            raise ConfigError(f"{where}.delayMs", "must be 0 to 600000 (ten minutes)")
        if rule.ordinal is not None and rule.ordinal < 0:
            raise ConfigError(f"{where}.ordinal", "must be 0 or more")
        if rule.tool is None and rule.path is None and rule.ordinal is None:
            raise ConfigError(where, "must select calls by tool, ordinal or path")
    return overlay
