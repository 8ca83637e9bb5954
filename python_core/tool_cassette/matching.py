"""Matching rules: per tool, argument pointers that replay ignores when it compares a call.

Rule: a rule only removes the named members (JSON pointers) from both the live and the
recorded arguments before the exact comparison; everything else still matches exactly and a
mismatch names the pointers that differ. Rules are recorded in the cassette header: a replay
declaring other rules is refused (``CASSETTE_RULES_DIFFER``) instead of matching differently.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.json_pointers import encodable, parse_pointer, without

__all__ = ["MatchRule", "match_difference", "parse_match", "reduce_args"]


class MatchRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One tool's rule: ``ignore`` lists argument pointers left out of the comparison."""

    ignore: tuple[str, ...]


def match_difference(recorded: Mapping[str, MatchRule], declared: Mapping[str, MatchRule]) -> str:
    """Which rule differs between the recording's match rules and a replay's, named by tool and
    pointer (rules, never argument values); the first difference, and how many more there are."""
    found: list[str] = []
    for tool in sorted(set(recorded) | set(declared)):
        kept = set(recorded[tool].ignore) if tool in recorded else set()
        asked = set(declared[tool].ignore) if tool in declared else set()
        found += [f"the recording ignores {p} of {tool}, this replay does not" for p in sorted(kept - asked)]
        found += [f"this replay ignores {p} of {tool}, the recording does not" for p in sorted(asked - kept)]
    if not found:
        return "the rules are the same"
    more = len(found) - 1
    return found[0] + (f" (and {more} more difference{'s' if more > 1 else ''})" if more else "")


def parse_match(raw: object, field: str = "toolCassette.match") -> dict[str, MatchRule]:
    """Validate ``{tool: {"ignore": [pointer, ...]}}``.

    Raises:
        ConfigError: names the tool or pointer entry and a value-free reason.
    """
    if not encodable(raw):
        raise ConfigError(field, "holds a lone surrogate or a value with no JSON form")
    if not isinstance(raw, Mapping):
        raise ConfigError(field, "must be an object of tool name to {ignore: [pointer, ...]}")
    rules: dict[str, MatchRule] = {}
    for tool, body in raw.items():
        if not isinstance(tool, str) or not tool.strip():
            raise ConfigError(field, "tool names must be non-empty strings")
        where = f"{field}.{tool}"
        if not isinstance(body, Mapping) or set(body) != {"ignore"}:
            raise ConfigError(where, "must be an object with exactly the key ignore")
        ignore = body["ignore"]
        if not isinstance(ignore, list | tuple) or not ignore:
            raise ConfigError(f"{where}.ignore", "must be a non-empty list of JSON pointers")
        for index, pointer in enumerate(ignore):
            if not isinstance(pointer, str) or not parse_pointer(pointer):
                raise ConfigError(f"{where}.ignore[{index}]", "must be a JSON pointer below the root, as /a/0")
        if len(set(ignore)) != len(ignore):
            raise ConfigError(f"{where}.ignore", "repeats a pointer")
        rules[tool] = MatchRule(ignore=tuple(sorted(ignore)))
    return rules


def reduce_args(args: object, rule: MatchRule | None) -> object:
    """Return decoded ``args`` without the members ``rule`` ignores."""
    if rule is None:
        return args
    for pointer in rule.ignore:
        args = without(args, parse_pointer(pointer))
    return args
