"""A new user's journey, from the built wheel (issue 22).

The wheel and sdist are built as a release builds them (``python -m build``: the sdist first,
the wheel from the sdist), the wheel is installed with its ``pytest`` extra into an empty venv
outside the checkout, and a project of the user's own runs there: its own ``bridge``,
``python_core`` and ``node_shim`` packages (which the installed names must not shadow), a DSH
tool plugin of its own, a recording against a live local service, then, with the service
stopped, a replay on two xdist workers. Only the host prefix (node, pnpm, dsh) is the
checkout's; the DSH_HOME is empty at the start.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from dshrun import HOST, ROOT
from weather_service import weather_service

from dsh_sidecar import __version__

pytestmark = pytest.mark.slow  # builds the sdist and wheel, installs into a fresh venv

PLUGIN_JS = """\
// @ts-check
import z from '@deepseek-ai/schemastery'
import { defineTool } from '@deepseek-ai/dsh-tools'

export const name = 'acme-quotes'
export const inject = ['tools']
export const Config = z.object({})

/** @param {any} ctx */
export function apply(ctx) {
  ctx.tools.register(defineTool({
    name: 'stock_quote',
    description: 'The quote of a symbol from the quote service.',
    parameters: { symbol: { type: 'string', required: true, description: 'Ticker' } },
    output: {
      schema: { type: 'object', additionalProperties: false, properties: {
        symbol: { type: 'string', required: true }, price: { type: 'number', required: true } } },
      render: (_args, /** @type {any} */ v) => [{ type: 'text', text: `${v.symbol}: ${v.price}` }],
    },
    async execute(/** @type {any} */ args, /** @type {any} */ exec) {
      const url = `${process.env.ACME_QUOTE_URL}/weather?city=${encodeURIComponent(args.symbol)}`
      const response = await fetch(url, { signal: exec.signal })
      if (!response.ok) throw new Error(`quote service answered ${response.status}`)
      const body = await response.json()
      return { symbol: body.city, price: body.temperatureC }
    },
  }))
}
"""

PLUGIN_JSON = """\
{
  "name": "acme-quotes", "version": "1.0.0", "type": "module", "main": "./index.js",
  "exports": { ".": "./index.js", "./cordis.patch.yml": "./cordis.patch.yml", "./package.json": "./package.json" },
  "files": ["index.js", "cordis.patch.yml"], "keywords": ["dsh-plugin"],
  "dsh": { "bundle": { "patch": "./cordis.patch.yml" } },
  "peerDependencies": { "@deepseek-ai/dsh-tools": "^0.1.0-rc.8", "@deepseek-ai/schemastery": "^3.18.1" }
}
"""

TESTS = """\
import bridge
import node_shim
import python_core


def test_own_packages_are_the_projects():
    assert (bridge.OWNER, python_core.OWNER, node_shim.OWNER) == ("acme", "acme", "acme")


def test_acme_quote(dsh):
    result = dsh.run('/mock run stock_quote({"symbol": "ACME"})', tools=["stock_quote"])
    assert result.ok, result.explain()
    assert result.result("stock_quote").value == {"symbol": "ACME", "price": 21}


def test_other_quote(dsh):
    result = dsh.run('/mock run stock_quote({"symbol": "OTHER"})', tools=["stock_quote"])
    assert result.ok, result.explain()
    assert result.result("stock_quote").value == {"symbol": "OTHER", "price": 21}
