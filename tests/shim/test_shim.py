"""The shim's own tests (node --test) and its public surface, run with the host's real Node."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / ".host" / "bin" / "node"
INSTALLED = ROOT / ".host" / "dsh-home" / "profiles" / "headless" / "node_modules" / "dsh-sidecar-shim"


def test_shim_rpc_client_passes_its_node_tests() -> None:
    proc = subprocess.run(
        [str(NODE), "--test", "--test-reporter=tap", str(ROOT / "tests" / "shim" / "rpc.test.mjs")],
        capture_output=True, text=True, timeout=120,
    )

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "# fail 0" in proc.stdout


def test_installed_shim_exports_exactly_the_plugin_surface() -> None:
    url = json.dumps((INSTALLED / "index.js").as_uri())
    script = f"import({url}).then(m => console.log(JSON.stringify(Object.keys(m).sort())))"
    proc = subprocess.run([str(NODE), "-e", script], capture_output=True, text=True, timeout=60)

    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["Config", "apply", "inject", "name"]


def test_installed_shim_is_this_checkout() -> None:
    shipped = ("index.js", "rpc.js", "tools.js", "standins.js", "mock.js", "model.js", "steps.js", "subagent.js",
               "cordis.patch.yml")
    for name in shipped:
        assert (INSTALLED / name).read_bytes() == (ROOT / "node_shim" / name).read_bytes()
