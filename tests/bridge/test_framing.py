"""``LineFramer``: chunks in, lines out, the cap counted before the newline."""

from __future__ import annotations

import pytest

from dsh_sidecar.bridge.transport.framing import LineFramer


def frame(chunks: list[bytes], max_line: int) -> tuple[list[bytes], bool]:
    framer = LineFramer(max_line)
    lines = [line for chunk in chunks for line in framer.feed(chunk)]
    return lines, framer.too_long


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


@pytest.mark.parametrize("size", [0, 1])
def test_nothing_after_the_cap_is_framed_whatever_arrives(size: int) -> None:
    framer = LineFramer(2)
    assert framer.feed(b"abc\n") == []
    assert framer.feed(b"x" * size + b"\n") == []
