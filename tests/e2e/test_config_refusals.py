"""Row configs that used to fail late or silently are refused at boot by field (real headless DSH).

A ``null`` feature section (what ``toolCassette:`` with its block mis-indented gives) once
disabled the cassette and ran the real tool bodies; a cassette path under a file, a
directory, or a replay of a missing file failed as an I/O error without naming the field.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dshrun import Dsh

MakeDsh = Callable[..., Dsh]
TASK = '/mock run echo({"text": "hi"})'


@pytest.mark.parametrize("section", ["toolCassette", "subagentCassette", "mock", "trace"])
def test_a_null_section_written_in_yaml_fails_the_boot_by_name(make_dsh: MakeDsh, section: str) -> None:
    dsh = make_dsh(sidecar_enabled=False, extra_patch=(
        "- id: sidecar\n"
        "  name: dsh-sidecar-shim\n"
        "  disabled: false\n"
        "  config:\n"
        f"    {section}:\n"
    ))

    run = dsh.run(TASK)

    assert run.rc == 1
    assert (f"INVALID_CONFIG: {section}: is null (a mis-indented YAML block?); give the section or "
            "remove the key") in run.stderr
    assert run.bodies() == []


@pytest.mark.parametrize(("mode", "file", "reason"), [
    ("record", "a-file/sub/c.ndjson", "the directory of c.ndjson cannot be made (a part of its path is a file)"),
    ("record", "a-dir", "a-dir is a directory"),
    ("replay", "a-dir", "a-dir is a directory"),
    ("replay", "absent.ndjson", "absent.ndjson does not exist (replay reads it)"),
])
def test_an_unusable_cassette_path_fails_the_boot_naming_the_field(
    make_dsh: MakeDsh, mode: str, file: str, reason: str,
) -> None:
    dsh = make_dsh(sidecar={"toolCassette": {"mode": mode, "file": file, "include": ["echo"]}})
    (dsh.cwd / "a-dir").mkdir()
    (dsh.cwd / "a-file").write_text("")

    run = dsh.run(TASK)

    assert run.rc == 1
    assert f"INVALID_CONFIG: toolCassette.file: {reason}" in run.stderr
    assert str(dsh.cwd) not in run.stderr
    assert run.bodies() == []
