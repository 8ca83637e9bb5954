"""``dsh-sidecar host doctor`` checks the profile as a run will use it (real headless boot)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dshrun import DSH_HOME, ROOT

CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")


def _home_with_row(tmp_path: Path, row: dict[str, object]) -> Path:
    """A DSH_HOME sharing the installed profile, whose own layer adds ``row``."""
    home = tmp_path / "home"
    profile = home / "profiles" / "headless"
    profile.mkdir(parents=True)
    for entry in (DSH_HOME / "profiles" / "headless").iterdir():
        if entry.name not in ("cordis.yml", "cordis.patch.yml"):
            (profile / entry.name).symlink_to(entry)
    (home / "profiles" / "node_modules").symlink_to(DSH_HOME / "profiles" / "node_modules")
    base = (DSH_HOME / "profiles" / "headless" / "cordis.patch.yml").read_text()
    (profile / "cordis.patch.yml").write_text(base + f"\n- {json.dumps(row)}\n")
    return home


def _doctor(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "host", "doctor", "--prefix", str(ROOT / ".host"), "--dsh-home", str(home)],
                          capture_output=True, text=True, timeout=300)


def test_doctor_fails_when_the_profiles_row_points_at_a_missing_python(tmp_path: Path) -> None:
    home = _home_with_row(tmp_path, {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False,
                                     "config": {"python": ["/nonexistent/python3"]}})
    proc = _doctor(home)
    assert proc.returncode == 1, proc.stdout
    lines = dict(line.split(":", 1) for line in proc.stdout.splitlines())
    assert lines["row"].strip() == "enabled"
    assert lines["boot"].strip().startswith("FAILED: ") and "SIDECAR_UNAVAILABLE" in lines["boot"]
    assert proc.stderr.startswith("fix: fix the row's config or python (the boot line names it)")


def test_doctor_names_a_bad_config_field_and_reports_a_disabled_row(tmp_path: Path) -> None:
    home = _home_with_row(tmp_path, {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": True,
                                     "config": {"toolCassette": {"mode": "replay", "file": "x", "include": []}}})
    proc = _doctor(home)
    assert proc.returncode == 1, proc.stdout
    lines = dict(line.split(":", 1) for line in proc.stdout.splitlines())
    assert lines["row"].strip().startswith("disabled (the run API and the pytest plugin enable it per run")
    assert "INVALID_CONFIG" in lines["boot"] and "toolCassette.include" in lines["boot"]
