"""Third-party plugin patterns through real headless DSH rc.8, warm and cold (issue 29 items 3, 4, 6).

The plugins are small ones written in ``third_party.py`` the way plugins nobody here wrote are:
a tool that reads ``input.txt`` relative to ``process.cwd()``, a store made under ``$DSH_HOME``
on first use, a package whose bundle names a patch file it lacks, an output schema rc.8 rejects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from dshrun import DSH_HOME, HOST, user_pytest
from third_party import BROKEN_SCHEMA, CWD_TOOLS, HOME_STATE, broken_bundle_home, plugin_row

from dsh_sidecar.bridge.api.run import ToolCassette, run
from dsh_sidecar.bridge.api.warm_pool import WarmPool
from dsh_sidecar.bridge.host.toolchain import host_env

pytestmark = pytest.mark.e2e

CAT = "/mock run cat_input({})"
GET = "/mock run state_get({})"


def _recorded_outputs(cassette: Path) -> list[str]:
    frames = [json.loads(line) for line in cassette.read_text().splitlines() if line.strip()]
    return [json.dumps(f) for f in frames if f.get("kind") == "call/result"]


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_tool_reading_process_cwd_records_and_replays_the_sessions_file(
    warm: bool, pool: WarmPool, tmp_path: Path,
) -> None:
    row = plugin_row(tmp_path / "plugins", "cwd-tools", CWD_TOOLS)
    results = []
    for i in range(2):  # two runs of one warm host, each in a folder of its own
        work = tmp_path / f"work{i}"
        work.mkdir()
        (work / "input.txt").write_text(f"the file of run {i}\n")
        cassette = ToolCassette(file="cat.tools.ndjson", include=["cat_input"])
        recorded = run(CAT, cwd=work, rows=[row], warm=pool if warm else False, record_mode="once",
                       tool_cassette=cassette)
        assert recorded.ok, recorded.explain()
        assert [r.output for r in recorded.tool_results] == [f"the file of run {i}\n"]
        assert any(f"the file of run {i}" in frame for frame in _recorded_outputs(work / "cat.tools.ndjson"))
        (work / "input.txt").unlink()
        replayed = run(CAT, cwd=work, rows=[row], warm=pool if warm else False, tool_cassette=cassette,
                       allow_live_tools=False)
        assert replayed.ok, replayed.explain()
        assert [r.output for r in replayed.tool_results] == [f"the file of run {i}\n"]
        results.append(replayed)
    assert pool.boots == (1 if warm else 0)


def test_a_warm_pytest_recording_of_a_process_cwd_tool_holds_the_tests_file(tmp_path: Path) -> None:
    row = plugin_row(tmp_path / "plugins", "cwd-tools", CWD_TOOLS)
    project = tmp_path / "project"
    project.mkdir()
    (project / "tools.patch.yml").write_text(
        f"- {json.dumps({'insert': [{'id': row.id, 'name': row.name, 'config': {}}]})}\n")
    (project / "pytest.ini").write_text("[pytest]\ndsh_patches = tools.patch.yml\n")
    (project / "test_cat.py").write_text(
        "def test_cat(dsh):\n"
        "    (dsh.cwd / 'input.txt').write_text('hello from the test folder\\n')\n"
        f"    result = dsh.run({CAT!r}, tools=['cat_input'])\n"
        "    assert result.result('cat_input').output == 'hello from the test folder\\n'\n"
    )
    recorded = user_pytest(project, "--dsh-record-mode", "once")  # warm: the plugin's default
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    [cassette] = (project / "cassettes").rglob("*.tools.ndjson")
    assert any("hello from the test folder" in frame for frame in _recorded_outputs(cassette))
    for args in ((), ("--dsh-cold",)):
        replayed = user_pytest(project, *args)
        assert replayed.returncode == 0, replayed.stdout[-3000:]


def _put(value: str) -> str:
    return f'/mock run state_put({{"value": "{value}"}})'


def _outputs(result: object) -> list[str]:
    return [r.output for r in result.tool_results]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("first", "then"), [(True, True), (False, False), (True, False), (False, True)],
                         ids=["warm-warm", "cold-cold", "warm-cold", "cold-warm"])
def test_state_a_plugin_makes_under_dsh_home_persists_into_the_next_run(
    first: bool, then: bool, store: str, pool: WarmPool, tmp_path: Path,
) -> None:
    row = plugin_row(tmp_path / "plugins", "home-state", HOME_STATE, {"store": store})
    if then:  # the next run's host is already up when the state is made
        assert _outputs(run(GET, cwd=tmp_path, rows=[row], warm=pool)) == ["value:(none)"]
    put = run(_put("kept"), cwd=tmp_path, rows=[row], warm=pool if first else False)
    assert put.ok, put.explain()
    # As with a plain `dsh`: the store is in the shared home, made by the run, not left behind in its private one.
    assert (DSH_HOME / store / "value.txt").read_text() == "kept"
    assert not (DSH_HOME / store).is_symlink()
    got = run(GET, cwd=tmp_path, rows=[row], warm=pool if then else False)
    assert got.ok, got.explain()
    assert _outputs(got) == ["value:kept"]
    pool.close()
    # Nothing of this test's runs stays in a private home (the warm host's went with it); other
    # xdist workers' runs may have homes there right now, so only this test's store is looked for.
    assert not any((home / store).exists() for home in (DSH_HOME / ".run-homes").iterdir())
    assert (DSH_HOME / store / "value.txt").read_text() == "kept"


def test_state_under_dsh_home_persists_from_one_pytest_test_to_the_next_warm_and_cold(
    store: str, tmp_path: Path,
) -> None:
    row = plugin_row(tmp_path / "plugins", "home-state", HOME_STATE, {"store": store})
    project = tmp_path / "project"
    project.mkdir()
    (project / "tools.patch.yml").write_text(
        f"- {json.dumps({'insert': [{'id': row.id, 'name': row.name, 'config': row.config}]})}\n")
    (project / "pytest.ini").write_text("[pytest]\ndsh_patches = tools.patch.yml\ndsh_allow_live_tools = *\n")
    (project / "test_state.py").write_text(
        "import os\n\n"
        "def test_1_put(dsh):\n"
        "    value = os.environ['STATE_VALUE']\n"
        f"    assert dsh.run('/mock run state_put({{\"value\": \"' + value + '\"}})').ok\n\n"
        "def test_2_get(dsh):\n"
        f"    assert dsh.run({GET!r}).result('state_get').output == 'value:' + os.environ['STATE_VALUE']\n"
    )
    for value, args in (("warm", ()), ("cold", ("--dsh-cold",))):
        done = user_pytest(project, "-p", "no:randomly", *args, env={**os.environ, "STATE_VALUE": value})
        assert done.returncode == 0, done.stdout[-3000:]
        assert (DSH_HOME / store / "value.txt").read_text() == value


def _assert_one_named_line(result: object, work: Path, plugin: str, detail: str) -> None:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == 1  # type: ignore[attr-defined]
    [line] = stderr.splitlines()
    assert line.startswith(f"dsh-sidecar: PLUGIN_BROKEN: plugin {plugin}") and detail in line and "fix: " in line, line
    assert "/" + "tmp" not in line and str(work) not in line and "node_modules/." not in line
    assert [e.code for e in result.errors] == ["PLUGIN_BROKEN"]  # type: ignore[attr-defined]
    assert result.tool_cassette is None  # type: ignore[attr-defined]
    assert sorted(p.name for p in work.iterdir()) == ["plugins"] or not any(
        p.name.startswith(".") for p in work.iterdir())


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_plugin_whose_output_schema_rc8_rejects_is_one_named_line(
    warm: bool, pool: WarmPool, tmp_path: Path,
) -> None:
    row = plugin_row(tmp_path / "plugins", "broken-schema", BROKEN_SCHEMA)
    result = run('/mock run echo({"text": "x"})', cwd=tmp_path, rows=[row], warm=pool if warm else False,
                 record_mode="once", tool_cassette=ToolCassette(file="t.tools.ndjson", include=["echo"]))
    _assert_one_named_line(result, tmp_path, "broken-schema.js", "schema.additionalProperties")
    assert "to re-record" not in result.explain("pytest x --dsh-record-mode all")


def test_a_bundle_naming_a_patch_file_its_package_lacks_is_one_named_line(tmp_path: Path) -> None:
    home = broken_bundle_home(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    result = run('/mock run echo({"text": "x"})', cwd=work, host=host_env(HOST, home), record_mode="once",
                 tool_cassette=ToolCassette(file="t.tools.ndjson", include=["echo"]))
    _assert_one_named_line(result, work, "dsh-broken-bundle", "has no cordis.patch.yml")
    assert "dsh plugin --profile headless remove dsh-broken-bundle" in result.stderr
