"""The fuzz tests' home and their ``fuzz`` fixture: seeded generators and mutators.

Every fuzz test lives under ``tests/fuzz/`` (the folders mirror ``tests/unit`` and ``tests/bridge``,
whose fixtures the sub-folders' conftests import rather than copy) and takes its seed from one
variable, ``DSH_FUZZ_SEED``; unset, each test keeps its fixed default (the three mutation fuzzers
of whole cassette and script files take their size, 3,000 a generator, from ``DSH_FUZZ_CASES``:
set it higher for a longer search). Bounded and reproducible:
each test feeds a fixed number of inputs and asserts only named errors; the seed is printed at
setup and shown in the fixture's ``repr`` (so a failing assertion names it), and the modules that
seed ``random.Random`` themselves put it in every assertion message.
"""

from __future__ import annotations

import os
import random
import sys
from typing import Any

import pytest

DEFAULT_SEED = 20261201
# Fragments that break parsers: deep nesting, lone surrogates (escaped, in keys and values,
# and as raw UTF-8 bytes), NULs, controls, huge and negative-zero numbers, invalid UTF-8.
_POISON = [
    b"[" * 300, b"{\"a\":" * 300, b"]" * 50, b"}", b"{", b"\"\\ud800\"", b"{\"\\ud800\":1}",
    b"{\"\\udfff\":{\"\\ud83d\":2}}", b"\"\\ud83d\\ude00\"", b"\\u0000", b"\x00", b"\x1b", b"\n",
    b"\r\n", b"\xed\xa0\x80", b"\xff\xfe", b"\xf0\x9f\x98\x80", b"-0", b"1e400", b"9007199254740993",
    b"NaN", b"Infinity", b"\"", b"\\", b",", b":", b"null", b"true", b"[]", b"{}", b"0.1", b"\t",
]


class Fuzz:
    """Seeded generators; ``count`` tallies the inputs each test fed."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.count = 0

    def __repr__(self) -> str:
        return f"Fuzz(seed={self.seed})"

    def mutate(self, data: bytes) -> bytes:
        """Apply 1-3 random edits to ``data``."""
        rng = self.rng
        out = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(out))
            op = rng.randrange(8)
            if op == 0 and out:
                out[min(at, len(out) - 1)] = rng.randrange(256)
            elif op == 1:
                out[at:at] = rng.choice(_POISON)
            elif op == 2 and out:
                end = min(len(out), at + rng.randint(1, 40))
                del out[at:end]
            elif op == 3 and out:
                end = min(len(out), at + rng.randint(1, 80))
                out[at:at] = out[at:end]
            elif op == 4:
                depth = rng.choice([255, 256, 257, 600, 2000])
                out[at:at] = b"[" * depth + b"1" + b"]" * depth
            elif op == 5:
                del out[at:]
            elif op == 6:
                lines = bytes(out).split(b"\n")
                i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
                lines[i], lines[j] = lines[j], lines[i]
                out = bytearray(b"\n".join(lines))
            else:
                digits = str(rng.choice([0, -1, 2**53, 2**64, 10**400 if rng.random() < 0.1 else 7]))
                out[at:at] = digits.encode()
        return bytes(out)

    def string(self) -> str:
        """A short string with ASCII, non-BMP characters, controls and lone surrogates."""
        rng = self.rng
        pool = "ab\"\\/\x00\x1f\u2028\ud800\udfff\U0001f600\U0010ffff\ue000é"
        return "".join(rng.choice(pool) for _ in range(rng.randint(0, 6)))

    def value(self, depth: int = 0) -> Any:
        """A random JSON-ish value (keys may hold lone surrogates)."""
        rng = self.rng
        kind = rng.randrange(9 if depth < 4 else 6)
        if kind == 0:
            return None
        if kind == 1:
            return rng.random() < 0.5
        if kind == 2:
            return rng.choice([0, -1, 1, 2**53 - 1, 2**53, -(2**60), rng.randint(-1000, 1000)])
        if kind == 3:
            return rng.choice([0.5, -0.0, 1e21, float("nan"), 1.5e-7, rng.uniform(-1e9, 1e9)])
        if kind in (4, 5):
            return self.string()
        if kind == 6:
            return [self.value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {self.string(): self.value(depth + 1) for _ in range(rng.randint(0, 3))}


@pytest.fixture
def fuzz() -> Fuzz:
    """A seeded ``Fuzz``; the seed is printed so a failure can be replayed."""
    seed = int(os.environ.get("DSH_FUZZ_SEED", DEFAULT_SEED))
    print(f"fuzz seed: {seed} (set DSH_FUZZ_SEED to change it)", file=sys.stderr)
    return Fuzz(seed)
