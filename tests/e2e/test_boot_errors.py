"""A refusal at boot, as a user sees it through real headless DSH: the named error once, the fix, exit 1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dshrun import DSH, Dsh


def _dsh(cwd: Path, config: dict[str, object]) -> subprocess.CompletedProcess[str]:
    row = {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": config}
    (cwd / "p.yml").write_text(f"- {json.dumps(row)}\n")
    return subprocess.run([str(DSH), "--profile", "headless", "--patch", "p.yml", "hello"], cwd=cwd,
                          env=Dsh(cwd=cwd).environ(), capture_output=True, text=True, timeout=120)


def test_a_config_error_is_one_named_line_and_its_fix(tmp_path: Path) -> None:
    proc = _dsh(tmp_path, {"toolCassette": {"mode": "replay", "file": "c.ndjson", "include": []}})
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.splitlines() == [
        "dsh-sidecar: INVALID_CONFIG: toolCassette.include: must not be empty",
        "dsh-sidecar: fix: correct that key in the `sidecar` row's config (your profile's cordis.patch.yml "
        "or the --patch file)",
    ]


def test_a_python_that_cannot_start_is_one_named_line_and_its_fix(tmp_path: Path) -> None:
    proc = _dsh(tmp_path, {"python": ["/nonexistent/python3"]})
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("dsh-sidecar: SIDECAR_UNAVAILABLE: cannot start sidecar (ENOENT)")
    assert lines[1].startswith("dsh-sidecar: fix: the row's `python`")


def test_recording_over_an_existing_cassette_is_refused_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "c.ndjson").write_text("")
    proc = _dsh(tmp_path, {"toolCassette": {"mode": "record", "file": "c.ndjson", "include": ["echo"]}})
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "dsh-sidecar: CASSETTE_EXISTS: c.ndjson already exists; recording never overwrites",
        "dsh-sidecar: fix: replay it (toolCassette.mode: replay), or delete it (and any .partial) to record anew",
    ]
    assert (tmp_path / "c.ndjson").read_text() == ""
