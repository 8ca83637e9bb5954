"""Packing the shim and the managed hmr block of the profile layer."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

from dsh_sidecar.bridge.host.install import HMR_BLOCK, _ensure_hmr_fix, pack_package
from dsh_sidecar.node_shim import SHIM_DIR

ROOT = Path(__file__).resolve().parents[2]


def test_pack_is_deterministic_and_carries_install_json(tmp_path: Path) -> None:
    extra = {"install.json": b'{"python": ["/venv/bin/python"]}\n'}

    first = pack_package(SHIM_DIR, tmp_path / "a", extra)
    second = pack_package(SHIM_DIR, tmp_path / "b", extra)

    assert first.name == second.name
    assert first.read_bytes() == second.read_bytes()
    # Packs a second apart must match too: the gzip header's mtime field is pinned to zero.
    assert first.read_bytes()[4:8] == b"\0\0\0\0"
    with tarfile.open(fileobj=io.BytesIO(first.read_bytes())) as tar:
        names = sorted(tar.getnames())
        assert names == sorted(f"package/{n}" for n in [
            "package.json", "index.js", "rpc.js", "tools.js", "standins.js", "mock.js", "model.js", "steps.js",
            "subagent.js", "warm.js", "cordis.patch.yml", "README.md", "install.json", "client/mock-ui.js"])
        manifest = json.loads(tar.extractfile("package/package.json").read())  # type: ignore[union-attr]
    assert manifest["dsh"]["bundle"] == {"patch": "./cordis.patch.yml"}
    assert manifest["exports"]["./client"] == "./client/mock-ui.js"


def test_a_changed_package_gets_a_new_tarball_name(tmp_path: Path) -> None:
    one = pack_package(SHIM_DIR, tmp_path, {"install.json": b'{"python": ["a"]}'})
    two = pack_package(SHIM_DIR, tmp_path, {"install.json": b'{"python": ["b"]}'})

    assert one.name != two.name


def test_hmr_fix_replaces_the_initial_empty_layer(tmp_path: Path) -> None:
    layer = tmp_path / "cordis.patch.yml"
    layer.write_text("# Your patch layer for this dsh profile\n[]\n")

    _ensure_hmr_fix(layer)

    assert layer.read_text() == "# Your patch layer for this dsh profile\n\n" + HMR_BLOCK


def test_hmr_fix_is_added_once_after_the_users_rows(tmp_path: Path) -> None:
    layer = tmp_path / "cordis.patch.yml"
    layer.write_text("- id: sidecar\n  disabled: false\n")

    _ensure_hmr_fix(layer)
    _ensure_hmr_fix(layer)

    assert layer.read_text() == "- id: sidecar\n  disabled: false\n\n" + HMR_BLOCK


def test_install_compiles_the_sidecar_even_where_bytecode_writing_is_off(tmp_path: Path) -> None:
    for package in ("bridge", "python_core", "node_shim"):
        shutil.copytree(ROOT / package, tmp_path / "dsh_sidecar" / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "dsh_sidecar" / "__init__.py", tmp_path / "dsh_sidecar" / "__init__.py")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}

    compile_it = "from dsh_sidecar.bridge.host.install import compile_sidecar; compile_sidecar()"
    subprocess.run([sys.executable, "-c", compile_it],
                   env=env, cwd=tmp_path, check=True, timeout=120)

    sources = sorted(tmp_path.rglob("*.py"))
    assert len(sources) > 40
    missing = [s for s in sources if not Path(importlib.util.cache_from_source(str(s))).is_file()]
    assert missing == []
