"""The row config: one closed tree; null sections, unknown keys, bad values, NUL bytes and
unusable paths are refused by field at boot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.python_core.config import parse_sidecar_config
from dsh_sidecar.python_core.config_fields import ConfigSection
from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.mock.config import MockConfig
from dsh_sidecar.python_core.subagent_cassette.config import CassetteConfig

TOOL = {"mode": "record", "file": "c.ndjson", "include": ["echo"]}


def refusal(raw: dict[str, Any], cwd: Path | str) -> str:
    return str(refused(raw, cwd))


def refused(raw: dict[str, Any], cwd: Path | str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_sidecar_config(raw, cwd=str(cwd))
    return info.value


@pytest.mark.parametrize("section", ["toolCassette", "mock", "subagentCassette", "trace", "python"])
def test_a_null_section_is_refused_by_name(section: str, tmp_path: Path) -> None:
    assert refusal({section: None}, tmp_path) == (
        f"INVALID_CONFIG: {section}: is null (a mis-indented YAML block?); give the section or remove the key"
    )


def test_the_tool_cassette_keys_written_at_the_row_level_point_at_their_section(tmp_path: Path) -> None:
    # The tool cassette's three keys, written flat in the row as a standalone plugin takes them.
    error = refused({"mode": "replay", "file": "c.ndjson", "include": ["echo"]}, tmp_path)
    assert str(error).startswith("INVALID_CONFIG: mode: unknown key (expected one of: python, toolCassette, ")
    assert error.hint == (
        "the tool cassette's mode, file and include go under toolCassette in the `sidecar` row: "
        "toolCassette: { mode: record, file: ..., include: [...] }"
    )
    assert refused({"verbose": True}, tmp_path).hint == ConfigError.hint


def test_an_absent_section_is_simply_off(tmp_path: Path) -> None:
    config = parse_sidecar_config({}, cwd=str(tmp_path))
    assert config.tool_cassette is None and config.subagent_cassette is None and config.trace is None


@pytest.mark.parametrize(("raw", "field"), [
    ({"trace": "t\0.jsonl"}, "trace"),
    ({"subagentCassette": {"mode": "record", "file": "a\0b"}}, "subagentCassette.file"),
    ({"toolCassette": {**TOOL, "file": "c\0.ndjson"}}, "toolCassette.file"),
])
def test_a_nul_byte_in_a_path_field_is_refused_by_name(raw: dict[str, Any], field: str, tmp_path: Path) -> None:
    message = refusal(raw, tmp_path)
    assert message.startswith(f"INVALID_CONFIG: {field}: must not contain")
    assert "\0" not in message


def test_a_nul_byte_in_the_cwd_is_refused_by_name() -> None:
    assert refusal({}, "/tmp/a\0b") == "INVALID_CONFIG: cwd: must not contain a NUL byte"


def test_a_recording_in_a_missing_directory_is_accepted(tmp_path: Path) -> None:
    # The recorder makes the directory (a fresh project's `.dsh-cassettes/`); nothing is made at boot.
    config = parse_sidecar_config({"toolCassette": {**TOOL, "file": ".dsh-cassettes/c.ndjson"}}, cwd=str(tmp_path))
    assert config.tool_cassette is not None
    assert not (tmp_path / ".dsh-cassettes").exists()


def test_a_recording_under_a_file_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    error = refused({"toolCassette": {**TOOL, "file": "a-file/sub/c.ndjson"}}, tmp_path)
    assert str(error) == (
        "INVALID_CONFIG: toolCassette.file: the directory of c.ndjson cannot be made (a part of its path is a file)"
    )
    assert error.hint == "fix the path"


@pytest.mark.parametrize(("section", "field"), [
    ({"trace": "missing/t.jsonl"}, "trace"),
    ({"subagentCassette": {"mode": "record", "file": "missing/s.jsonl"}}, "subagentCassette.file"),
])
def test_a_file_to_write_in_a_missing_directory_is_refused_by_name(
    section: dict[str, Any], field: str, tmp_path: Path,
) -> None:
    error = refused(section, tmp_path)
    name = os.path.basename(section.get("trace") or next(iter(section.values()))["file"])
    assert str(error) == f"INVALID_CONFIG: {field}: the directory of {name} does not exist"
    assert error.hint == "create the directory (mkdir -p) or fix the path"


@pytest.mark.parametrize(("section", "field"), [
    ({"toolCassette": {**TOOL, "file": "d"}}, "toolCassette.file"),
    ({"toolCassette": {**TOOL, "mode": "replay", "file": "d"}}, "toolCassette.file"),
    ({"trace": "d"}, "trace"),
    ({"subagentCassette": {"mode": "replay", "file": "d"}}, "subagentCassette.file"),
])
def test_a_directory_where_a_file_goes_is_refused_by_name(
    section: dict[str, Any], field: str, tmp_path: Path,
) -> None:
    (tmp_path / "d").mkdir()
    error = refused(section, tmp_path)
    assert str(error) == f"INVALID_CONFIG: {field}: d is a directory"
    assert error.hint == f"name a file inside it ({field}: d/<name>) or fix the path"


@pytest.mark.parametrize(("section", "field"), [
    ({"toolCassette": {**TOOL, "mode": "replay", "file": "absent"}}, "toolCassette.file"),
    ({"subagentCassette": {"mode": "replay", "file": "absent"}}, "subagentCassette.file"),
])
def test_replaying_a_missing_file_is_refused_by_name(section: dict[str, Any], field: str, tmp_path: Path) -> None:
    error = refused(section, tmp_path)
    assert str(error) == f"INVALID_CONFIG: {field}: absent does not exist (replay reads it)"
    section_name = field.partition(".")[0]
    assert error.hint == (
        f"record it first: run the same task once with {section_name}.mode: record, then replay; "
        "or fix the path"
    )


def test_replaying_a_fifo_or_a_looping_symlink_is_refused_by_name(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    os.symlink("loop", tmp_path / "loop")
    replay = {**TOOL, "mode": "replay"}
    assert refusal({"toolCassette": {**replay, "file": "fifo"}}, tmp_path) == (
        "INVALID_CONFIG: toolCassette.file: fifo is not a regular file"
    )
    assert refusal({"toolCassette": {**replay, "file": "loop"}}, tmp_path).startswith(
        "INVALID_CONFIG: toolCassette.file: "
    )


def test_replaying_through_a_symlink_to_a_file_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "real.ndjson").write_text("")
    os.symlink("real.ndjson", tmp_path / "link.ndjson")
    config = parse_sidecar_config({"toolCassette": {**TOOL, "mode": "replay", "file": "link.ndjson"}},
                                  cwd=str(tmp_path))
    assert config.tool_cassette is not None


@pytest.mark.parametrize(("mock", "message"), [
    ({"enabeld": False}, "mock.enabeld: unknown field"),
    ({"enabled": "no"}, "mock.enabled: expected `bool`"),
    ({"defaultGapMs": -1}, "mock.defaultGapMs: expected `int` >= 0"),
    ({"defaultGapMs": 3_600_001}, "mock.defaultGapMs: expected `int` <= 3600000"),
    ({"defaultGapMs": True}, "mock.defaultGapMs: expected `int`"),
    ({"nestedTools": "team"}, "mock.nestedTools: expected `array`"),
    ({"nestedTools": ["team", ""]}, "mock.nestedTools[1]: expected `str` of length >= 1"),
    ("on", "mock: must be an object"),
])
def test_the_mock_section_is_closed_and_named_by_field(mock: object, message: str, tmp_path: Path) -> None:
    assert refusal({"mock": mock}, tmp_path) == f"INVALID_CONFIG: {message}"


def test_the_mock_section_parses_its_camel_case_keys(tmp_path: Path) -> None:
    config = parse_sidecar_config({"mock": {"enabled": False, "defaultGapMs": 0, "nestedTools": ["team"]}},
                                  cwd=str(tmp_path))
    assert config.mock == MockConfig(enabled=False, default_gap_ms=0, nested_tools=("team",))


def test_the_subagent_section_is_parsed_in_core_with_the_row_field_names(tmp_path: Path) -> None:
    # It used to stay a raw mapping until the bridge opened the cassette.
    assert refusal({"subagentCassette": {"mode": "record", "file": "s.jsonl", "speeed": 1}}, tmp_path) == (
        "INVALID_CONFIG: subagentCassette.speeed: unknown field"
    )
    assert refusal({"subagentCassette": {"mode": "record", "file": "s.jsonl", "provider": {"upstrem": "x"}}},
                   tmp_path) == "INVALID_CONFIG: subagentCassette.provider.upstrem: unknown field"
    config = parse_sidecar_config({"subagentCassette": {"mode": "record", "file": "s.jsonl"}}, cwd=str(tmp_path))
    assert isinstance(config.subagent_cassette, CassetteConfig)
    assert config.subagent_cassette.file == str(tmp_path / "s.jsonl")


def test_the_model_section_is_parsed_in_core(tmp_path: Path) -> None:
    assert refusal({"modelCassette": {"mode": "record", "file": "m.ndjson", "key": 1}}, tmp_path).startswith(
        "INVALID_CONFIG: modelCassette.key: unknown key"
    )
    config = parse_sidecar_config({"modelCassette": {"mode": "record", "file": "m.ndjson"}}, cwd=str(tmp_path))
    assert config.model_cassette is not None and config.model_cassette.file == str(tmp_path / "m.ndjson")


@pytest.mark.parametrize(("section", "field", "reason"), [
    ({"modelCassette": {"mode": "record", "file": "missing/m.ndjson"}}, "modelCassette.file",
     "the directory of m.ndjson does not exist"),
    ({"modelCassette": {"mode": "replay", "file": "absent.ndjson"}}, "modelCassette.file",
     "absent.ndjson does not exist (replay reads it)"),
    ({"modelCassette": {"mode": "replay", "file": "d"}}, "modelCassette.file", "d is a directory"),
    ({"report": "missing/r.json"}, "report", "the directory of r.json does not exist"),
    ({"report": "d"}, "report", "d is a directory"),
])
def test_model_cassette_and_report_paths_are_refused_by_name(
    section: dict[str, Any], field: str, reason: str, tmp_path: Path,
) -> None:
    # Both used to fail later as an I/O error that did not name the field.
    (tmp_path / "d").mkdir()
    assert refusal(section, tmp_path) == f"INVALID_CONFIG: {field}: {reason}"


def test_the_parsed_config_is_one_closed_tree_of_frozen_structs(tmp_path: Path) -> None:
    (tmp_path / "c.ndjson").write_text("")
    config = parse_sidecar_config({
        "python": ["python3"], "toolCassette": {**TOOL, "mode": "replay"}, "mock": {},
        "subagentCassette": {"mode": "record", "file": "s.jsonl"}, "modelCassette": {"mode": "record", "file": "m"},
        "trace": "t.jsonl",
    }, cwd=str(tmp_path))
    sections = [config, config.tool_cassette, config.mock, config.subagent_cassette, config.model_cassette]
    assert config.python == ("python3",)
    for section in sections:
        assert isinstance(section, ConfigSection), type(section)
        assert section.__struct_config__.frozen and section.__struct_config__.forbid_unknown_fields


def test_strict_replay_must_be_a_boolean() -> None:
    from dsh_sidecar.python_core.config import parse_sidecar_config
    from dsh_sidecar.python_core.errors import ConfigError

    assert parse_sidecar_config({"strictReplay": True}, cwd="/tmp").strict_replay is True
    try:
        parse_sidecar_config({"strictReplay": "yes"}, cwd="/tmp")
    except ConfigError as error:
        assert str(error) == "INVALID_CONFIG: strictReplay: must be true or false"
    else:
        raise AssertionError("strictReplay 'yes' was accepted")
