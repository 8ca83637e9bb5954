"""A first run from an empty DSH_HOME boots: no `host doctor` needed in between (issue 22).

rc.8 creates ``$DSH_HOME/profiles/node_modules`` (its flat fallback for the in-box packages that
out-of-tree plugins resolve their peers from) only when it boots a profile. Before the fix, a
profile filled by ``install`` and ``add-local-plugin`` alone failed every run with ``plugin tree
failed to load ... could not be resolved``. These tests share the checkout's host prefix (node,
pnpm, dsh) but start from an empty DSH_HOME each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from dshrun import HOST, ROOT

from dsh_sidecar.bridge.api.run import Row, StalePlugin, run
from dsh_sidecar.bridge.host.toolchain import host_env

CLI = Path(sys.executable).parent / "dsh-sidecar"
ECHO = '/mock run echo({"text": "first"})'


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SIDECAR_HOST")}
    return subprocess.run(
        [str(CLI), *args, "--prefix", str(HOST), "--dsh-home", str(home)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )


def _fresh_profile(home: Path) -> None:
    installed = _cli("install", "--profile", "headless", home=home)
    assert installed.returncode == 0, installed.stderr
    added = _cli("add-local-plugin", str(ROOT / "examples" / "dsh-example-tools"), home=home)
    assert added.returncode == 0, added.stderr


def test_install_and_add_local_plugin_into_an_empty_dsh_home_give_a_profile_that_boots(tmp_path: Path) -> None:
    home = tmp_path / "dsh-home"
    _fresh_profile(home)
    assert (home / "profiles" / "node_modules" / "@deepseek-ai" / "schemastery").exists()
    result = run(ECHO, cwd=tmp_path, host=host_env(HOST, home), rows=[Row("example-tools", "dsh-example-tools", {})])
    assert result.ok, result.explain()
    assert [r.tool for r in result.tool_results] == ["echo"]


def test_the_run_api_heals_a_profile_whose_module_fallback_is_missing(tmp_path: Path) -> None:
    home = tmp_path / "dsh-home"
    _fresh_profile(home)
    # A DSH_HOME filled by an older install: nothing ever booted it.
    shutil.rmtree(home / "profiles" / "node_modules")
    result = run(ECHO, cwd=tmp_path, host=host_env(HOST, home), rows=[Row("example-tools", "dsh-example-tools", {})])
    assert result.ok, result.explain()
    assert (home / "profiles" / "node_modules" / "@deepseek-ai" / "schemastery").exists()



def test_a_run_leaves_nothing_in_the_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    work = tmp_path / "work"
    work.mkdir()
    result = run(ECHO, cwd=work, rows=[Row("example-tools", "dsh-example-tools", {})])
    assert result.ok, result.explain()
    # rc.8 makes a `dsh-spill-*` folder per run; the run API's private folder held it.
    assert sorted(p.name for p in temp.iterdir()) == []


def test_a_local_plugin_whose_source_changed_is_reported_stale(tmp_path: Path) -> None:
    home = tmp_path / "dsh-home"
    plugin = tmp_path / "my-tools"
    shutil.copytree(ROOT / "examples" / "dsh-example-tools", plugin)
    assert _cli("install", "--profile", "headless", home=home).returncode == 0
    assert _cli("add-local-plugin", str(plugin), home=home).returncode == 0
    rows = [Row("example-tools", "dsh-example-tools", {})]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert run(ECHO, cwd=tmp_path, host=host_env(HOST, home), rows=rows).ok
    assert [w for w in seen if issubclass(w.category, StalePlugin)] == []
    (plugin / "index.js").write_text((plugin / "index.js").read_text() + "\n// edited\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run(ECHO, cwd=tmp_path, host=host_env(HOST, home), rows=rows)
    stale = [str(w.message) for w in seen if issubclass(w.category, StalePlugin)]
    assert stale == [
        "PLUGIN_STALE: dsh-example-tools changed since `dsh-sidecar add-local-plugin` installed it; this run uses "
        "the installed copy: run `dsh-sidecar add-local-plugin <its folder>` again"
    ]
    assert _cli("add-local-plugin", str(plugin), home=home).returncode == 0
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run(ECHO, cwd=tmp_path, host=host_env(HOST, home), rows=rows)
    assert [w for w in seen if issubclass(w.category, StalePlugin)] == []


@pytest.mark.slow
def test_pytest_dsh_setup_from_nothing_gives_a_host_whose_first_turn_boots(tmp_path: Path) -> None:
    # An empty host prefix, an empty pnpm store, an empty corepack cache, no DSH_HOME: --dsh-setup
    # installs pnpm, DSH rc.8 with the hmr fix and the plugin, and the first test's turn boots;
    # `dsh-sidecar run` on that host boots too (its DSH_HOME is the one --dsh-setup filled).
    prefix = tmp_path / "host"
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_it.py").write_text(
        "def test_it(dsh):\n"
        "    result = dsh.run('/mock run glob({\"pattern\": \"*.py\"})')\n"
        "    assert result.ok, result.explain()\n"
        "    assert [r.tool for r in result.tool_results] == ['glob']\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SIDECAR_HOST")}
    env |= {"npm_config_store_dir": str(tmp_path / "pnpm-store"), "COREPACK_HOME": str(tmp_path / "corepack")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--dsh-setup", f"--dsh-host={prefix}",
         "--dsh-allow-live-tools"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed" in proc.stdout
    assert any((tmp_path / "pnpm-store").iterdir())  # the store pnpm filled was the empty one
    cli = subprocess.run(
        [str(CLI), "run", "--cwd", str(project), "--", '/mock run glob({"pattern": "*.py"})'],
        env=env | {"DSH_SIDECAR_HOST": str(prefix)}, capture_output=True, text=True, timeout=300,
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
