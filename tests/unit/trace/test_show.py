"""``dsh-sidecar show`` on tool cassettes and on files it does not render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main
from dsh_sidecar.python_core.session_log import project_key

EXAMPLE = Path(__file__).parents[2] / "examples" / "cassettes" / "test_weather" / "test_paris_weather.tools.ndjson"


def _show(*args: str) -> Any:
    return CliRunner().invoke(main, ["show", *args])


def test_a_tool_cassette_page_lists_each_call_with_its_arguments_and_value(tmp_path: Path) -> None:
    page = tmp_path / "t.html"
    result = _show(str(EXAMPLE), "-o", str(page))
    assert result.exit_code == 0, result.output
    assert result.output.startswith("dsh-sidecar show: wrote ") and "(t.json beside it)" in result.output
    (call,) = json.loads(page.with_suffix(".json").read_text())["runs"][0]["calls"]
    assert (call["tool"], call["args"], call["ordinal"], call["source"]) == (
        "weather_lookup", {"city": "Paris"}, 0, "recorded")
    assert call["value"] == {"city": "Paris", "forecast": "sunny", "temperatureC": 21}
    html = page.read_text()
    assert "<script src" not in html and "http://" not in html.split("</style>")[0]
    assert "Content-Security-Policy" in html


def test_a_re_recorded_tool_cassette_against_the_old_one_shows_the_changed_argument(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text().splitlines()
    changed = tmp_path / "new.tools.ndjson"
    # An edited file is refused by its hash chain: the page shows only what verifies.
    changed.write_text("\n".join(line.replace('"Paris"', '"Rome"') for line in lines) + "\n")
    refused = _show(str(changed), "--against", str(EXAMPLE), "-o", str(tmp_path / "x.html"))
    assert refused.exit_code == 1 and refused.output.startswith("dsh-sidecar: CASSETTE_")
    same = _show(str(EXAMPLE), "--against", str(EXAMPLE), "-o", str(tmp_path / "same.html"))
    assert same.exit_code == 0
    pairs = json.loads((tmp_path / "same.json").read_text())["comparison"]["pairs"]
    assert [p["status"] for p in pairs] == ["same"]


def test_a_file_that_is_no_recording_is_refused_by_name_with_what_to_give(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    result = _show(str(other))
    assert result.exit_code == 1
    assert result.output == ("dsh-sidecar: SHOW_UNREADABLE: notes.txt:1: not a cassette header or a session log's "
                             "first line; give a tool, model or subagent cassette (.ndjson) or a session log "
                             "(session.jsonl[.zstd])\n")
    mixed = _show(str(EXAMPLE), "--against", str(other))
    assert "SHOW_UNREADABLE: notes.txt:1" in mixed.output


def test_a_session_id_is_found_in_the_dsh_home_and_shown_as_its_log(tmp_path: Path, monkeypatch: Any) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    folder = home / "sessions" / project_key(str(tmp_path / "elsewhere")) / "session-abc"
    folder.mkdir(parents=True)
    events = [
        {"type": "session", "id": "session-abc", "createdAt": 1, "cwd": "/w", "delegationDepth": 0},
        {"type": "tool/call", "seq": 1, "time": 2, "data": {"turn": 1, "step": 1, "callId": "c1", "name": "echo",
                                                           "arguments": '{"text": "hi"}'}},
    ]
    (folder / "session.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    work.mkdir()
    monkeypatch.chdir(work)
    result = _show("session-abc", "--dsh-home", str(home))
    assert result.exit_code == 0, result.output
    assert result.output == "dsh-sidecar show: wrote session-abc.html (session-abc.json beside it)\n"
    document = json.loads((work / "session-abc.json").read_text())
    assert document["title"] == "session-abc"
    assert [(c["id"], c["tool"], c["args"]) for c in document["runs"][0]["calls"]] == [("c1", "echo", {"text": "hi"})]
    missing = _show("session-none", "--dsh-home", str(home))
    assert missing.exit_code == 1 and "SHOW_UNREADABLE: session-none: cannot be read" in missing.output
