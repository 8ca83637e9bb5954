"""``dsh-sidecar mock validate|convert`` and the read-only source guarantee."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.mock.cli import mock
from dsh_sidecar.python_core.mock.errors import SourceUnreadable
from dsh_sidecar.python_core.mock.plan import EmitToolCalls, MockPlan
from dsh_sidecar.python_core.mock.source import load_source, read_source


def snapshot(directory: Path) -> dict[str, tuple[str, int]]:
    return {
        entry.name: (hashlib.sha256(entry.read_bytes()).hexdigest(), entry.stat().st_mtime_ns)
        for entry in sorted(directory.iterdir())
    }


@pytest.fixture
def log_file(tmp_path: Path, three_step_log: Any) -> Path:
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(three_step_log.zstd())
    return path


def test_convert_prints_the_canonical_script(log_file: Path) -> None:
    result = CliRunner().invoke(mock, ["convert", str(log_file), "--preserve-timing"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["steps"][1] == {"wait": 53}
    assert result.output.startswith('{"steps":[{"args":{"text":"hello from mock"}')


def test_validate_summarizes_and_exits_zero(log_file: Path) -> None:
    result = CliRunner().invoke(mock, ["validate", str(log_file)])
    assert result.exit_code == 0
    assert result.output.startswith(
        "ok: session.jsonl.zstd (dsh-jsonl-zstd): 2 executable step(s), 3 tool call(s), "
        "1 explicit wait(s), script sha256:"
    )


def test_invalid_input_exits_one_with_the_code_and_no_absolute_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"type":"dsh-mock-script","version":2,"steps":[]}')
    result = CliRunner().invoke(mock, ["validate", str(path)])
    assert result.exit_code == 1
    assert result.output == (
        "INVALID_SCRIPT: bad.json: unsupported version 2; this reader supports 1 at /version\n"
    )
    assert str(tmp_path) not in result.output


def test_a_missing_file_exits_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(mock, ["convert", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 1
    assert result.output == "SOURCE_UNREADABLE: nope.jsonl: no such file\n"


def test_usage_errors_exit_two() -> None:
    assert CliRunner().invoke(mock, ["convert"]).exit_code == 2
    assert CliRunner().invoke(mock, ["validate", "x", "--turn", "0"]).exit_code == 2


def test_conversion_leaves_the_source_and_its_folder_untouched(log_file: Path) -> None:
    before = snapshot(log_file.parent)
    for args in (["convert", str(log_file)], ["validate", str(log_file)]):
        assert CliRunner().invoke(mock, args).exit_code == 0
    assert snapshot(log_file.parent) == before


def test_a_failing_conversion_leaves_the_source_untouched(
    tmp_path: Path, three_step_log: Any
) -> None:
    three_step_log.tool_step(4, [("mock-1-1-0", "mock_echo", "{}")])
    path = tmp_path / "session.jsonl"
    path.write_bytes(three_step_log.text())
    before = snapshot(tmp_path)
    result = CliRunner().invoke(mock, ["convert", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith(
        "CONVERSION_MISMATCH: session.jsonl: turn 1 step 1: call identity differs between line "
    )
    assert snapshot(tmp_path) == before


def test_a_cancelled_replay_leaves_the_source_untouched(log_file: Path) -> None:
    before = snapshot(log_file.parent)
    kind, script = load_source(
        read_source(str(log_file), source="s"), source_name="s", preserve_timing=True
    )
    plan = MockPlan(script, session_id="s1", turn_id="t1", mode="replay", source_format=kind)
    assert isinstance(plan.next_response([]), EmitToolCalls)
    plan.cancel()
    assert plan.status().state == "cancelled"
    assert snapshot(log_file.parent) == before


def test_read_source_refuses_a_symlink_swapped_in(tmp_path: Path, log_file: Path) -> None:
    link = tmp_path / "link.jsonl"
    os.symlink(log_file, link)
    with pytest.raises(SourceUnreadable) as caught:
        read_source(str(link), source="link.jsonl")
    assert str(caught.value) == "SOURCE_UNREADABLE: link.jsonl: is a symlink, refused here"


def test_read_source_refuses_a_fifo_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SourceUnreadable) as caught:
        read_source(str(tmp_path / "pipe"), source="pipe")
    assert str(caught.value) == "SOURCE_UNREADABLE: pipe: is not a regular file (a FIFO, device or socket)"
