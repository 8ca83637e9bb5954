"""The public surface is pinned: ``dsh_sidecar.__all__``, the console scripts, the pytest
plugin's entry point, options, ini keys, marker keys and fixtures. Internal module paths are
not: rooms may move (docs/architecture.md), the surface changes only on purpose.

Every module still declares ``__all__`` (the names it means to be used by its neighbours), each
of them defined.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

import dsh_sidecar
import dsh_sidecar.bridge
import dsh_sidecar.python_core

ROOT = Path(__file__).resolve().parents[2]

PUBLIC = [
    "CassetteMissing", "CassetteSummary", "Diagnostic", "HostNotFound", "ModelCassette", "RecordMode", "Row",
    "RunFailed", "RunResult", "StubFailure", "SubagentCassette", "ToolCall", "ToolCassette", "ToolResult",
    "TraceLater", "WarmPool", "__version__", "run",
]
SCRIPTS = {
    "dsh-sidecar": "dsh_sidecar.bridge.api.cli:main",
    "dsh-tool-cassette": "dsh_sidecar.python_core.tool_cassette.cli:main",
    "dsh-subagent-cassette": "dsh_sidecar.python_core.subagent_cassette.cli:cli",
}
PLUGIN = "dsh_sidecar.bridge.api.pytest_plugin"
OPTIONS = ["--dsh-all-rows", "--dsh-allow-live-tools", "--dsh-cold", "--dsh-host", "--dsh-no-verdict",
           "--dsh-record-mode", "--dsh-setup", "--dsh-strict-replay", "--dsh-trace"]
INI = ["dsh_all_rows", "dsh_allow_live_tools", "dsh_cold", "dsh_patches", "dsh_rows", "dsh_strict_replay",
       "dsh_trace", "dsh_verdict"]
MARKER_KEYS = ("cassette", "record_mode", "config", "allow_live_tools", "cold", "strict", "trace")
FIXTURES = ["dsh", "dsh_config", "dsh_host", "dsh_warm_pool"]
COMMANDS = ["add-local-plugin", "host", "import", "install", "mock", "model-cassette", "new-plugin", "run", "sessions",
            "shellenv", "show", "subagent-cassette", "tool-cassette"]
SESSIONS = ["list", "prune", "show"]


def test_the_package_exports_exactly_the_public_api() -> None:
    assert sorted(dsh_sidecar.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(dsh_sidecar, name) is not None


def test_the_console_scripts_and_the_plugin_entry_point_are_pinned_and_load() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == SCRIPTS
    assert project["entry-points"]["pytest11"] == {"dsh_sidecar": PLUGIN}
    for target in SCRIPTS.values():
        module, _, attribute = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attribute))


def test_the_pytest_plugin_offers_exactly_its_options_ini_keys_marker_keys_and_fixtures(tmp_path: Path) -> None:
    plugin = importlib.import_module(PLUGIN)
    assert plugin._MARKER_KEYS == MARKER_KEYS
    env = {**os.environ, "PYTEST_ADDOPTS": ""}
    shown = subprocess.run([sys.executable, "-m", "pytest", "--help"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, check=True).stdout
    assert sorted(set(re.findall(r"^\s+(--dsh-[a-z-]+)", shown, re.M))) == OPTIONS
    assert sorted(set(re.findall(r"^\s+(dsh_[a-z_]+) \(", shown, re.M))) == INI
    fixtures = subprocess.run([sys.executable, "-m", "pytest", "--fixtures", "-q"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120).stdout
    assert sorted(set(re.findall(r"^(dsh[a-z_]*)\b", fixtures, re.M))) == FIXTURES


def test_the_dsh_sidecar_commands_are_pinned() -> None:
    from dsh_sidecar.bridge.api.cli import main, sessions

    assert sorted(main.commands) == COMMANDS
    assert sorted(sessions.commands) == SESSIONS


def _modules() -> list[str]:
    found: list[str] = []
    for package in (dsh_sidecar.bridge, dsh_sidecar.python_core):
        found.append(package.__name__)
        found += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(found)


@pytest.mark.parametrize("name", _modules())
def test_every_module_declares_what_it_exports(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    if module.__file__ and module.__file__.endswith("__init__.py") and "__all__" not in module.__dict__:
        return  # a room's docstring-only __init__
    exported = module.__dict__.get("__all__")
    assert isinstance(exported, list), f"{name} declares no __all__ list"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    for export in exported:
        assert hasattr(module, export), f"{name}.{export} is exported but not defined"
