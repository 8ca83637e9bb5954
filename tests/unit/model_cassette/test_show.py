"""``dsh-sidecar show`` on model cassettes: each call's answer on the page, two recordings aligned."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main


def _show(*args: str) -> Any:
    return CliRunner().invoke(main, ["show", *args])


def test_a_model_cassette_shows_each_call_with_its_lane_and_answer(make_cassette: Callable[..., Path],
                                                                   tmp_path: Path) -> None:
    page = tmp_path / "m.html"
    result = _show(str(make_cassette()), "-o", str(page))
    assert result.exit_code == 0, result.output
    run = json.loads(page.with_suffix(".json").read_text())["runs"][0]
    assert [(s["lane"], s["position"], s["source"]) for s in run["steps"]] == [
        ("model", 0, "cassette"), ("session-title", 0, "cassette"), ("model", 1, "cassette")]
    assert run["steps"][1]["text"] == "Paris weather"
    assert run["steps"][0]["toolCalls"] and run["steps"][0]["finish"] == "tool-calls"


def test_a_re_recording_against_the_committed_one_names_the_changed_answer(
        kit: Any, make_cassette: Callable[..., Path], tmp_path: Path) -> None:
    old = make_cassette()
    new = make_cassette([(kit.request(), kit.tool_chunks()),
                         (kit.request(purpose="session-title", tools=()), kit.text_chunks("Rome weather"))])
    page = tmp_path / "cmp.html"
    assert _show(str(new), "--against", str(old), "-o", str(page)).exit_code == 0
    pairs = json.loads(page.with_suffix(".json").read_text())["comparison"]["pairs"]
    assert [p["status"] for p in pairs] == ["same", "changed", "only-a"]
    (change,) = pairs[1]["pointers"]
    assert (change["pointer"], change["recorded"], change["live"]) == ("/text", "Paris weather", "Rome weather")
