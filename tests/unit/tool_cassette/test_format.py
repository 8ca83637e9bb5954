"""Frames: closed Structs, canonical lines, the hash over the frame without its hash."""

from __future__ import annotations

import msgspec
import pytest

from dsh_sidecar.python_core.canonical import digest_bytes, is_canonical
from dsh_sidecar.python_core.cassette_io import frame_hash
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.tool_cassette.format import (
    GENESIS,
    HeaderFrame,
    StartFrame,
    canonical_payload,
    canonical_text,
    decode_frame,
    probe_header,
    seal,
)


def start_frame(**fields: object) -> StartFrame:
    args = msgspec.Raw(b'{"city":"x"}')
    values: dict[str, object] = {
        "seq": 1, "prev": GENESIS, "ordinal": 0, "path": "root/0", "tool": "weather",
        "args": args, "argsDigest": digest_bytes(args),
    }
    values.update(fields)
    return StartFrame(**values)  # type: ignore[arg-type]


def test_sealed_line_is_canonical_and_newline_terminated() -> None:
    _, line = seal(start_frame())
    assert line.endswith(b"\n")
    assert is_canonical(line[:-1])
    assert line.startswith(b'{"args":{"city":"x"},"argsDigest":"sha256:')


def test_hash_covers_the_frame_without_its_hash() -> None:
    frame = start_frame()
    sealed, line = seal(frame)
    unhashed = (
        b'{"args":{"city":"x"},"argsDigest":"' + frame.argsDigest.encode() + b'",'
        b'"kind":"call/start","ordinal":0,"path":"root/0","prev":"' + GENESIS.encode()
        + b'","seq":1,"tool":"weather"}'
    )
    assert sealed.hash == digest_bytes(unhashed)
    assert frame_hash(sealed) == sealed.hash
    assert decode_frame(line[:-1]) == sealed


def test_genesis_is_sha256_prefixed_zeroes() -> None:
    assert GENESIS == "sha256:" + "0" * 64


def test_frames_refuse_unknown_fields() -> None:
    _, line = seal(start_frame())
    with pytest.raises(msgspec.ValidationError, match="unknown field `extra`"):
        decode_frame(line[:-2] + b',"extra":1}')


def test_frames_refuse_unknown_kinds() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_frame(b'{"kind":"call/retry","seq":0,"prev":"x"}')


def test_probe_reads_version_despite_unknown_fields() -> None:
    assert probe_header(b'{"kind":"header","protocol":"p","version":7,"new":1}') == (
        "header", "p", 7,
    )


def test_header_records_include_patterns() -> None:
    sealed, line = seal(HeaderFrame(
        seq=0, prev=GENESIS, protocol="dsh-tool-cassette", version=1, include=("a*",)
    ))
    assert b'"include":["a*"]' in line
    assert decode_frame(line[:-1]) == sealed


def test_canonical_text_sorts_keys_recursively_and_prints_numbers_like_node() -> None:
    text = b'{"unit":"c","city":{"z":1.0,"a":[2,1e21]}}'
    assert bytes(canonical_text(text)) == b'{"city":{"a":[2,1e+21],"z":1},"unit":"c"}'


def test_canonical_text_refuses_duplicate_keys() -> None:
    with pytest.raises(CanonicalJsonError):
        canonical_text(b'{"a":1,"a":2}')


def test_lone_surrogates_are_a_canonical_error_not_a_crash() -> None:
    with pytest.raises(CanonicalJsonError, match="lone surrogate in a string"):
        canonical_payload(["\ud800"])


def test_invalid_model_json_arrives_as_a_json_string_and_is_kept() -> None:
    assert bytes(canonical_text(b'"{not json"')) == b'"{not json"'
