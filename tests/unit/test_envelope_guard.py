"""Lines the envelope decoder cannot take still yield their request id and a named reason."""

from __future__ import annotations

import pytest

from python_core.envelope_guard import line_error, request_id

DEEP = b"[" * 3000 + b"]" * 3000


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"jsonrpc":"2.0","id":7,"method":"tools/execute","params":' + DEEP + b"}", 7),
    (b'{"params":{"id":3,"text":"\\ud800"},"id":"abc"}', "abc"),
    (b'{"jsonrpc":"2.0","id":70}', 70),
    (b'{"\\udc00":1, "id" : 5 }', 5),
    (b'{"jsonrpc":"2.0","method":"x"}', None),
    (b'{"id":[1]}', None),
    (b'{"id":{"a":1}}', None),
    (b"[1,2]", None),
    (b"not json", None),
    (b'{"id":"\\ud800"}', None),
])
def test_the_top_level_id_is_found_without_decoding_the_rest(line: bytes, expected: object) -> None:
    assert request_id(line) == expected


def test_too_deep_and_lone_surrogates_are_named() -> None:
    assert str(line_error(b'{"id":1,"params":' + DEEP + b"}")) == (
        "NON_CANONICAL_JSON: nested deeper than 256 levels at /"
    )
    for text in (b'"\\ud800"', b'"\\udc00x"', b'"a\\uD83Dz"', b'{"\\ud800":1}'):
        assert str(line_error(text)) == "NON_CANONICAL_JSON: lone surrogate in a string at /", text


def test_paired_surrogates_and_escaped_backslashes_are_fine() -> None:
    assert line_error(b'{"a":"\\ud83d\\ude00","b":"\\\\ud800"}') is None
    assert line_error(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{}}') is None
