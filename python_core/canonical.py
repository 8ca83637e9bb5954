"""Strict canonical JSON: the one encoding behind every hash and fingerprint.

Profile (RFC 8785 JCS): object keys sorted by UTF-16 code units (as JavaScript sorts them, so
Node and Python agree; it differs from code-point order only for keys mixing characters above
U+FFFF with U+E000..U+FFFF), arrays kept in order, UTF-8, no insignificant whitespace, numbers
as ECMAScript prints them (``1.0`` is ``1``).
Rejected with ``CanonicalJsonError`` naming a JSON-pointer location: duplicate keys at any depth,
``NaN``/``Infinity``, ``-0``, integers outside +-(2**53 - 1), lone surrogates in strings and
object keys, nesting deeper than ``MAX_DEPTH``, and values that are not JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Annotated, Any

import msgspec

from dsh_sidecar.python_core.errors import CanonicalJsonError

__all__ = [
    "DEPTH_REASON",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "NOT_CANONICAL",
    "Count",
    "canonical_bytes",
    "check_depth",
    "decode_canonical",
    "digest",
    "digest_bytes",
    "is_canonical",
    "loads_strict",
    "ordered_bytes",
    "pointer",
    "too_deep",
    "too_deep_lines",
    "value_too_deep",
]

MAX_SAFE_INTEGER = 2**53 - 1
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)]
"""A count a file or payload holds: a non-negative integer JavaScript represents exactly."""
MAX_DEPTH = 256
"""Deepest nesting of arrays and objects accepted anywhere JSON enters (``[]`` is depth 1).

Python's decoders recurse once per level and die near 1,000 levels with a ``RecursionError``
(a crash, not an answer), at a depth that depends on the caller's stack. 256 is far beyond any
cassette, script, session log, config or envelope DSH produces and leaves the stack ample room.
"""
DEPTH_REASON = f"nested deeper than {MAX_DEPTH} levels"

# Key order is decided by ``_prepare``; the encoder keeps insertion order.
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


def pointer(parts: Sequence[str | int]) -> str:
    """Return the RFC 6901 JSON pointer for ``parts`` (``""`` is the root)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def too_deep(data: bytes | str) -> bool:
    """Tell whether JSON text ``data`` nests arrays/objects deeper than ``MAX_DEPTH``.

    Cheap for ordinary input: text with at most ``MAX_DEPTH`` opening brackets cannot be deeper;
    only other text is scanned (strings removed, brackets summed at C speed).
    """
    if len(data) <= MAX_DEPTH:
        return False  # too few characters to hold MAX_DEPTH + 1 openers
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


# Only openers and newlines survive: a line with at most MAX_DEPTH openers cannot be too deep.
_NOT_OPENERS_OR_NEWLINE = bytes(b for b in range(256) if b not in b"[{\n")
_MANY_OPENERS = re.compile(rb"[^\n]{%d,}" % (MAX_DEPTH + 1))


def too_deep_lines(data: bytes, lines: Sequence[bytes]) -> frozenset[int]:
    """Return the indexes of ``lines`` (``data.split(b"\\n")``) for which ``too_deep`` holds.

    Same answer as ``too_deep`` per line, at C speed for a whole log: one pass keeps openers and
    newlines, and only lines with more than ``MAX_DEPTH`` openers are scanned.
    """
    compact = data.translate(None, _NOT_OPENERS_OR_NEWLINE)
    deep: set[int] = set()
    index, scanned = 0, 0
    for match in _MANY_OPENERS.finditer(compact):
        index += compact.count(b"\n", scanned, match.start())
        scanned = match.start()
        if too_deep(lines[index]):
            deep.add(index)
    return frozenset(deep)


def check_depth(data: bytes | str) -> None:
    """Refuse JSON text nested deeper than ``MAX_DEPTH``, before any decoder recurses into it.

    Raises:
        CanonicalJsonError: ``nested deeper than 256 levels at /``.
    """
    if too_deep(data):
        raise CanonicalJsonError("/", DEPTH_REASON)


def value_too_deep(value: Any) -> bool:
    """Tell whether a decoded value nests lists/dicts deeper than ``MAX_DEPTH`` (no recursion)."""
    level: list[tuple[Any, int]] = [(value, 0)]
    while level:
        item, depth = level.pop()
        if isinstance(item, dict | list | tuple):
            if depth + 1 > MAX_DEPTH:
                return True
            children = item.values() if isinstance(item, dict) else item
            level.extend((child, depth + 1) for child in children)
    return False


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


