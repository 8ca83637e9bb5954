"""``dsh-sidecar show`` on a subagent cassette: each delegation with its request and outcome."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main


def test_a_subagent_cassette_shows_each_delegation_in_order(recorded: Path, tmp_path: Path) -> None:
    page = tmp_path / "s.html"
    result = CliRunner().invoke(main, ["show", str(recorded), "-o", str(page)])
    assert result.exit_code == 0, result.output
    calls = json.loads(page.with_suffix(".json").read_text())["runs"][0]["calls"]
    assert [(c["tool"], c["ordinal"], c.get("isError", False)) for c in calls] == [
        ("subagent", 1, False), ("subagent", 2, False)]
    assert '"a"' in json.dumps(calls[0]["args"]) and '"b"' in json.dumps(calls[1]["args"])
