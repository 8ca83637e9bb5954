"""Store: exclusive partial, fsync'd appends, create-only publish, verify and load."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.python_core.cassette_io import partial_path
from dsh_sidecar.python_core.tool_cassette.errors import CassetteExists, CassetteIOError
from dsh_sidecar.python_core.tool_cassette.format import GENESIS, PROTOCOL, VERSION, HeaderFrame
from dsh_sidecar.python_core.tool_cassette.store import Recorder, load, verify_file


def header() -> HeaderFrame:
    return HeaderFrame(seq=0, prev=GENESIS, protocol=PROTOCOL, version=VERSION, include=("a",))


def test_recorder_creates_a_private_partial_and_chains_frames(tmp_path: Path) -> None:
    recorder = Recorder.create(str(tmp_path / "c.jsonl"))
    first = recorder.append(header())
    second = recorder.append(header())
    recorder.abandon()
    partial = tmp_path / "c.jsonl.partial"
    assert stat.S_IMODE(partial.stat().st_mode) == 0o600
    assert (first.seq, second.seq, second.prev) == (0, 1, first.hash)
    assert partial.read_bytes().count(b"\n") == 2


def test_publish_links_create_only_and_removes_the_partial(tmp_path: Path) -> None:
    path = str(tmp_path / "c.jsonl")
    recorder = Recorder.create(path)
    recorder.append(header())
    recorder.publish()
    assert os.path.exists(path) and not os.path.exists(partial_path(path))


def test_publish_never_overwrites_a_file_that_appeared_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    recorder = Recorder.create(str(path))
    recorder.append(header())
    path.write_bytes(b"someone else's")
    with pytest.raises(CassetteExists, match=r"c\.jsonl already exists"):
        recorder.publish()
    assert path.read_bytes() == b"someone else's"
    assert os.path.exists(partial_path(str(path)))


def test_append_after_abandon_is_an_io_error(tmp_path: Path) -> None:
    recorder = Recorder.create(str(tmp_path / "c.jsonl"))
    recorder.abandon()
    with pytest.raises(CassetteIOError, match=r"cannot append to c\.jsonl\.partial: EBADF"):
        recorder.append(header())


def test_create_makes_the_missing_directories_private(tmp_path: Path) -> None:
    # As `.dsh-cassettes/<name>.tool-cassette.jsonl` in a fresh project: the directory is made.
    recorder = Recorder.create(str(tmp_path / ".dsh-cassettes" / "deep" / "c.jsonl"))
    recorder.abandon()
    assert (tmp_path / ".dsh-cassettes" / "deep" / "c.jsonl.partial").is_file()
    for directory in (tmp_path / ".dsh-cassettes", tmp_path / ".dsh-cassettes" / "deep"):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_create_under_a_file_names_only_the_base_name(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(CassetteIOError) as info:
        Recorder.create(str(tmp_path / "a-file" / "sub" / "c.jsonl"))
    assert str(info.value) == "CASSETTE_IO: cannot create the directory of c.jsonl: a directory in its path is a file"


def test_load_returns_calls_in_ordinal_order(make_cassette: Any) -> None:
    cassette = load(str(make_cassette()))
    assert [call.path for call in cassette.calls] == ["root/0", "root/1", "root/2"]
    assert [call.result.ordinal for call in cassette.calls] == [0, 1, 2]
    assert cassette.header.include == ("weather_*", "mcp_*_read")


def test_verify_reports_counts_of_a_valid_file(make_cassette: Any) -> None:
    report = verify_file(str(make_cassette()))
    assert (report.valid, report.version, report.frames, report.calls) == (True, 5, 8, 3)
    assert report.tools == {"mcp_fs_read": 1, "weather_lookup": 2}
    assert report.error is None


def test_verify_of_a_missing_file_is_an_io_error(tmp_path: Path) -> None:
    with pytest.raises(CassetteIOError) as info:
        verify_file(str(tmp_path / "nope.jsonl"))
    assert str(info.value) == "CASSETTE_IO: cannot read nope.jsonl: no such file"


def test_empty_file_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_bytes(b"")
    assert str(verify_file(str(path)).error) == "CASSETTE_INVALID: empty file"
