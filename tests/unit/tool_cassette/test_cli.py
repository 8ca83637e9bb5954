"""dsh-tool-cassette CLI: exit codes, first lines, JSON output, privacy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from python_core.tool_cassette.cli import main


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_verify_valid_file_exits_zero(make_cassette: Any) -> None:
    result = run("verify", str(make_cassette()))
    assert result.exit_code == 0
    assert result.output == (
        "valid: dsh-tool-cassette v1: 3 calls, 2 tools, 8 frames, complete tail\n"
    )


def test_verify_invalid_file_exits_one_with_structural_reason(
    make_cassette: Any, tmp_path: Path, kit: Any
) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes().replace(kit.SECRET.encode(), b"hunter3-s3cret", 1))
    result = run("verify", str(path))
    assert result.exit_code == 1
    assert result.output == (
        "CASSETTE_INVALID: line 2 call/start ordinal 0: hash does not match the frame\n"
    )
    assert "hunter" not in result.output and str(tmp_path) not in result.output


def test_verify_missing_file_exits_one_without_the_absolute_path(tmp_path: Path) -> None:
    result = run("verify", str(tmp_path / "gone.jsonl"))
    assert result.exit_code == 1
    assert result.output == "CASSETTE_IO: cannot read gone.jsonl: no such file\n"


def test_verify_without_a_file_is_a_usage_error() -> None:
    assert run("verify").exit_code == 2


def test_inspect_shows_version_tools_calls_integrity_and_consumption(make_cassette: Any) -> None:
    result = run("inspect", str(make_cassette()))
    assert result.exit_code == 0
    assert result.output.splitlines()[:6] == [
        "protocol: dsh-tool-cassette v1",
        "calls: 3",
        "tools: 2",
        "  mcp_fs_read: 1",
        "  weather_lookup: 2",
        "integrity: valid",
    ]
    assert result.output.splitlines()[6].startswith("consumption: replay serves each record once")


def test_inspect_json_is_one_object(make_cassette: Any) -> None:
    result = run("inspect", "--json", str(make_cassette()))
    data = json.loads(result.output)
    assert result.exit_code == 0
    assert {key: data[key] for key in ("version", "calls", "frames", "tools", "valid")} == {
        "version": 1, "calls": 3, "frames": 8,
        "tools": {"mcp_fs_read": 1, "weather_lookup": 2}, "valid": True,
    }


def test_inspect_of_an_invalid_file_exits_one(make_cassette: Any) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes()[:-1])
    result = run("inspect", "--json", str(path))
    assert result.exit_code == 1
    assert json.loads(result.output)["integrity"] == (
        "CASSETTE_INVALID: line 8: truncated line (no newline)"
    )
