"""Opening user-named files: regular files only, never a hang, one wording per refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_sidecar.python_core.files import FileRefused, display_name, open_regular


def refused(path: Path | str, *, follow: bool = True) -> str:
    with pytest.raises(FileRefused) as info:
        open_regular(path, follow=follow)
    return info.value.reason


def test_a_regular_file_and_a_symlink_to_it_open(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"data")
    os.symlink("f", tmp_path / "link")
    for name in ("f", "link"):
        with open_regular(tmp_path / name) as handle:
            assert handle.read() == b"data"


def test_a_fifo_with_no_writer_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    assert refused(tmp_path / "fifo") == "is not a regular file (a FIFO, device or socket)"


def test_a_device_is_refused() -> None:
    assert refused("/dev/null") == "is not a regular file (a FIFO, device or socket)"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    assert refused(tmp_path) == "is a directory"


def test_a_symlink_loop_reads_one_way_whether_followed_or_not(tmp_path: Path) -> None:
    os.symlink("loop", tmp_path / "loop")
    assert refused(tmp_path / "loop") == "is a symlink loop"
    os.symlink("other", tmp_path / "a")
    os.symlink("a", tmp_path / "other")
    assert refused(tmp_path / "a") == "is a symlink loop"


def test_a_symlink_is_refused_where_links_are_not_allowed(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"")
    os.symlink("f", tmp_path / "link")
    assert refused(tmp_path / "link", follow=False) == "is a symlink, refused here"


def test_missing_and_nul_names_are_refused(tmp_path: Path) -> None:
    assert refused(tmp_path / "absent") == "no such file"
    assert refused(str(tmp_path) + "/a\0b") == "the name holds a NUL byte"


def test_display_names_drop_directories_and_escape_control_characters() -> None:
    assert display_name("/secret/dir/c.ndjson") == "c.ndjson"
    assert display_name("/x/bad\x1bname\n") == "bad\\u001bname\\u000a"
    assert display_name("/x/\udc80.json") == "\\udc80.json"
    assert display_name("/") == "file"
