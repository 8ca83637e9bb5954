"""One piece of advice about cassettes and the repository (issue 31): commit them, keep secrets
out with filters; the README promises no shipped ignore rule, and the plugin's own cassette names
are the ones it tells you to commit."""

from __future__ import annotations

from pathlib import Path

from dsh_sidecar.bridge.api.scaffold import scaffold_plugin

ROOT = Path(__file__).resolve().parents[2]


def test_the_readme_gives_one_advice_commit_cassettes_and_filter_secrets() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "**Commit the cassettes**" in readme
    assert "shipped `.gitignore`" not in readme and "treat them as secrets" not in readme
    assert "treat cassettes as secrets" not in readme
    assert "dsh-sidecar ships none" in readme


def test_the_scaffolded_plugin_ignores_recordings_in_progress_but_not_its_cassettes(tmp_path: Path) -> None:
    made = scaffold_plugin("my-tools", tmp_path)
    rules = (made.folder / "tests" / ".gitignore").read_text().split("\n")
    patterns = [line for line in rules if line and not line.startswith("#")]
    assert patterns == [".*.recording", "*.partial"]
