"""The model cassette's shim listener (node --test), run with the host's real Node."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".host" / "bin" / "node"


def test_model_listener_passes_its_node_tests() -> None:
    proc = subprocess.run(
        [str(NODE), "--test", "--test-reporter=tap", str(ROOT / "tests" / "shim" / "model.test.mjs")],
        capture_output=True, text=True, timeout=120,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "# fail 0" in proc.stdout and "# pass 7" in proc.stdout
