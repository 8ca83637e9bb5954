"""toolCassette config: three keys, named-field refusals, wildcard selection."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.tool_cassette.config import parse_config

GOOD = {
    "mode": "replay",
    "file": ".dsh-cassettes/w.jsonl",
    "include": ["weather_lookup", "mcp_*_read"],
}


def refusal(raw: object) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(raw, cwd="/work/project")
    return str(info.value)


def test_relative_file_resolves_against_cwd() -> None:
    config = parse_config(GOOD, cwd="/work/project")
    assert config.file == "/work/project/.dsh-cassettes/w.jsonl"
    assert config.mode == "replay"
    assert config.include == ("weather_lookup", "mcp_*_read")


def test_absolute_file_is_kept() -> None:
    assert parse_config({**GOOD, "file": "/tmp/x.jsonl"}, cwd="/work").file == "/tmp/x.jsonl"


@pytest.mark.parametrize(
    ("tool", "selected"),
    [
        ("weather_lookup", True),
        ("weather_lookup2", False),
        ("mcp_fs_read", True),
        ("mcp__read", True),
        ("mcp_fs_write", False),
        ("xmcp_fs_read", False),
    ],
)
def test_include_matches_exact_names_and_star_wildcards(tool: str, selected: bool) -> None:
    assert parse_config(GOOD, cwd="/").selects(tool) is selected


def test_star_alone_selects_every_tool() -> None:
    assert parse_config({**GOOD, "include": ["*"]}, cwd="/").selects("anything")


def test_question_marks_and_brackets_are_literal() -> None:
    config = parse_config({**GOOD, "include": ["a?[b]"]}, cwd="/")
    assert config.selects("a?[b]")
    assert not config.selects("ax[b]")


def test_empty_include_names_the_field() -> None:
    assert refusal({**GOOD, "include": []}) == (
        "INVALID_CONFIG: toolCassette.include: must not be empty"
    )


def test_empty_pattern_names_its_index() -> None:
    assert refusal({**GOOD, "include": ["a", " "]}) == (
        "INVALID_CONFIG: toolCassette.include: pattern 1 is empty"
    )


def test_duplicate_pattern_names_both_indexes() -> None:
    assert refusal({**GOOD, "include": ["a", "b", "a"]}) == (
        "INVALID_CONFIG: toolCassette.include: pattern 2 duplicates pattern 0"
    )


def test_empty_file_is_refused() -> None:
    assert refusal({**GOOD, "file": ""}) == "INVALID_CONFIG: toolCassette.file: must not be empty"


def test_unknown_key_is_refused_by_name() -> None:
    assert refusal({**GOOD, "ignoreArgs": True}) == (
        "INVALID_CONFIG: toolCassette.ignoreArgs: is not a known key (allowed: mode, file, include, filters, "
        "allowRedactedReplay, match, faults, volatile)"
    )


def test_missing_key_is_required() -> None:
    assert refusal({"mode": "record", "file": "x"}) == (
        "INVALID_CONFIG: toolCassette.include: is required"
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "INVALID_CONFIG: toolCassette: must be an object"),
        ({**GOOD, "mode": "cache"}, "INVALID_CONFIG: toolCassette.mode: must be 'record' or "
         "'replay'"),
        ({**GOOD, "file": 3}, "INVALID_CONFIG: toolCassette.file: must be a string"),
        ({**GOOD, "include": "weather"},
         "INVALID_CONFIG: toolCassette.include: must be a list of strings"),
        ({**GOOD, "include": [1]},
         "INVALID_CONFIG: toolCassette.include: pattern 0 must be a string"),
    ],
)
def test_wrong_types_name_the_field(raw: object, message: str) -> None:
    assert refusal(raw) == message


def test_refusals_never_echo_the_value() -> None:
    assert "hunter2" not in refusal({**GOOD, "mode": "hunter2"})


def test_config_error_carries_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(None, cwd="/")
    assert info.value.field == "toolCassette"
