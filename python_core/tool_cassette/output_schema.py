"""A recorded value against its tool's output schema: rc.8's enforced JSON Schema subset.

Rule: the same judgement rc.8 makes when it validates a served value (``validateJsonSchemaValue``
in ``@deepseek-ai/dsh-tools`` ``lib/types/json-schema.js``), so that a filter that would turn a
valid value into one the host refuses at replay is refused when recording instead. The subset:
one scalar ``type``, object ``properties``/``required``/boolean ``additionalProperties``, array
``items``, scalar ``enum``/``const`` and exact-one ``oneOf``; a node with neither ``type`` nor
``oneOf`` takes any JSON. Only the first violation is reported, as a JSON pointer into the value
and what the schema wants there; a keyword outside the subset is ignored (the host refused such
a schema when the tool registered, so a recorded one never has it).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from dsh_sidecar.python_core.json_pointers import escape_token

__all__ = ["Violation", "first_violation", "json_type"]


class Violation(msgspec.Struct, frozen=True):
    """Where a value breaks its schema: ``pointer`` into the value, ``wants`` a phrase
    (``a number``, ``one of its enum values``), ``wanted_type`` the schema type there, if one."""

    pointer: str
    wants: str
    wanted_type: str | None = None


_ARTICLE = {"object": "an object", "array": "an array", "string": "a string", "number": "a number",
            "integer": "an integer", "boolean": "a boolean", "null": "null"}


def json_type(value: object) -> str:
    """The JSON type of a decoded value, as a phrase (``a string``, ``an integer``, ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "an integer" if value.is_integer() else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _scalar_matches(kind: str, value: object) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return kind == "number" or float(value).is_integer()


def first_violation(schema: object, value: object, pointer: str = "") -> Violation | None:
    """The first place ``value`` breaks ``schema`` (document order), or ``None`` if it is valid."""
    if not isinstance(schema, Mapping):
        return None
    if "oneOf" in schema and isinstance(schema["oneOf"], list):
        matched = sum(first_violation(branch, value, pointer) is None for branch in schema["oneOf"])
        return None if matched == 1 else Violation(pointer or "/", "exactly one of its oneOf branches")
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in _ARTICLE:
        return None
    where = pointer or "/"
    if kind == "object":
        if not isinstance(value, dict):
            return Violation(where, _ARTICLE[kind], kind)
        properties = schema.get("properties")
        declared: Mapping[str, object] = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        for key in required if isinstance(required, list) else ():
            if isinstance(key, str) and key not in value:
                return Violation(f"{pointer}/{escape_token(key)}", "a member there (required)")
        for key, member in value.items():
            inner = f"{pointer}/{escape_token(key)}"
            if key in declared:
                found = first_violation(declared[key], member, inner)
                if found is not None:
                    return found
            elif schema.get("additionalProperties") is False:
                return Violation(inner, "no such member (additionalProperties: false)")
        return None
    if kind == "array":
        if not isinstance(value, list):
            return Violation(where, _ARTICLE[kind], kind)
        for index, item in enumerate(value):
            found = first_violation(schema.get("items"), item, f"{pointer}/{index}")
            if found is not None:
                return found
        return None
    if not _scalar_matches(kind, value):
        return Violation(where, _ARTICLE[kind], kind)
    allowed = schema.get("enum")
    if isinstance(allowed, list) and not any(_same(value, entry) for entry in allowed):
        return Violation(where, "one of its enum values", kind)
    if "const" in schema and not _same(value, schema["const"]):
        return Violation(where, "its const value", kind)
    return None


def _same(value: object, entry: object) -> bool:
    # JavaScript's `includes`/`===`: 1 and 1.0 are one number, true is not 1.
    return isinstance(value, bool) == isinstance(entry, bool) and value == entry
