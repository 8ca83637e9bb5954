"""The doctor's reader for the ``sidecar`` row of ``dsh --dump-config``, and the host prefix notice."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_sidecar.bridge.api import cli
from dsh_sidecar.bridge.api.run import HostNotFound
from dsh_sidecar.bridge.host import doctor
from dsh_sidecar.bridge.host.doctor import SidecarRow, parse_row
from dsh_sidecar.bridge.host.toolchain import HostError

DUMP = """\
# == dsh-sidecar-shim
- id: sidecar
  name: dsh-sidecar-shim
  disabled: false
  config:
    python:
      - /usr/bin/python3
      - '-X'
      - 'it''s: x'
      - "tab\\there"
    toolCassette:
      mode: replay
      file: cass/w x.ndjson
      include:
        - weather_lookup
        - fs_*
    mock:
      enabled: true
      defaultGapMs: 0
      nestedTools: []
    subagentCassette:
      mode: record
      file: a.jsonl
      provider:
        transparent: true
    modelCassette:
      mode: replay
      file: /abs/model.ndjson
# == dsh-example-tools
- id: example-tools
  disabled: true
"""


def test_the_row_block_is_read_with_its_config() -> None:
    row = parse_row(DUMP)
    assert row.state == "enabled"
    assert row.config == {
        "python": ["/usr/bin/python3", "-X", "it's: x", "tab\there"],
        "toolCassette": {"mode": "replay", "file": "cass/w x.ndjson", "include": ["weather_lookup", "fs_*"]},
        "mock": {"enabled": True, "defaultGapMs": 0, "nestedTools": []},
        "subagentCassette": {"mode": "record", "file": "a.jsonl", "provider": {"transparent": True}},
        "modelCassette": {"mode": "replay", "file": "/abs/model.ndjson"},
    }
    # Only relative replay files are resolved against a run's folder.
    assert row.replay_files() == ["cass/w x.ndjson"]


@pytest.mark.parametrize(("dump", "expected"), [
    ("- id: other\n  disabled: false\n", SidecarRow("missing", None)),
    ("- id: sidecar\n  name: dsh-sidecar-shim\n  disabled: true\n  config: {}\n", SidecarRow("disabled", {})),
    ("- id: sidecar\n  config:\n    python: &anchor [a]\n", SidecarRow("unknown", None)),
    ("- id: sidecar\n  config:\n    key:value\n", SidecarRow("unknown", None)),
    ("- id: sidecar\n  config:\n    python:\n      - a: b\n", SidecarRow("unknown", None)),
    ("- id: sidecar\n  config:\n    trace: t.jsonl # a comment\n", SidecarRow("unknown", None)),
])
def test_missing_disabled_and_unreadable_rows(dump: str, expected: SidecarRow) -> None:
    assert parse_row(dump) == expected


def _no_host(start: object = None) -> object:
    raise HostNotFound("none")


def test_a_new_host_is_announced_before_the_install_starts(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DSH_SIDECAR_HOST", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "find_host", _no_host)
    seen: list[Path] = []

    def stop(prefix: Path, _home: object) -> object:
        seen.append(prefix)
        raise HostError("stopped by the test")

    monkeypatch.setattr(cli, "ensure_host", stop)
    result = CliRunner().invoke(cli.main, ["host", "install"])
    assert seen == [Path(".host")]
    first, second = result.stderr.splitlines()
    assert first == (
        "dsh-sidecar: no DSH host in this folder, its parents or beside this checkout: installing a new one at "
        f"{tmp_path.resolve() / '.host'} (Node, pnpm and DSH, about 100 MB; use --prefix DIR or $DSH_SIDECAR_HOST "
        "for another place)"
    )
    assert second == "dsh-sidecar: HOST_SETUP: stopped by the test"


def test_the_variable_names_the_host_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DSH_SIDECAR_HOST", str(tmp_path / "elsewhere"))
    result = CliRunner().invoke(cli.main, ["shellenv"])
    assert result.exit_code == 1
    expected = f"dsh-sidecar: using the host at {tmp_path / 'elsewhere'} ($DSH_SIDECAR_HOST)"
    assert result.stderr.splitlines()[0] == expected


def test_the_boot_line_is_the_sidecars_named_error_wherever_rc8_prints_it() -> None:
    # Seen under load: rc.8 printed its own "FAILED: agent ... setup aborted" and more lines after
    # the sidecar's refusal, and the doctor showed rc.8's line instead of the named error.
    stderr = "\n".join([
        "dsh-sidecar: INVALID_CONFIG: toolCassette.file: w.tools.ndjson does not exist",
        "    at Object.<anonymous> (file:///x/index.js:1:1)",
        *[f"dsh: note {i}" for i in range(8)],
        'dsh: FAILED: agent "session-1" setup aborted: owner disposed during setup',
    ])
    boot = doctor.boot_outcome(1, "", stderr)
    assert not boot.ok
    assert boot.line == "INVALID_CONFIG: toolCassette.file: w.tools.ndjson does not exist"
    assert doctor.boot_outcome(1, "", "dsh: FAILED: agent x setup aborted").line.startswith("FAILED: agent x")
    assert doctor.boot_outcome(1, "", "").line == "exit 1, no stderr"
