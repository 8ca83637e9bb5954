"""Verify rejects every tampering, truncation and reordering; load reads a verified file."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_sidecar.python_core.canonical import canonical_bytes
from dsh_sidecar.python_core.cassette_io import frame_hash
from dsh_sidecar.python_core.model_cassette import load, verify_file
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteInvalid
from dsh_sidecar.python_core.model_cassette.format import decode_frame


def _lines(path):  # type: ignore[no-untyped-def]
    return path.read_bytes().splitlines(keepends=True)


def test_a_recorded_cassette_verifies_and_loads(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    report = verify_file(str(path))

    assert report.valid and report.calls == 3 and report.lanes == {"model": 2, "session-title": 1}
    assert [c.lane for c in load(str(path)).calls] == ["model", "session-title", "model"]


@pytest.mark.parametrize("cut", [1, 2, 3, 4])
def test_truncation_is_rejected(make_cassette: Callable[..., Path], cut: int) -> None:
    path = make_cassette()
    path.write_bytes(b"".join(_lines(path)[:cut]))

    report = verify_file(str(path))
    assert not report.valid
    assert report.error is not None and "missing complete tail" in str(report.error)


def test_a_cut_mid_line_is_rejected(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 7])

    assert "truncated line" in str(verify_file(str(path)).error)


def test_an_edited_answer_breaks_the_hash(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes().replace(b"It is sunny", b"It is rainy"))

    error = verify_file(str(path)).error
    assert error is not None and "line 4, frame call, call 2: hash does not match the frame" in str(error)
    assert "sunny" not in str(error) and "rainy" not in str(error)


def test_a_resealed_edit_is_caught_by_the_chain_or_summaries(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    lines = _lines(path)
    frame = json.loads(lines[1])
    frame["toolCalls"] = 0  # lie about the chunks, then re-hash the frame properly
    del frame["hash"]
    frame["hash"] = frame_hash(decode_frame(canonical_bytes({**frame, "hash": "x"})))
    lines[1] = canonical_bytes(frame) + b"\n"
    path.write_bytes(b"".join(lines))

    error = verify_file(str(path)).error
    assert error is not None and "finish or toolCalls does not match the chunks" in str(error)


def test_swapped_frames_break_the_chain(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    lines = _lines(path)
    lines[1], lines[2] = lines[2], lines[1]
    path.write_bytes(b"".join(lines))

    assert "seq 2 where 1 expected" in str(verify_file(str(path)).error)


def test_random_byte_flips_are_all_rejected(make_cassette: Callable[..., Path]) -> None:
    seed = 1301
    print(f"seed={seed}")
    rng = random.Random(seed)
    path = make_cassette()
    original = path.read_bytes()
    for _ in range(200):
        data = bytearray(original)
        at = rng.randrange(len(data))
        data[at] = (data[at] + rng.randrange(1, 256)) % 256
        path.write_bytes(bytes(data))
        assert not verify_file(str(path)).valid, f"seed={seed} offset={at}"


def test_another_protocol_or_version_is_named(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes().replace(b'"version":2', b'"version":3', 1))

    assert "unsupported protocol version 3 (this build reads 1 and 2)" in str(verify_file(str(path)).error)


@pytest.mark.parametrize("version", [b"{}", b"[]", b'{"a":1}', b"[2]", b"true", b'"2"', b"null"])
def test_a_header_version_of_any_json_type_is_named(make_cassette: Callable[..., Path], version: bytes) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes().replace(b'"version":2', b'"version":' + version, 1))

    assert str(verify_file(str(path)).error) == (
        "MODEL_CASSETTE_INVALID: line 1, frame header: unsupported protocol version ? (this build reads 1 and 2)"
    )
    with pytest.raises(ModelCassetteInvalid, match=r"line 1, frame header: unsupported protocol version \?"):
        load(str(path))
