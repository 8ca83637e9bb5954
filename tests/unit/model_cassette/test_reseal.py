"""``dsh-sidecar model-cassette reseal``: a hand edit made valid again, or refused untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.model_cassette.cli import cli
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteInvalid
from dsh_sidecar.python_core.model_cassette.reseal import reseal_file
from dsh_sidecar.python_core.model_cassette.store import load, verify_file


def test_an_edited_answer_is_resealed_verified_and_loaded(make_cassette: Any) -> None:
    file: Path = make_cassette()
    text = file.read_bytes()
    assert b"Paris weather" in text
    file.write_bytes(text.replace(b"Paris weather", b"Rome weather"))
    assert verify_file(str(file)).error is not None
    result = CliRunner().invoke(cli, ["reseal", str(file)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("resealed: 3 calls, 5 frames, ")
    assert "the file is now yours" in result.output
    assert verify_file(str(file)).error is None
    assert b"Rome weather" in bytes(load(str(file)).calls[1].chunks)


def test_a_line_that_is_no_frame_is_refused_and_the_file_kept(make_cassette: Any) -> None:
    file: Path = make_cassette()
    broken = file.read_bytes().replace(b'"kind":"call"', b'"kind":"cal"', 1)
    file.write_bytes(broken)
    with pytest.raises(ModelCassetteInvalid) as caught:
        reseal_file(str(file))
    assert str(caught.value).startswith("MODEL_CASSETTE_INVALID: line 2: not a frame of this schema")
    assert file.read_bytes() == broken
