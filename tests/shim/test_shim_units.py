"""The shim modules' own tests (node --test) for tools.js, mock.js and subagent.js, run with the
host's real Node; ``host-resolve.mjs`` resolves the rc.8 packages from the host install."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".host" / "bin" / "node"
HERE = ROOT / "tests" / "shim"


@pytest.mark.parametrize("module", ["tools", "mock", "subagent"])
def test_shim_module_passes_its_node_tests(module: str) -> None:
    proc = subprocess.run(
        [str(NODE), "--import", str(HERE / "host-resolve.mjs"), "--test", "--test-reporter=tap",
         str(HERE / f"{module}.test.mjs")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "# fail 0" in proc.stdout
    assert "# pass 0" not in proc.stdout
