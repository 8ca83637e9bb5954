"""Chunk arrays: summary and canonical check, on the fast path and off it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.canonical import canonical_bytes
from dsh_sidecar.python_core.model_cassette.format import ChunkFacts, checked_chunks


def test_known_chunk_shapes_are_summarized_and_canonical(kit: Any) -> None:
    text = canonical_bytes(json.loads(kit.text_chunks()))
    tool = canonical_bytes(json.loads(kit.tool_chunks()))

    assert checked_chunks(text) == (ChunkFacts(5, "stop", 0), True)
    assert checked_chunks(tool) == (ChunkFacts(3, "tool-calls", 1), True)


@pytest.mark.parametrize("chunk", [
    {"type": "finish", "reason": {"kind": "stop"}, "replayState": {"response": {"x": [1, 2]}}},
    {"type": "finish", "reason": {"kind": "error", "failure": {"code": "SERVER", "message": "m", "status": 500}}},
    {"type": "block-end", "index": 0, "block": {"type": "image", "attachment": {"id": "a"}}},
    {"type": "usage", "usage": {"inputTokens": 1.5, "outputTokens": 1}},
])
def test_other_shapes_take_the_generic_check(chunk: dict[str, Any]) -> None:
    facts, canonical = checked_chunks(canonical_bytes([chunk]))

    assert canonical and facts.count == 1


@pytest.mark.parametrize("text", [
    b'[{"type":"finish", "reason":{"kind":"stop"}}]',
    b'[{"type":"finish","type":"finish","reason":{"kind":"stop"}}]',
    b'[{"reason":{"kind":"stop"},"type":"finish"},{"type":"usage","usage":{"inputTokens":9007199254740993,"outputTokens":1}}]',
    b'[{"index":0,"text":"\\u0061","type":"text-delta"}]',
])
def test_non_canonical_spellings_are_refused(text: bytes) -> None:
    assert checked_chunks(text)[1] is False


def test_something_that_is_not_a_chunk_array_raises() -> None:
    with pytest.raises(msgspec.DecodeError):
        checked_chunks(b'{"type":"finish"}')
