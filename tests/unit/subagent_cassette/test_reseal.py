"""``dsh-sidecar subagent-cassette reseal``: a hand edit made valid again, or refused untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette.cli import cli
from dsh_sidecar.python_core.subagent_cassette.errors import (
    CassetteFormatError,
    CassetteLocked,
    CassetteNotFound,
)
from dsh_sidecar.python_core.subagent_cassette.format import ResultOutcome
from dsh_sidecar.python_core.subagent_cassette.reseal import reseal_file, reseal_lines
from dsh_sidecar.python_core.subagent_cassette.store import WriterLock, load, verify_file

from .conftest import BODY

EDITED = b"child says the ledger is off by one"


def _edit(path: Path) -> bytes:
    text = path.read_bytes()
    assert text.count(BODY.encode()) == 2
    edited = text.replace(BODY.encode(), EDITED, 1)
    path.write_bytes(edited)
    return edited


def test_an_edited_outcome_is_resealed_verified_and_loaded(recorded: Path) -> None:
    _edit(recorded)
    with pytest.raises(CassetteFormatError) as caught:
        verify_file(recorded)
    assert str(caught.value) == "CASSETTE_INTEGRITY_ERROR: rec.cassette.jsonl:2: interaction hash does not match"

    result = CliRunner().invoke(cli, ["reseal", str(recorded)])

    assert result.exit_code == 0, result.output
    assert result.output == (
        "resealed: 2 interactions, 3 records, 2 lines rewritten; the file is now yours (integrity proves only "
        "that nothing changed since this reseal)\n"
    )
    cassette = load(recorded)
    outcome = cassette.interactions[0].outcome
    assert isinstance(outcome, ResultOutcome)
    assert outcome.result["output"][0]["text"] == EDITED.decode()
    assert not (recorded.parent / "rec.cassette.jsonl.writer.lock").exists()


def test_an_unedited_cassette_reseals_to_the_same_bytes(recorded: Path) -> None:
    before = recorded.read_bytes()
    report = reseal_file(str(recorded), owner="o")
    assert (report.frames, report.calls, report.changed) == (3, 2, 0)
    assert recorded.read_bytes() == before


def test_blank_lines_are_dropped_and_counted(recorded: Path) -> None:
    lines = recorded.read_bytes().splitlines(keepends=True)
    out, report = reseal_lines([lines[0], b"\n", *lines[1:]])
    assert out == lines
    assert report.changed == 3  # two records moved up a line, and the file is a line shorter


def test_a_non_canonical_edit_is_refused_and_the_file_kept(recorded: Path) -> None:
    edited = recorded.read_bytes().replace(b'"sequence":2', b'"sequence": 2', 1)
    recorded.write_bytes(edited)
    with pytest.raises(CassetteFormatError) as caught:
        reseal_file(str(recorded), owner="o")
    assert str(caught.value) == (
        "CASSETTE_FORMAT_ERROR: rec.cassette.jsonl:3: not canonical JSON; reseal keeps content as written, so "
        "write it canonical (sorted keys, no spaces)"
    )
    assert recorded.read_bytes() == edited


def test_an_edit_the_parser_refuses_names_the_line_as_read(recorded: Path) -> None:
    # A repeated sequence breaks a rule reseal does not derive; line 4 of the file (after a
    # blank line) is the third record.
    lines = recorded.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"sequence":2', b'"sequence":1', 1)
    with pytest.raises(CassetteFormatError) as caught:
        reseal_lines([lines[0], b"\n", *lines[1:]], "rec.cassette.jsonl")
    assert str(caught.value) == "CASSETTE_FORMAT_ERROR: rec.cassette.jsonl:4: sequence 1 is repeated"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"a":1,"a":2}\n', "duplicate object key at an object"),
        (b"[1]\n", "record is not a JSON object"),
        (b"{\n", "not valid JSON at byte 1"),
        (b'{"kind":"cassette/interaction"}\n', "first record is not a cassette/header"),
    ],
)
def test_lines_it_cannot_vouch_for_are_named(line: bytes, reason: str) -> None:
    with pytest.raises(SidecarError) as caught:
        reseal_lines([line], "x.jsonl")
    assert str(caught.value).split(": ", 1)[1] == f"x.jsonl:1: {reason}"


def test_an_empty_file_has_no_header() -> None:
    with pytest.raises(CassetteFormatError, match=r"x.jsonl:1: missing cassette/header$"):
        reseal_lines([], "x.jsonl")


def test_a_cassette_being_recorded_is_not_resealed(recorded: Path) -> None:
    before = recorded.read_bytes()
    lock = WriterLock(recorded, "writer")
    lock.acquire()
    try:
        with pytest.raises(CassetteLocked):
            reseal_file(str(recorded), owner="o")
    finally:
        lock.release()
    assert recorded.read_bytes() == before


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CassetteNotFound, match=r"^CASSETTE_NOT_FOUND: nope\.jsonl does not exist$"):
        reseal_file(str(tmp_path / "nope.jsonl"), owner="o")
    assert not (tmp_path / "nope.jsonl.writer.lock").exists()
