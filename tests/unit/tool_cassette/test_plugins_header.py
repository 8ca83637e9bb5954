"""The tool cassette's header keeps the plugin composition; a replay's mismatch names what changed (issue 29 item 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from dsh_sidecar.python_core.tool_cassette.config import parse_config
from dsh_sidecar.python_core.tool_cassette.engine import ExecuteEvent, Refuse, ToolCassetteSession
from dsh_sidecar.python_core.tool_cassette.store import load


def _config(tmp_path: Path, mode: str) -> Any:
    return parse_config({"mode": mode, "file": "c.ndjson", "include": ["echo"]}, cwd=str(tmp_path))


def _record(tmp_path: Path, kit: Any, plugins: dict[str, str | None] | None) -> None:
    session = ToolCassetteSession.open(_config(tmp_path, "record"), plugins=plugins)
    kit.drive(session, [kit.Call(tool="echo", args=b'{"text":"[masked]"}')])
    assert session.close().errors == ()


def test_the_header_keeps_the_composition_and_a_mismatch_names_what_changed(tmp_path: Path, kit: Any) -> None:
    recorded = {"dsh-mask-plugin": "1.2.0", "dsh-example-tools": "0.1.0"}
    _record(tmp_path, kit, recorded)
    assert load(str(tmp_path / "c.ndjson")).header.plugins == recorded
    replay = ToolCassetteSession.open(_config(tmp_path, "replay"), plugins={"dsh-example-tools": "0.1.0"})
    refused = replay.on_execute(ExecuteEvent("h0", "root/0", "echo", b'{"text":"my secret"}'))
    assert isinstance(refused, Refuse) and refused.error.code == "CASSETTE_MISMATCH"
    assert "changed /text" in str(refused.error) and "dsh-mask" not in str(refused.error)
    assert refused.error.hint.startswith(
        "the composition changed since the recording: dsh-mask-plugin 1.2.0 is absent; a plugin's hooks may have "
        "shaped the recorded calls: replay with the plugins it was recorded with, or if the new calls are intended, "
        "re-record: delete c.ndjson")
    # The unconsumed record carries the same fix, so it prints once.
    assert {error.hint for error in replay.close().errors} == {refused.error.hint}


def test_the_same_composition_or_an_unknown_one_says_only_re_record(tmp_path: Path, kit: Any) -> None:
    for recorded, current in (({"a": "1"}, {"a": "1"}), (None, {"a": "1"}), ({"a": "1"}, None)):
        for file in tmp_path.iterdir():
            file.unlink()
        _record(tmp_path, kit, recorded)
        header = msgspec.json.decode((tmp_path / "c.ndjson").read_bytes().splitlines()[0])
        assert ("plugins" in header) == (recorded is not None)  # older files: no field at all
        replay = ToolCassetteSession.open(_config(tmp_path, "replay"), plugins=current)
        refused = replay.on_execute(ExecuteEvent("h0", "root/0", "echo", b'{"text":"other"}'))
        assert isinstance(refused, Refuse)
        assert refused.error.hint.startswith("if the new calls are intended, re-record")
