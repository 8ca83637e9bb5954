"""``dsh-sidecar host doctor`` checks the profile as a plain ``dsh`` run composes it (real headless
boot), ``shellenv`` puts that ``dsh`` on PATH, and the host commands find the project's host from a
subfolder the way git finds its repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from dshrun import DSH_HOME, ROOT

CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
HOST_BIN = str(ROOT / ".host" / "bin")
CASSETTE = ROOT / "tests" / "examples" / "cassettes" / "test_weather" / "test_paris_weather.tools.ndjson"


def _home_with_row(tmp_path: Path, row: dict[str, object] | None, *, without_bundle: str | None = None) -> Path:
    """A DSH_HOME sharing the installed profile, whose own layer adds ``row``; ``without_bundle``
    drops one bundle from the profile's list (its rows with it)."""
    home = tmp_path / "home"
    profile = home / "profiles" / "headless"
    profile.mkdir(parents=True)
    for entry in (DSH_HOME / "profiles" / "headless").iterdir():
        if entry.name not in ("cordis.yml", "cordis.patch.yml", "package.json"):
            (profile / entry.name).symlink_to(entry)
    (home / "profiles" / "node_modules").symlink_to(DSH_HOME / "profiles" / "node_modules")
    package = json.loads((DSH_HOME / "profiles" / "headless" / "package.json").read_text())
    if without_bundle is not None:
        package["dsh"]["profile"]["bundles"].remove(without_bundle)
    (profile / "package.json").write_text(json.dumps(package))
    base = (DSH_HOME / "profiles" / "headless" / "cordis.patch.yml").read_text()
    (profile / "cordis.patch.yml").write_text(base + ("" if row is None else f"\n- {json.dumps(row)}\n"))
    return home