def _prepare(value: Any, path: list[str | int], ordered: bool = False) -> Any:
    """Validate ``value`` and replace floats by their canonical raw text.

    ``ordered``: keep each object's keys in their order instead of sorting them.
    """
    if value is None or value is True or value is False:
        return value
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise CanonicalJsonError(pointer(path) or "/", "lone surrogate in a string") from None
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
        if value.is_integer() and abs(value) < 1e21:
            # JavaScript prints these as plain integer literals beyond the safe range, which
            # would read back as unsafe integers: refuse them like the integers they print as.
            raise CanonicalJsonError(pointer(path) or "/", "integer outside +-(2^53-1)")
        return msgspec.Raw(_js_number(value).encode())
    if len(path) >= MAX_DEPTH:
        raise CanonicalJsonError(pointer(path) or "/", DEPTH_REASON)
    if isinstance(value, Mapping):
        if not all(isinstance(key, str) for key in value):
            raise CanonicalJsonError(pointer(path) or "/", "object key is not a string")
        for key in value:
            if not key.isascii():
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    # The key itself may be data: name its parent, not the key.
                    raise CanonicalJsonError(
                        pointer(path) or "/", "lone surrogate in an object key"
                    ) from None
        out: dict[str, Any] = {}
        for key in list(value) if ordered else _sorted_keys(value):
            path.append(key)
            out[key] = _prepare(value[key], path, ordered)
            path.pop()
        return out
    if isinstance(value, list | tuple):
        items = []
        for index, item in enumerate(value):
            path.append(index)
            items.append(_prepare(item, path, ordered))
            path.pop()
        return items
    raise CanonicalJsonError(pointer(path) or "/", f"{type(value).__name__} is not a JSON value")


def canonical_bytes(value: Any) -> bytes:
    """Encode ``value`` in the strict canonical profile.

    Raises:
        CanonicalJsonError: the value has no canonical form (location in the message).
    """
    quick = _sorted_encoding(value)
    if quick is not None:
        return quick
    try:
        return _ENCODER.encode(_prepare(value, []))
    except RecursionError:
        raise CanonicalJsonError("/", DEPTH_REASON) from None


def ordered_bytes(value: Any) -> bytes:
    """Encode ``value`` in the strict profile with each object's keys in their own order.

    The text a JavaScript host would print for the same value (``JSON.stringify``): what a
    replay serves where the host shows the JSON itself. Never hashed: digests take
    ``canonical_bytes``.

    Raises:
        CanonicalJsonError: the value has no strict form (location in the message).
    """
    try:
        return _ENCODER.encode(_prepare(value, [], ordered=True))
    except RecursionError:
        raise CanonicalJsonError("/", DEPTH_REASON) from None


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


_STRICT_JSON = json.JSONDecoder(
    object_pairs_hook=_Strict.pairs,
    parse_constant=_Strict.constant,
    parse_int=_Strict.integer,
    parse_float=_Strict.real,
)


def loads_strict(data: bytes | str) -> Any:
    """Decode JSON text, refusing duplicate keys, NaN/Infinity, -0 and unsafe integers.

    Raises:
        CanonicalJsonError: the text is not JSON or breaks the profile.
    """
    check_depth(data)
    quick = _strict_quick(data)
    return quick if quick is not NOT_CANONICAL else _strict_slow(data)


def _strict_slow(data: bytes | str) -> Any:
    """``loads_strict`` through ``json`` with the profile's hooks (after the depth check)."""
    try:
        # What ``json.loads`` does with bytes, without building a decoder per call.
        text = data if isinstance(data, str) else data.decode(json.detect_encoding(data), "surrogatepass")
        return _STRICT_JSON.decode(text)
    except CanonicalJsonError:
        raise
    except RecursionError:
        raise CanonicalJsonError("/", DEPTH_REASON) from None
    except ValueError as exc:
        position = getattr(exc, "pos", None)
        where = f"byte {position}" if position is not None else "/"
        raise CanonicalJsonError(where, "not valid JSON") from None


def _plain_float(text: str) -> float:
    """Accept a float literal only if JavaScript prints it the same way (else: slow path)."""
    # Exponents, integral floats (`1.0` is `1` in JS) and non-shortest forms differ; -0.0 too.
    if "e" in text or "E" in text or text.endswith(".0"):
        raise ValueError(text)
    value = float(text)
    if repr(value) != text:
        raise ValueError(text)
    return value