"""


def _sh(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{argv[:4]} exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist and the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    _sh([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], ROOT, dict(os.environ))
    return next(out.glob("*.tar.gz")), next(out.glob("*.whl"))


def test_the_wheel_holds_dsh_sidecar_only_with_license_and_py_typed(dist: tuple[Path, Path]) -> None:
    names = zipfile.ZipFile(dist[1]).namelist()
    info = f"dsh_sidecar-{__version__}.dist-info"
    assert {n.split("/")[0] for n in names} == {"dsh_sidecar", info}
    assert {"dsh_sidecar/py.typed", f"{info}/licenses/LICENSE", "dsh_sidecar/bridge/api/pytest_plugin.py",
            "dsh_sidecar/python_core/canonical.py", "dsh_sidecar/node_shim/index.js",
            "dsh_sidecar/node_shim/package.json"} <= set(names)
    metadata = zipfile.ZipFile(dist[1]).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Classifier: Typing :: Typed" in metadata
    assert "Project-URL: Source" in metadata
    assert 'Requires-Dist: pytest-xdist>=3.5; extra == "pytest"' in metadata


def test_the_sdist_carries_docs_tests_examples_and_the_license(dist: tuple[Path, Path]) -> None:
    top = f"dsh_sidecar-{__version__}"
    names = set(tarfile.open(dist[0]).getnames())
    assert {f"{top}/LICENSE", f"{top}/README.md", f"{top}/docs/tool-cassette-format.md",
            f"{top}/tests/e2e/test_journey.py", f"{top}/examples/dsh-example-tools/index.js",
            f"{top}/dsh_sidecar/bridge/api/run.py"} <= names
    assert not any("__pycache__" in n for n in names)


def test_a_new_user_records_and_replays_from_the_wheel_in_a_project_of_their_own(
    dist: tuple[Path, Path], tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "DSH_HOME", "DSH_SIDECAR_HOST", "PYTEST_ADDOPTS")}
    venv = tmp_path / "venv"
    _sh([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py = str(venv / "bin" / "python")
    _sh([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{dist[1]}[pytest]"], tmp_path, env)
    version = _sh([str(venv / "bin" / "dsh-sidecar"), "--version"], tmp_path, env)
    assert version.stdout.strip() == f"dsh-sidecar {__version__}"

    project = tmp_path / "acme"
    for package in ("bridge", "python_core", "node_shim"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text('OWNER = "acme"\n')
    plugin = project / "plugins" / "acme-quotes"
    plugin.mkdir(parents=True)
    (plugin / "index.js").write_text(PLUGIN_JS)
    (plugin / "package.json").write_text(PLUGIN_JSON)
    # A plugin's bundle layer inserts its row disabled; the project's patch switches it on.
    row = "{id: acme, name: acme-quotes, disabled: true, config: {}}"
    (plugin / "cordis.patch.yml").write_text(f"- insert:\n    - {row}\n")
    (project / "acme.patch.yml").write_text("- {id: acme, disabled: false}\n")
    (project / "pytest.ini").write_text("[pytest]\ndsh_patches = acme.patch.yml\n")
    (project / "tests").mkdir()
    (project / "tests" / "test_quotes.py").write_text(TESTS)

    home = tmp_path / "dsh-home"
    host_state = (HOST / "host.json").read_text()
    env.update(DSH_SIDECAR_HOST=str(HOST), DSH_HOME=str(home))
    cli = str(venv / "bin" / "dsh-sidecar")
    _sh([cli, "install", "--profile", "headless"], project, env)
    _sh([cli, "add-local-plugin", str(plugin)], project, env)
    # The shared host keeps its Node: another venv's install must not re-link it to its own.
    assert (HOST / "host.json").read_text() == host_state

    pytest_argv = [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    with weather_service(tmp_path) as service:
        recorded = _sh([*pytest_argv, "--dsh-record-mode", "once"], project, {**env, "ACME_QUOTE_URL": service.url})
        assert "3 passed" in recorded.stdout, recorded.stdout
        assert service.requests == 2
    assert sorted(p.name for p in (project / "tests" / "cassettes" / "test_quotes").iterdir()) == [
        "test_acme_quote.tools.ndjson", "test_other_quote.tools.ndjson",
    ]
    # The service is stopped; port 9 on loopback answers nothing, so a real body would fail.
    replayed = _sh([*pytest_argv, "-n", "2"], project, {**env, "ACME_QUOTE_URL": "http://127.0.0.1:9"})
    assert "3 passed" in replayed.stdout, replayed.stdout
    assert service.requests == 2
