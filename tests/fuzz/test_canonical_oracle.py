"""Canonical JSON against an independent RFC 8785 implementation (``rfc8785``, test-only).

20,000 seeded values: random-bit doubles, integers at the safe edges, strings and keys with
non-BMP characters, U+E000..U+FFFF (where UTF-16 and code-point orders differ), controls and
escapes, nested up to 4 levels. Wherever both encoders accept a value the bytes must be
identical; the refusals are ours by design (-0, unsafe integers, integral floats past 2^53,
lone surrogates) and are counted, not compared. The seed is printed by the ``fuzz`` fixture.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import rfc8785

from dsh_sidecar.python_core.canonical import canonical_bytes
from dsh_sidecar.python_core.errors import CanonicalJsonError

N = 20_000
_CHARS = "az_\"\\/\x00\x07\x1f\x7f é\u2028\ue000\uffff\U00010000\U0001f600\U0010ffff"


def _double(fuzz: Any) -> float:
    while True:
        value: float = struct.unpack("<d", fuzz.rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(value):
            return value


def _text(fuzz: Any) -> str:
    return "".join(fuzz.rng.choice(_CHARS) for _ in range(fuzz.rng.randint(0, 5)))


def _value(fuzz: Any, depth: int = 0) -> Any:
    rng = fuzz.rng
    kind = rng.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return _double(fuzz)
    if kind == 1:
        return rng.choice([0, 1, -1, 2**53 - 1, -(2**53 - 1), rng.randint(-(2**53), 2**53)])
    if kind == 2:
        return rng.choice([None, True, False, 0.5, 1e21, 1e-7, 5e-324, 1.7976931348623157e308])
    if kind in (3, 4):
        return _text(fuzz)
    if kind == 5:
        return [_value(fuzz, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_text(fuzz): _value(fuzz, depth + 1) for _ in range(rng.randint(0, 5))}


def test_the_encoder_matches_rfc8785_byte_for_byte_wherever_both_accept(fuzz: Any) -> None:
    compared = ours_only_refused = doubles = 0
    for _ in range(N):
        value = _value(fuzz)
        doubles += isinstance(value, float)
        try:
            ours = canonical_bytes(value)
        except CanonicalJsonError:
            ours_only_refused += 1
            continue
        try:
            theirs = rfc8785.dumps(value)
        except rfc8785.CanonicalizationError:
            continue
        assert ours == theirs, (fuzz, value)
        compared += 1
    print(f"rfc8785 oracle: {N} values, {compared} identical, {ours_only_refused} refused by us, "
          f"{doubles} top-level random-bit doubles")
    assert compared >= N // 2 and doubles >= N // 10


def test_random_bit_doubles_alone_match(fuzz: Any) -> None:
    for _ in range(N):
        value = _double(fuzz)
        if value.is_integer() and abs(value) > 2**53 - 1 and abs(value) < 1e21:
            continue  # refused by us: JavaScript prints it as an unsafe integer literal
        if value == 0.0 and math.copysign(1.0, value) < 0:
            continue  # -0 is refused by our profile
        assert canonical_bytes(value) == rfc8785.dumps(value), (fuzz, value)
