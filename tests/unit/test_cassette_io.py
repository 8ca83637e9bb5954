"""The cassette I/O kit: names, reasons, the hash chain, batched durable writes."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.canonical import canonical_bytes, digest
from dsh_sidecar.python_core.cassette_io import (
    GENESIS,
    Chain,
    check_header_line,
    display_name,
    line_hash,
    make_directories,
    mapping_hash,
    reason_of,
    schema_location,
    seal_mapping,
)
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteIOError
from dsh_sidecar.python_core.model_cassette.store import Recorder as ModelRecorder
from dsh_sidecar.python_core.tool_cassette.errors import CassetteExists, CassetteInvalid
from dsh_sidecar.python_core.tool_cassette.format import GENESIS as TOOL_GENESIS
from dsh_sidecar.python_core.tool_cassette.format import HeaderFrame
from dsh_sidecar.python_core.tool_cassette.store import Recorder


def test_display_name_is_the_escaped_base_name() -> None:
    assert display_name("/srv/example/secret dir/c\x1b[2J.jsonl") == "c\\u001b[2J.jsonl"
    assert "/" not in display_name("/abs/path/x.jsonl")


@pytest.mark.parametrize(("code", "reason"), [
    (errno.ENOENT, "no such file"), (errno.EACCES, "permission denied"), (errno.ENOSPC, "ENOSPC"),
])
def test_os_failures_read_the_same_in_every_cassette(code: int, reason: str) -> None:
    assert reason_of(OSError(code, "x", "/secret/path")) == reason


def test_schema_location_names_the_path_or_the_root() -> None:
    class Point(msgspec.Struct):
        x: int

    with pytest.raises(msgspec.ValidationError) as nested:
        msgspec.json.decode(b'{"x":"a"}', type=Point)
    with pytest.raises(msgspec.DecodeError) as root:
        msgspec.json.decode(b"[", type=Point)
    assert (schema_location(nested.value), schema_location(root.value)) == ("$.x", "$")


def test_chain_numbers_links_and_seals_frames_verifiably() -> None:
    chain = Chain()
    header = HeaderFrame(seq=9, prev="x", protocol="p", version=1, include=("a",))
    first, first_line = chain.link(header)
    second, second_line = chain.link(header)
    assert TOOL_GENESIS == GENESIS and first.prev == GENESIS
    assert (first.seq, second.seq, second.prev) == (0, 1, first.hash)
    assert line_hash(second, second_line[:-1]) == second.hash
    assert first_line.endswith(b"\n") and b" " not in first_line


def test_mapping_hash_splices_canonical_lines_and_canonicalises_the_rest() -> None:
    body: dict[str, Any] = {"kind": "k", "b": [1, 2], "a": "x"}
    record_hash, line = seal_mapping(body)
    assert record_hash == digest(body)
    value = msgspec.json.decode(line)
    assert mapping_hash(value, line[:-1]) == record_hash
    assert mapping_hash(value, None) == record_hash
    assert line[:-1] == canonical_bytes(value)


def test_lines_written_together_are_durable_together_and_in_order(tmp_path: Path) -> None:
    recorder = Recorder.create(str(tmp_path / "c.jsonl"))
    recorder.write_lines([b"one\n", b"two\n", b"three\n"])
    recorder.abandon()
    assert (tmp_path / "c.jsonl.partial").read_bytes() == b"one\ntwo\nthree\n"


def test_each_cassette_names_its_own_errors_from_the_shared_file(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(b"")
    with pytest.raises(CassetteExists):
        Recorder.create(str(path))
    with pytest.raises(ModelCassetteIOError) as info:
        ModelRecorder.create(str(tmp_path / "missing" / "m.ndjson"))
    assert str(info.value) == "MODEL_CASSETTE_IO: cannot create m.ndjson.partial: no such file"
    assert not os.path.exists(tmp_path / "missing")


_UNSUPPORTED = "line 1 header: unsupported protocol version {} (this build reads 1 and 2)"


@pytest.mark.parametrize(("line", "reason"), [
    (b"[1]", "line 1: not a JSON object"),
    (b'{"kind":"call"}', "line 1: first frame is not a header"),
    (b'{"kind":"header","protocol":"other"}', "line 1 header: not a p file"),
    (b'{"kind":"header","protocol":"p","version":3}', _UNSUPPORTED.format(3)),
    (b'{"kind":"header","protocol":"p","version":{}}', _UNSUPPORTED.format("?")),
    (b'{"kind":"header","protocol":"p","version":[1]}', _UNSUPPORTED.format("?")),
    (b'{"kind":"header","protocol":"p","version":true}', _UNSUPPORTED.format("?")),
    (b'{"kind":"header","protocol":"p","version":1.5}', _UNSUPPORTED.format("?")),
])
def test_the_header_probe_names_every_foreign_line_1(line: bytes, reason: str) -> None:
    with pytest.raises(CassetteInvalid) as caught:
        check_header_line(line, protocol="p", readable=(1, 2), reads="1 and 2", invalid=CassetteInvalid)
    assert caught.value.message == reason


def test_the_header_probe_passes_a_readable_header_with_unknown_members() -> None:
    check_header_line(b'{"kind":"header","protocol":"p","version":2,"new":{}}', protocol="p", readable=(1, 2),
                      reads="1 and 2", invalid=CassetteInvalid)


def test_a_bare_relative_name_needs_no_directory_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its parent was "", which never exists: the walk up never ended (an import's `--tool-cassette t.ndjson`).
    monkeypatch.chdir(tmp_path)
    make_directories("t.ndjson")
    make_directories("made/t.ndjson")

    assert sorted(p.name for p in tmp_path.iterdir()) == ["made"]