def _user_env(**extra: str) -> dict[str, str]:
    """The environment of a user shell: the venv on PATH, no project host, no DSH_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SIDECAR_HOST")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != HOST_BIN)
    return {**env, **extra}


def _doctor(home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "host", "doctor", "--prefix", str(ROOT / ".host"), "--dsh-home", str(home)],
                          capture_output=True, text=True, timeout=300, cwd=cwd, env=_user_env())


def _lines(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    return {key: value.strip() for key, value in (line.split(":", 1) for line in proc.stdout.splitlines())}


def test_doctor_fails_when_the_profiles_row_points_at_a_missing_python(tmp_path: Path) -> None:
    home = _home_with_row(tmp_path, {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False,
                                     "config": {"python": ["/nonexistent/python3"]}})
    proc = _doctor(home)
    assert proc.returncode == 1, proc.stdout
    lines = _lines(proc)
    assert lines["python"].startswith("cannot start the row's python (FileNotFoundError)")
    assert lines["row"] == "enabled"
    assert lines["boot"].startswith("FAILED: ") and "SIDECAR_UNAVAILABLE" in lines["boot"]
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("fix: point the row at a python")
    assert "fix the row's config or python (the boot line names it)" in proc.stderr
    assert proc.stderr.rstrip().endswith("(broken: python, boot)")


def test_doctor_names_a_bad_config_field_and_reports_a_disabled_row(tmp_path: Path) -> None:
    home = _home_with_row(tmp_path, {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": True,
                                     "config": {"toolCassette": {"mode": "replay", "file": "x", "include": []}}})
    proc = _doctor(home)
    assert proc.returncode == 1, proc.stdout
    lines = _lines(proc)
    assert lines["row"].startswith("disabled (plain `dsh` runs do not load the sidecar")
    assert "INVALID_CONFIG" in lines["boot"] and "toolCassette.include" in lines["boot"]


def test_a_healthy_profile_with_a_disabled_row_passes_and_says_how_to_enable_it(tmp_path: Path) -> None:
    proc = _doctor(_home_with_row(tmp_path, None))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _lines(proc)
    assert lines["dsh at"] == f"{HOST_BIN}/dsh"
    assert lines["PATH"] == 'dsh is not on PATH: eval "$(dsh-sidecar shellenv)"'
    assert lines["python"].endswith("(the interpreter that ran install) imports the bridge")
    assert "- id: sidecar / disabled: false" in lines["row"]
    assert lines["boot"] == "ok: the sidecar started with the row's config and answered"


def test_doctor_fails_when_the_profile_has_no_sidecar_row(tmp_path: Path) -> None:
    proc = _doctor(_home_with_row(tmp_path, None, without_bundle="dsh-sidecar-shim"))
    assert proc.returncode == 1, proc.stdout
    lines = _lines(proc)
    assert (lines["plugin"], lines["row"]) == ("installed", "missing (the profile has no `sidecar` row)")
    assert lines["boot"] == "not tried (no row)"
    assert proc.stderr.startswith("fix: re-run `dsh-sidecar install --profile headless` (its bundle patch inserts")
    assert proc.stderr.rstrip().endswith("(broken: row)")


def test_doctor_checks_the_rows_own_python_key_from_an_empty_folder(tmp_path: Path) -> None:
    bare = shutil.which("python3", path="/usr/bin:/bin")
    assert bare is not None
    home = _home_with_row(tmp_path, {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False,
                                     "config": {"python": [bare]}})
    # A folder holding the package's sources (a checkout, say) must not make that python pass.
    project = tmp_path / "project"
    (project / "dsh_sidecar" / "bridge").mkdir(parents=True)
    (project / "dsh_sidecar" / "__init__.py").write_text("")
    (project / "dsh_sidecar" / "bridge" / "__init__.py").write_text("")
    (project / "dsh_sidecar" / "bridge" / "sidecar.py").write_text("")
    proc = _doctor(home, cwd=project)
    assert proc.returncode == 1, proc.stdout
    assert _lines(proc)["python"].startswith(f"{bare} (the row's python key) cannot import the bridge")


def test_doctor_resolves_a_relative_replay_file_from_the_current_folder(tmp_path: Path) -> None:
    row = {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False,
           "config": {"toolCassette": {"mode": "replay", "file": "cassettes/w.tools.ndjson",
                                       "include": ["weather_lookup"]}}}
    home = _home_with_row(tmp_path, row)
    project = tmp_path / "project"
    (project / "cassettes").mkdir(parents=True)
    shutil.copyfile(CASSETTE, project / "cassettes" / "w.tools.ndjson")
    ok = _doctor(home, cwd=project)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert _lines(ok)["boot"].startswith("ok")
    assert not (project / "sidecar-trace.jsonl").exists() and sorted(os.listdir(project)) == ["cassettes"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    missing = _doctor(home, cwd=elsewhere)
    assert missing.returncode == 1
    assert "INVALID_CONFIG: toolCassette.file: w.tools.ndjson does not exist" in _lines(missing)["boot"]


def test_shellenv_puts_the_projects_dsh_on_path(tmp_path: Path) -> None:
    script = f'eval "$({CLI} shellenv)" && command -v dsh && echo "$DSH_HOME" && dsh --version'
    proc = subprocess.run(["bash", "-c", script], cwd=ROOT / "tests" / "e2e", env=_user_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{HOST_BIN}/dsh", str(ROOT / ".host" / "dsh-home"), "0.1.0-rc.8"]
    assert proc.stderr == f"dsh-sidecar: using the host at {ROOT / '.host'}\n"


def test_shellenv_finds_the_nearest_host_upwards_like_git(tmp_path: Path) -> None:
    fake = tmp_path / "project" / ".host" / "bin" / "dsh"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    deep = tmp_path / "project" / "src" / "pkg"
    deep.mkdir(parents=True)
    proc = subprocess.run([CLI, "shellenv"], cwd=deep, env=_user_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f'export PATH={fake.parent}:"$PATH"'
    assert proc.stderr == f"dsh-sidecar: using the host at {tmp_path / 'project' / '.host'}\n"
    nothing = subprocess.run([CLI, "shellenv"], cwd=deep, capture_output=True, text=True, timeout=60,
                             env=_user_env(DSH_SIDECAR_HOST=str(tmp_path / "none")))
    assert nothing.returncode == 1 and nothing.stdout == ""
    assert nothing.stderr.splitlines()[-1].startswith("dsh-sidecar: HOST_NOT_FOUND: no dsh under that prefix")


@pytest.mark.writes_dsh_home  # installs the shim into the project's host, which every other e2e test uses
def test_install_from_a_subfolder_uses_the_projects_host_and_ends_with_the_path_hint() -> None:
    subfolder = ROOT / "tests" / "e2e"
    proc = subprocess.run([CLI, "install", "--profile", "headless"], cwd=subfolder, env=_user_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == f"dsh-sidecar: using the host at {ROOT / '.host'}\n"
    assert proc.stdout.splitlines() == [
        f"installed dsh-sidecar-shim into {DSH_HOME / 'profiles' / 'headless'}",
        "enable it in that profile's cordis.patch.yml (row id `sidecar`); see README",
        'to put dsh on PATH in this shell: eval "$(dsh-sidecar shellenv)"',
    ]
    assert not (subfolder / ".host").exists()


def test_doctor_reports_a_profile_that_does_not_compose_by_the_plugin_that_breaks_it(tmp_path: Path) -> None:
    from third_party import broken_bundle_home

    proc = _doctor(broken_bundle_home(tmp_path))
    assert proc.returncode == 1, proc.stdout
    lines = _lines(proc)
    assert lines["row"].startswith(
        "not composed: the profile does not compose: PLUGIN_BROKEN: plugin dsh-broken-bundle")
    assert "has no cordis.patch.yml" in lines["row"] and "missing" not in lines["row"]
    assert lines["boot"] == "not tried (the profile does not compose)"
    assert "reinstall" not in proc.stderr and "re-run `dsh-sidecar install" not in proc.stderr
    assert proc.stderr.rstrip().endswith("(broken: profile)")
