"""JSON pointers (RFC 6901): where two JSON values differ, and the pointers rules name.

Rule: a difference is named by its kind and pointer only. ``changed`` means both sides hold
something different at the pointer (another scalar, or another type); ``added`` and
``removed`` are read from the recorded side to the actual side (an object key or array
element present only in the actual value is ``added``). Descending stops at the first
differing node of a branch, so a replaced object is one ``changed``, not one line per key.
A rule pointer (filters, matching, faults) must name something below the root; ``~0``/``~1``
are the only escapes.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from dsh_sidecar.python_core.errors import printable

__all__ = ["PointerChange", "describe", "differing_pointers", "encodable", "escape_token", "parse_pointer", "without"]

Kind = Literal["changed", "added", "removed"]
SHOWN = 5
"""How many pointers a one-line description names before ``and N more``."""
_POINTER_CHARS = 60
"""A pointer built from long keys is cut to this many characters (keys may be anything)."""


class PointerChange(msgspec.Struct, frozen=True):
    """One difference: its kind and the JSON pointer (``""`` is the whole value)."""

    kind: Kind
    pointer: str


def escape_token(key: str) -> str:
    """Escape one object key as a JSON pointer reference token (``~`` → ``~0``, ``/`` → ``~1``)."""
    return key.replace("~", "~0").replace("/", "~1")


def _same_scalar(a: object, b: object) -> bool:
    # ``True == 1`` in Python: a type change is a change.
    return type(a) is type(b) and a == b


def differing_pointers(recorded: object, actual: object) -> list[PointerChange]:
    """Name every place where ``actual`` differs from ``recorded`` (decoded JSON values).

    The list is in document order (object keys sorted, array elements by index). Iterative:
    nesting depth is bounded by the decoders, not by this walk.
    """
    out: list[PointerChange] = []
    stack: list[tuple[str, object, object]] = [("", recorded, actual)]
    while stack:
        pointer, was, now = stack.pop()
        children: list[tuple[str, object, object]] = []
        if isinstance(was, dict) and isinstance(now, dict):
            for key in sorted(was.keys() | now.keys()):
                child = f"{pointer}/{escape_token(key)}"
                if key not in now:
                    out.append(PointerChange("removed", child))
                elif key not in was:
                    out.append(PointerChange("added", child))
                else:
                    children.append((child, was[key], now[key]))
        elif isinstance(was, list) and isinstance(now, list):
            common = min(len(was), len(now))
            children = [(f"{pointer}/{i}", was[i], now[i]) for i in range(common)]
            out += [PointerChange("removed", f"{pointer}/{i}") for i in range(common, len(was))]
            out += [PointerChange("added", f"{pointer}/{i}") for i in range(common, len(now))]
        elif isinstance(was, dict | list) or isinstance(now, dict | list) or not _same_scalar(was, now):
            out.append(PointerChange("changed", pointer))
        stack.extend(children)
    return sorted(out, key=lambda change: _order(change.pointer))


def _order(pointer: str) -> list[tuple[int, int | str]]:
    """Sort key: document order (array indexes numerically, keys as strings)."""
    return [(0, int(token)) if token.isdigit() else (1, token) for token in pointer.split("/")[1:]]


def _shown(pointer: str) -> str:
    if not pointer:
        return "(the whole value)"
    # Keys may hold control characters or lone surrogates: escaped, the line stays one line.
    cut = pointer if len(pointer) <= _POINTER_CHARS else pointer[: _POINTER_CHARS - 1] + "…"
    return printable(cut)


def describe(changes: list[PointerChange], limit: int = SHOWN) -> str:
    """One line naming the first ``limit`` changes, then ``and N more``; ``""`` for none."""
    named = [f"{change.kind} {_shown(change.pointer)}" for change in changes[:limit]]
    if len(changes) > limit:
        named.append(f"and {len(changes) - limit} more")
    return ", ".join(named)


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
