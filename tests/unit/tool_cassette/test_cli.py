"""dsh-tool-cassette CLI: exit codes, first lines, JSON output, privacy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dsh_sidecar.python_core.tool_cassette import ExecuteEvent, PostEvent, ResultEvent, ToolCassetteSession
from dsh_sidecar.python_core.tool_cassette.cli import main


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_verify_valid_file_exits_zero(make_cassette: Any) -> None:
    result = run("verify", str(make_cassette()))
    assert result.exit_code == 0
    assert result.output == (
        "valid: w.tool-cassette.jsonl: dsh-tool-cassette v5: 3 calls, 2 tools, 8 frames, complete tail\n"
    )


def test_verify_takes_several_files_and_each_line_names_its_file(
    make_cassette: Any, tmp_path: Path, kit: Any
) -> None:
    good = make_cassette()
    bad = make_cassette(file="b.jsonl")
    bad.write_bytes(bad.read_bytes().replace(kit.SECRET.encode(), b"hunter3-s3cret", 1))
    result = CliRunner().invoke(main, ["verify", str(good), str(tmp_path / "gone.jsonl"), str(bad)])
    assert result.exit_code == 1
    assert result.stdout == (
        "valid: w.tool-cassette.jsonl: dsh-tool-cassette v5: 3 calls, 2 tools, 8 frames, complete tail\n"
        "CASSETTE_INVALID: b.jsonl: line 2 call/start ordinal 0: hash does not match the frame\n"
    )
    assert result.stderr == "CASSETTE_IO: cannot read gone.jsonl: no such file\n"
    both = CliRunner().invoke(main, ["verify", str(good), str(good)])
    assert (both.exit_code, both.output.count("valid: w.tool-cassette.jsonl: ")) == (0, 2)


def test_verify_invalid_file_exits_one_with_structural_reason(
    make_cassette: Any, tmp_path: Path, kit: Any
) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes().replace(kit.SECRET.encode(), b"hunter3-s3cret", 1))
    result = run("verify", str(path))
    assert result.exit_code == 1
    assert result.output == (
        "CASSETTE_INVALID: w.tool-cassette.jsonl: line 2 call/start ordinal 0: hash does not match the frame\n"
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
    assert result.output.splitlines()[:7] == [
        "protocol: dsh-tool-cassette v5",
        "calls: 3",
        "tools: 2",
        "  mcp_fs_read: 1",
        "  weather_lookup: 2",
        "definitions: 0",
        "integrity: valid",
    ]
    assert result.output.splitlines()[7].startswith("consumption: replay serves each record once")


def test_inspect_json_is_one_object(make_cassette: Any) -> None:
    result = run("inspect", "--json", str(make_cassette()))
    data = json.loads(result.output)
    assert result.exit_code == 0
    assert {key: data[key] for key in ("version", "calls", "frames", "tools", "valid")} == {
        "version": 5, "calls": 3, "frames": 8,
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


def test_inspect_lists_every_record_by_ordinal_tool_path_fingerprint_and_outcome(
    make_cassette: Any, kit: Any, tmp_path: Path,
) -> None:
    path = make_cassette([
        *kit.DEFAULT_CALLS,
        kit.Call(path="root/3", outcome=kit.fail(code=None)),
    ])
    result = run("inspect", str(path))
    assert result.exit_code == 0
    lines = result.output.splitlines()
    table = lines[lines.index("records:") + 1:]
    assert table[0] == "  ordinal  tool            path    args                  outcome"
    rows = [re.sub(r"sha256:[0-9a-f]{12}…", "FP", row) for row in table[1:]]
    assert rows == [
        "  0        weather_lookup  root/0  FP  value",
        "  1        weather_lookup  root/1  FP  error E_FIRE",
        "  2        mcp_fs_read     root/2  FP  value +1 contexts",
        "  3        weather_lookup  root/3  FP  error",
    ]
    assert kit.SECRET not in result.output and str(tmp_path) not in result.output


def test_inspect_json_lists_records_with_full_digests(make_cassette: Any, kit: Any) -> None:
    result = run("inspect", "--json", str(make_cassette()))
    records = json.loads(result.output)["records"]
    assert [(r["ordinal"], r["tool"], r["path"], r["outcome"], r["code"], r["contexts"]) for r in records] == [
        (0, "weather_lookup", "root/0", "value", None, 0),
        (1, "weather_lookup", "root/1", "error", "E_FIRE", 0),
        (2, "mcp_fs_read", "root/2", "value", None, 1),
    ]
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", r["argsDigest"]) for r in records)
    assert len({r["outcomeDigest"] for r in records}) == 3
    assert kit.SECRET not in result.output


def test_inspect_names_a_call_cancelled_after_it_returned(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    session.on_execute(ExecuteEvent("h", "root/0", "weather_lookup", b"{}"))
    session.on_post_execute(PostEvent("h", "root/0", "weather_lookup", kit.ok()))
    session.on_result(ResultEvent("h", "root/0", "weather_lookup", kit.abort()))
    assert session.close().errors == ()
    records = json.loads(run("inspect", "--json", session.config.file).output)["records"]
    assert [(r["outcome"], r["code"]) for r in records] == [("cancelled", "ABORTED")]


def test_inspect_of_an_invalid_file_lists_no_records(make_cassette: Any) -> None:
    path = make_cassette()
    path.write_bytes(path.read_bytes()[:-1])
    result = run("inspect", str(path))
    assert result.exit_code == 1
    assert "records:" not in result.output
