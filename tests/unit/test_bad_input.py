"""Deep nesting and lone surrogates get a named error in every parser, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_sidecar.python_core.config import parse_sidecar_config
from dsh_sidecar.python_core.errors import ConfigError, SidecarError
from dsh_sidecar.python_core.mock.command import parse_command
from dsh_sidecar.python_core.mock.paths import resolve_replay_path
from dsh_sidecar.python_core.mock.source import load_source
from dsh_sidecar.python_core.subagent_cassette.config import parse_fields as parse_subagent_config
from dsh_sidecar.python_core.subagent_cassette.store import verify_file as verify_subagent
from dsh_sidecar.python_core.tool_cassette.store import verify_file as verify_tool

DEEP = b'{"a":' * 300 + b"1" + b"}" * 300
SCRIPT = b'{"type":"dsh-mock-script","version":1,"steps":[{"tool":"t","args":%s}]}'


def _named(call: object) -> str:
    with pytest.raises(SidecarError) as info:
        call()  # type: ignore[operator]
    return str(info.value)


def test_a_deep_tool_cassette_line_is_invalid_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "c.ndjson").write_bytes(DEEP + b"\n")
    report = verify_tool(str(tmp_path / "c.ndjson"))
    assert str(report.error) == "CASSETTE_INVALID: line 1: nested deeper than 256 levels"


def test_a_deep_subagent_cassette_line_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_bytes(DEEP + b"\n")
    assert _named(lambda: verify_subagent(tmp_path / "s.jsonl")) == (
        "CASSETTE_FORMAT_ERROR: s.jsonl:1: nested deeper than 256 levels at /"
    )


def test_a_deep_replay_script_is_invalid() -> None:
    assert _named(lambda: load_source(SCRIPT % DEEP, source_name="s.json", preserve_timing=False)) == (
        "INVALID_SCRIPT: s.json: not strict JSON: nested deeper than 256 levels"
    )


def test_a_deep_session_log_record_is_invalid_at_its_line() -> None:
    log = b'{"type":"session","version":0,"id":"s"}\n' + DEEP + b"\n"
    assert _named(lambda: load_source(log, source_name="l.jsonl", preserve_timing=False)) == (
        "INVALID_SCRIPT: l.jsonl:2: nested deeper than 256 levels"
    )


def test_surrogate_keys_in_scripts_and_run_arguments_are_named() -> None:
    assert _named(lambda: load_source(SCRIPT % b'{"\\ud800":1}', source_name="s.json",
                                      preserve_timing=False)) == (
        "INVALID_SCRIPT: s.json: args are not canonical JSON: lone surrogate in an object key at "
        "/steps/0/args"
    )
    assert _named(lambda: parse_command('/mock run t({"\\ud800": 1})')).startswith(
        "INVALID_COMMAND: args are not canonical JSON: lone surrogate in an object key"
    )


def test_a_replay_path_with_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    command = parse_command('/mock replay "\\ud800.json"')
    assert _named(lambda: resolve_replay_path(command.path, session_cwd=str(tmp_path))) == (  # type: ignore[union-attr]
        "PATH_REFUSED: replay path refused by rule invalid-path: the path holds a lone surrogate"
    )


def test_deep_or_surrogate_configs_are_refused_by_field(tmp_path: Path) -> None:
    deep: dict[str, object] = {}
    level = deep
    for _ in range(300):
        level["a"] = {}
        level = level["a"]  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"^INVALID_CONFIG: config: nested deeper than 256 levels$"):
        parse_sidecar_config({"mock": deep}, cwd=str(tmp_path))
    with pytest.raises(ConfigError) as info:
        parse_sidecar_config({"\ud800": 1}, cwd=str(tmp_path))
    assert str(info.value).startswith("INVALID_CONFIG: \\ud800: unknown key")
    with pytest.raises(ConfigError) as info:
        parse_subagent_config({"mode": "record", "file": "x", "provider": {"\udfff": 1}})
    assert str(info.value) == "INVALID_CONFIG: provider: lone surrogate in an object key"
    with pytest.raises(ConfigError) as info:
        parse_sidecar_config({"subagentCassette": {"mode": "record", "file": "x\ud800"}}, cwd=str(tmp_path))
    assert str(info.value) == (
        "INVALID_CONFIG: subagentCassette.file: holds a lone surrogate; no file can have that name"
    )
