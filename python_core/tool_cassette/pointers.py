"""JSON pointers as reference tokens (RFC 6901), for filters and matching rules.

Rule: a rule pointer must name something below the root; ``~0``/``~1`` are the only escapes.
"""

from __future__ import annotations

import msgspec

__all__ = ["encodable", "parse_pointer", "without"]


def encodable(value: object) -> bool:
    """Tell whether a decoded rule spec can be written as UTF-8 JSON (no lone surrogate)."""
    try:
        msgspec.json.encode(value)
    except (UnicodeEncodeError, TypeError, OverflowError):
        return False
    return True


def parse_pointer(pointer: str) -> list[str]:
    """Return the unescaped tokens of ``pointer``; ``[]`` when it is not a pointer below the root."""
    if not pointer.startswith("/") or len(pointer) > 1024:
        return []
    tokens = pointer[1:].split("/")
    for token in tokens:
        stripped = token.replace("~0", "").replace("~1", "")
        if "~" in stripped:
            return []
    return [token.replace("~1", "/").replace("~0", "~") for token in tokens]


def without(value: object, tokens: list[str]) -> object:
    """Return a copy of ``value`` with the member or element at ``tokens`` removed (if present)."""
    head, rest = tokens[0], tokens[1:]
    if isinstance(value, dict) and head in value:
        if not rest:
            return {key: item for key, item in value.items() if key != head}
        return {**value, head: without(value[head], rest)}
    if isinstance(value, list) and head.isdigit() and int(head) < len(value):
        index = int(head)
        if not rest:
            return [*value[:index], *value[index + 1:]]
        return [*value[:index], without(value[index], rest), *value[index + 1:]]
    return value
