"""The tool plugin guide's steps (docs/tool-plugin-guide.md), as a tool author runs them:
``dsh-sidecar new-plugin``, ``add-local-plugin`` into a DSH home of its own, the generated test
in record mode then replay mode through real headless DSH rc.8 (a pytest subprocess with
``--dsh-host=DIR`` and ``$DSH_HOME``), then the generated cassette replayed where the file the
tool reads does not exist, with live tools blocked: served from the cassette, 0 live calls.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dshrun import HOST

from dsh_sidecar.bridge.api.run import Row, ToolCassette, run
from dsh_sidecar.bridge.host.toolchain import host_env

CLI = Path(sys.executable).parent / "dsh-sidecar"
TOOL = "word_tools_word_count"
CASSETTES = Path("tests") / "cassettes" / "test_plugin"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SIDECAR_HOST")}
    return subprocess.run([str(CLI), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _pytest(plugin: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_SIDECAR_HOST", "PYTEST_ADDOPTS")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", f"--dsh-host={HOST}", "tests", *args],
        cwd=plugin, env={**env, "DSH_HOME": str(home), "COLUMNS": "300"}, capture_output=True, text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_a_scaffolded_plugin_records_then_replays_with_its_generated_test(tmp_path: Path) -> None:
    made = _cli("new-plugin", "word-tools", "--dir", "plugins", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    print(made.stdout)
    assert made.stdout.splitlines()[0] == (
        "created plugins/word-tools/: package.json, cordis.patch.yml, index.js, tests/test_plugin.py, "
        "tests/.gitignore, README.md (tool word_tools_word_count)")
    assert "  dsh-sidecar add-local-plugin plugins/word-tools" in made.stdout
    plugin = tmp_path / "plugins" / "word-tools"
    home = tmp_path / "dsh-home"
    for args in (("install", "--profile", "headless"), ("add-local-plugin", str(plugin))):
        done = _cli(*args, "--prefix", str(HOST), "--dsh-home", str(home), cwd=tmp_path)
        assert done.returncode == 0, done.stderr

    recorded = _pytest(plugin, home, "--dsh-record-mode", "once")
    print(recorded.stdout[-2000:])
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    assert "2 passed" in recorded.stdout and "warning" not in recorded.stdout
    cassette = plugin / CASSETTES / "test_counts_the_words_of_a_file.tools.ndjson"
    assert cassette.is_file()

    replayed = _pytest(plugin, home)
    print(replayed.stdout[-2000:])
    assert replayed.returncode == 0, replayed.stdout[-3000:]
    assert "2 passed" in replayed.stdout

    # The cassette alone answers: no notes.txt here, and no tool may run live.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = run(f'/mock run {TOOL}({{"file": "notes.txt"}})', cwd=elsewhere, host=host_env(HOST, home),
                 tool_cassette=ToolCassette(file=str(cassette), include=[TOOL]),
                 rows=[Row("word-tools", "word-tools")], allow_live_tools=False)
    assert result.ok, result.explain()
    assert result.result(TOOL).value == {"file": "notes.txt", "words": 3}
    assert result.tool_cassette is not None
    assert (result.tool_cassette.mode, result.tool_cassette.consumed, result.tool_cassette.unconsumed) == (
        "replay", 1, 0)


def test_new_plugin_refuses_an_existing_folder_and_a_bad_name_by_name(tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    exists = _cli("new-plugin", "taken", cwd=tmp_path)
    assert (exists.returncode, exists.stderr) == (1, (
        "dsh-sidecar: PLUGIN_EXISTS: taken: the folder exists; nothing was written; choose another NAME or "
        "--dir, or remove that folder\n"))
    assert list((tmp_path / "taken").iterdir()) == []
    for bad in ("My_Tools", "1tools", "a--b", "tools-", "a" * 51, ""):
        refused = _cli("new-plugin", bad, cwd=tmp_path)
        assert refused.returncode == 1, bad
        assert refused.stderr.startswith("dsh-sidecar: INVALID_NAME: NAME: "), refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
