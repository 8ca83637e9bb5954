"""Strict canonical JSON: the one encoding behind every hash and fingerprint.

Profile (RFC 8785 JCS): object keys sorted by UTF-16 code units (as JavaScript sorts them, so
Node and Python agree; it differs from code-point order only for keys mixing characters above
U+FFFF with U+E000..U+FFFF), arrays kept in order, UTF-8, no insignificant whitespace, numbers
as ECMAScript prints them (``1.0`` is ``1``).
Rejected with ``CanonicalJsonError`` naming a JSON-pointer location: duplicate keys at any depth,
``NaN``/``Infinity``, ``-0``, integers outside +-(2**53 - 1), and values that are not JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from python_core.errors import CanonicalJsonError

__all__ = [
    "MAX_SAFE_INTEGER",
    "canonical_bytes",
    "digest",
    "digest_bytes",
    "is_canonical",
    "loads_strict",
    "pointer",
]

MAX_SAFE_INTEGER = 2**53 - 1

# Key order is decided by ``_prepare``; the encoder keeps insertion order.
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def pointer(parts: Sequence[str | int]) -> str:
    """Return the RFC 6901 JSON pointer for ``parts`` (``""`` is the root)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _js_number(value: float) -> str:
    """Format a finite float the way ECMAScript ``Number.prototype.toString`` does."""
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    mantissa, _, exp_text = repr(value).partition("e")
    negative = mantissa.startswith("-")
    mantissa = mantissa.lstrip("-")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # n: position of the decimal point relative to the digit string (ECMAScript's "n").
    n = len(int_part) + (int(exp_text) if exp_text else 0)
    if int_part == "0":
        stripped = frac_part.lstrip("0")
        n = -(len(frac_part) - len(stripped)) + (int(exp_text) if exp_text else 0)
        digits = stripped
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        sign = "+" if e >= 0 else "-"
        head = digits[0] + ("." + digits[1:] if k > 1 else "")
        out = f"{head}e{sign}{abs(e)}"
    return ("-" if negative else "") + out


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _sorted_keys(mapping: Mapping[str, Any]) -> list[str]:
    keys = list(mapping)
    if all(key.isascii() for key in keys):
        return sorted(keys)
    return sorted(keys, key=_utf16)


def _prepare(value: Any, path: list[str | int]) -> Any:
    """Validate ``value`` and replace floats by their canonical raw text."""
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        if not value.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise CanonicalJsonError(pointer(path) or "/", "lone surrogate in a string")
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalJsonError(pointer(path) or "/", "integer outside +-(2^53-1)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalJsonError(pointer(path) or "/", "NaN or Infinity")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise CanonicalJsonError(pointer(path) or "/", "negative zero")
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        return msgspec.Raw(_js_number(value).encode())
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise CanonicalJsonError(pointer(path) or "/", "object key is not a string")
        out: dict[str, Any] = {}
        for key in _sorted_keys(value):
            path.append(key)
            out[key] = _prepare(value[key], path)
            path.pop()
        return out
    if isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            path.append(index)
            items.append(_prepare(item, path))
            path.pop()
        return items
    raise CanonicalJsonError(pointer(path) or "/", f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any) -> bytes:
    """Encode ``value`` in the strict canonical profile.

    Raises:
        CanonicalJsonError: the value has no canonical form (location in the message).
    """
    try:
        return _ENCODER.encode(_prepare(value, []))
    except RecursionError:
        raise CanonicalJsonError("/", "nesting too deep") from None


def digest_bytes(data: bytes) -> str:
    """Return ``sha256:<hex>`` of already-canonical bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(value: Any) -> str:
    """Return ``sha256:<hex>`` of the canonical bytes of ``value``."""
    return digest_bytes(canonical_bytes(value))


class _Strict:
    """Hooks for ``json.loads`` that refuse what the canonical profile refuses."""

    @staticmethod
    def pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                # The key itself may be data: name no key, only the rule.
                raise CanonicalJsonError("an object", "duplicate object key")
            out[key] = value
        return out

    @staticmethod
    def constant(name: str) -> Any:
        raise CanonicalJsonError("/", f"{name} is not JSON")

    @staticmethod
    def integer(text: str) -> int:
        number = int(text)
        if abs(number) > MAX_SAFE_INTEGER:
            raise CanonicalJsonError("/", "integer outside +-(2^53-1)")
        if number == 0 and text.startswith("-"):
            raise CanonicalJsonError("/", "negative zero")
        return number

    @staticmethod
    def real(text: str) -> float:
        number = float(text)
        if not math.isfinite(number):
            raise CanonicalJsonError("/", "number out of range")
        if number == 0.0 and text.startswith("-"):
            raise CanonicalJsonError("/", "negative zero")
        return number


def loads_strict(data: bytes | str) -> Any:
    """Decode JSON text, refusing duplicate keys, NaN/Infinity, -0 and unsafe integers.

    Raises:
        CanonicalJsonError: the text is not JSON or breaks the profile.
    """
    try:
        return json.loads(
            data,
            object_pairs_hook=_Strict.pairs,
            parse_constant=_Strict.constant,
            parse_int=_Strict.integer,
            parse_float=_Strict.real,
        )
    except CanonicalJsonError:
        raise
    except RecursionError:
        raise CanonicalJsonError("/", "nesting too deep") from None
    except ValueError as exc:
        position = getattr(exc, "pos", None)
        where = f"byte {position}" if position is not None else "/"
        raise CanonicalJsonError(where, "not valid JSON") from None


def is_canonical(line: bytes) -> bool:
    """Tell whether ``line`` is byte-for-byte the canonical encoding of what it holds.

    Fast path for verifiers: decode once with msgspec and re-encode; a duplicate key, a
    non-sorted key, whitespace or a non-canonical number all change the bytes.
    """
    try:
        value = _DECODER.decode(line)
        return canonical_bytes(value) == line
    except (msgspec.DecodeError, CanonicalJsonError):
        return False