_CHECKER = msgspec.json.Decoder(float_hook=_plain_float)
_SORTED = msgspec.json.Encoder(order="sorted")
# Digits become `0` and UTF-8 lead bytes of characters above U+FFFF become `!`, so one C-speed
# pass finds a 16-digit run (a possibly unsafe integer) or an astral character (UTF-16 and
# code-point key orders differ only there).
_MARKS = bytes.maketrans(b"0123456789\xf0\xf1\xf2\xf3\xf4", b"0000000000!!!!!")
_LONG_DIGITS = b"0" * 16


_DIGITS = bytes.maketrans(b"0123456789", b"0000000000")
_PLAIN = msgspec.json.Encoder()


def _strict_quick(data: bytes | str) -> Any:
    """The value ``loads_strict`` returns for ``data`` when C speed can prove it, else ``NOT_CANONICAL``.

    msgspec decodes without the profile's hooks; the value stands when re-encoding it (key
    order kept) gives exactly the input with whitespace removed. A duplicate key drops a
    member and so changes that text; a non-shortest or negative-zero float is refused by the
    float hook, ``-0`` re-encodes as ``0``, and a 16-digit run (a possibly unsafe integer)
    goes to the slow path first. Anything else unusual (escapes, other encodings) differs too.
    """
    try:
        raw = data.encode() if isinstance(data, str) else data
        if _LONG_DIGITS in raw.translate(_DIGITS):
            return NOT_CANONICAL
        value = _CHECKER.decode(raw)
        if _PLAIN.encode(value) == msgspec.json.format(raw, indent=-1):
            return value
    except (msgspec.DecodeError, UnicodeEncodeError, TypeError, RecursionError):
        pass
    return NOT_CANONICAL


class _NotCanonical:
    """The type of ``NOT_CANONICAL``."""

    def __repr__(self) -> str:
        return "NOT_CANONICAL"


NOT_CANONICAL = _NotCanonical()


def _sorted_encoding(value: Any) -> bytes | None:
    """msgspec's sorted encoding of ``value`` when it is provably the profile's, else ``None``.

    The C-speed path of ``decode_canonical`` applied to the encoding: when it reads back as a
    value equal to ``value``, nothing in ``value`` needed ``_prepare`` (a NaN reads back as
    ``null``, a tuple as a list, an unsafe integer or an astral key is sent to ``_prepare``).
    """
    try:
        encoded = _SORTED.encode(value)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None  # not JSON, a lone surrogate, or too deep: ``_prepare`` names it
    marked = encoded.translate(_MARKS)
    if b"!" in marked or _LONG_DIGITS in marked or too_deep(encoded):
        return None
    try:
        same = bool(_CHECKER.decode(encoded) == value)
    except msgspec.DecodeError:
        return None  # a float JavaScript prints differently
    return encoded if same else None


def decode_canonical(line: bytes) -> Any:
    """Decode ``line`` if it is byte-for-byte the canonical encoding of what it holds.

    Returns the value, or ``NOT_CANONICAL``.

    Verifiers call this per line. Most lines take a C-speed path: when every float literal is
    printed as JavaScript prints it, no integer has 16 digits and no character is above
    U+FFFF, msgspec's sorted encoding is the profile's, so one decode and one encode decide.
    Other lines are checked by ``canonical_bytes``. A line nested deeper than ``MAX_DEPTH`` is
    ``NOT_CANONICAL`` (``loads_strict`` names the reason).
    """
    if too_deep(line):
        return NOT_CANONICAL
    marked = line.translate(_MARKS)
    if b"!" not in marked and _LONG_DIGITS not in marked:
        try:
            value = _CHECKER.decode(line)
        except msgspec.DecodeError:
            value = NOT_CANONICAL  # a float JavaScript prints differently, or not JSON
        if value is not NOT_CANONICAL:
            try:
                return value if _SORTED.encode(value) == line else NOT_CANONICAL
            except UnicodeEncodeError:
                return NOT_CANONICAL
    try:
        value = _DECODER.decode(line)
        return value if canonical_bytes(value) == line else NOT_CANONICAL
    except (msgspec.DecodeError, CanonicalJsonError, RecursionError):
        return NOT_CANONICAL


def is_canonical(line: bytes) -> bool:
    """Tell whether ``line`` is byte-for-byte the canonical encoding of what it holds.

    A duplicate key, a non-sorted key, whitespace or a non-canonical number all change the
    bytes of the re-encoding.
    """
    return decode_canonical(line) is not NOT_CANONICAL
