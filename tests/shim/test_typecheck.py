"""The shim's JSDoc types, checked by ``tsc --noEmit`` against the installed rc.8 typings."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".host" / "bin" / "node"
TSC = ROOT / ".host" / "typescript" / "node_modules" / "typescript" / "bin" / "tsc"
SHIM = ROOT / "node_shim"
SOURCES = sorted(SHIM.glob("*.js"))
# A JSDoc type cast: `/** @type {T} */ (expression)`.
CAST = re.compile(r"/\*\*\s*@type\s*\{[^}]*\}\s*\*/\s*\(")


def test_shim_type_checks_against_the_rc8_typings() -> None:
    proc = subprocess.run(
        [str(NODE), str(TSC), "--project", str(SHIM / "tsconfig.json"), "--pretty", "false"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_shim_module_is_type_checked() -> None:
    checked = (SHIM / "tsconfig.json").read_text()

    for source in SOURCES:
        assert source.read_text().startswith("// @ts-check\n"), source.name
        assert f'"{source.name}"' in checked, source.name


def test_the_shim_declares_no_any_type() -> None:
    for source in SOURCES:
        for number, line in enumerate(source.read_text().splitlines(), 1):
            # `z.any()` is the config schema's runtime value, not a type.
            assert not re.search(r"\{[^}]*\bany\b[^}]*\}", line), f"{source.name}:{number}: {line.strip()}"


def test_each_remaining_cast_says_why_on_the_line_before() -> None:
    for source in SOURCES:
        lines = source.read_text().splitlines()
        for index, line in enumerate(lines):
            if CAST.search(line):
                assert lines[index - 1].strip().startswith("//"), f"{source.name}:{index + 1}: {line.strip()}"
