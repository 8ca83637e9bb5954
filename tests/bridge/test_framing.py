"""``LineFramer``: chunks in, lines out, the cap counted before the newline."""

from __future__ import annotations

import os
import random

import pytest

from dsh_sidecar.bridge.transport.framing import LineFramer

SEED = int(os.environ.get("FRAMING_FUZZ_SEED", "20261202"))


def frame(chunks: list[bytes], max_line: int) -> tuple[list[bytes], bool]:
    framer = LineFramer(max_line)
    lines = [line for chunk in chunks for line in framer.feed(chunk)]
    return lines, framer.too_long


def expected(data: bytes, max_line: int) -> tuple[list[bytes], bool]:
    """The reference: every complete line before the first one over the cap."""
    *complete, tail = data.split(b"\n")
    lines: list[bytes] = []
    for line in complete:
        if len(line) > max_line:
            return lines, True
        lines.append(line)
    return lines, len(tail) > max_line


def test_a_line_split_across_chunks_is_one_line() -> None:
    assert frame([b'{"a"', b":1}\n{", b'"b":2}\n'], 100) == ([b'{"a":1}', b'{"b":2}'], False)


def test_empty_lines_are_framed_and_a_partial_line_is_held() -> None:
    framer = LineFramer(100)
    assert framer.feed(b"\n\nab") == [b"", b""]
    assert framer.feed(b"c\n") == [b"abc"]


def test_exactly_max_line_bytes_is_a_line_and_one_more_ends_the_framing() -> None:
    assert frame([b"abc\n"], 3) == ([b"abc"], False)
    assert frame([b"ab\nabcd\nef\n"], 3) == ([b"ab"], True)


def test_a_held_part_over_the_cap_ends_the_framing_before_its_newline() -> None:
    framer = LineFramer(3)
    assert framer.feed(b"ok\nab") == [b"ok"]
    assert framer.feed(b"cd") == []
    assert framer.too_long
    assert framer.feed(b"\nfine\n") == []


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


@pytest.mark.parametrize("size", [0, 1])
def test_nothing_after_the_cap_is_framed_whatever_arrives(size: int) -> None:
    framer = LineFramer(2)
    assert framer.feed(b"abc\n") == []
    assert framer.feed(b"x" * size + b"\n") == []
