"""Fuzz: random lines cut anywhere frame as the reference framing (moved from
``tests/bridge/test_framing.py``). ``DSH_FUZZ_SEED`` picks the seed; each assertion names it."""

from __future__ import annotations

import os
import random

from tests.bridge.test_framing import frame

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261202"))


def expected(data: bytes, max_line: int) -> tuple[list[bytes], bool]:
    """The reference: every complete line before the first one over the cap."""
    *complete, tail = data.split(b"\n")
    lines: list[bytes] = []
    for line in complete:
        if len(line) > max_line:
            return lines, True
        lines.append(line)
    return lines, len(tail) > max_line


def test_random_lines_cut_anywhere_frame_as_the_reference() -> None:
    rng = random.Random(SEED)
    for _ in range(5_000):
        max_line = rng.choice([1, 4, 16, 64])
        data = b"".join(
            bytes(rng.choice(b'ab{}":\r ') for _ in range(rng.choice([0, 1, 3, max_line, max_line + 1, 40])))
            + (b"\n" if rng.random() < 0.9 else b"")
            for _ in range(rng.randrange(1, 12))
        )
        cuts = sorted(rng.sample(range(1, len(data)), min(rng.randrange(0, 6), len(data) - 1))) if len(data) > 1 else []
        chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert frame(chunks, max_line) == expected(data, max_line), (SEED, data, cuts, max_line)
