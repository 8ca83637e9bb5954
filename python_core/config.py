"""The plugin row's config, parsed once at ``initialize`` into a frozen value.

Top-level keys: ``python`` (read by the shim), ``toolCassette``, ``mock``, ``subagentCassette``,
``modelCassette``, ``trace``, ``report``. Each feature section is parsed by its own package; an
unknown key anywhere is a ``ConfigError`` naming the field, so a typo fails the DSH boot instead
of being ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from python_core.canonical import DEPTH_REASON, value_too_deep
from python_core.config_paths import check_nul, check_path
from python_core.errors import ConfigError
from python_core.tool_cassette.config import ToolCassetteConfig
from python_core.tool_cassette.config import parse_config as parse_tool_cassette

__all__ = ["MockConfig", "SidecarConfig", "parse_sidecar_config"]

_TOP_LEVEL = ("python", "toolCassette", "mock", "subagentCassette", "modelCassette", "trace", "report")


@dataclass(frozen=True)
class MockConfig:
    """The ``mock`` section: the ``mock`` model route and its default gap between steps."""

    enabled: bool = True
    default_gap_ms: int = 100
    nested_tools: tuple[str, ...] = ()
    """Extra tool names a replay refuses as nested (renamed delegation rows, own composites)."""


@dataclass(frozen=True)
class SidecarConfig:
    """Everything the sidecar was configured with, resolved against the DSH cwd."""

    cwd: str
    tool_cassette: ToolCassetteConfig | None = None
    mock: MockConfig = MockConfig()
    subagent_cassette: Mapping[str, Any] | None = None
    model_cassette: Mapping[str, Any] | None = None
    """Parsed by ``python_core.model_cassette`` when the sidecar opens it."""
    trace: str | None = None
    report: str | None = None
    """Where the run report goes at shutdown (written by the run API's runs)."""


def _parse_mock(raw: object) -> MockConfig:
    if raw is None:
        return MockConfig()
    if not isinstance(raw, dict):
        raise ConfigError("mock", "must be an object")
    for key in raw:
        if key not in ("enabled", "defaultGapMs", "nestedTools"):
            raise ConfigError(f"mock.{key}", "unknown key")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError("mock.enabled", "must be true or false")
    gap = raw.get("defaultGapMs", 100)
    if not isinstance(gap, int) or isinstance(gap, bool) or not 0 <= gap <= 3_600_000:
        raise ConfigError("mock.defaultGapMs", "must be an integer from 0 to 3600000")
    nested = raw.get("nestedTools", [])
    if not isinstance(nested, list) or not all(isinstance(n, str) and n for n in nested):
        raise ConfigError("mock.nestedTools", "must be a list of tool names")
    return MockConfig(enabled=enabled, default_gap_ms=gap, nested_tools=tuple(nested))


def parse_sidecar_config(raw: Mapping[str, Any], *, cwd: str) -> SidecarConfig:
    """Parse the row config sent at ``initialize``.

    Raises:
        ConfigError: an unknown key or an invalid value; the message names the field only.
    """
    for key in raw:
        if key not in _TOP_LEVEL:
            raise ConfigError(key, "unknown key (expected one of: " + ", ".join(_TOP_LEVEL) + ")")
    _refuse_nulls(raw, cwd)
    python = raw.get("python")
    # schemastery fills an absent array with []: that means "the installing interpreter".
    if python is not None and (
        not isinstance(python, list) or not all(isinstance(p, str) and p for p in python)
    ):
        raise ConfigError("python", "must be a list of non-empty strings")
    tool_cassette = raw.get("toolCassette")
    trace = raw.get("trace")
    if trace is not None and (not isinstance(trace, str) or not trace):
        raise ConfigError("trace", "must be a non-empty path")
    report = raw.get("report")
    if report is not None and (not isinstance(report, str) or not report or "\0" in report):
        raise ConfigError("report", "must be a non-empty path")
    subagent = raw.get("subagentCassette")
    if subagent is not None and not isinstance(subagent, dict):
        raise ConfigError("subagentCassette", "must be an object")
    model = raw.get("modelCassette")
    if model is not None and not isinstance(model, dict):
        raise ConfigError("modelCassette", "must be an object")
    config = SidecarConfig(
        cwd=cwd,
        tool_cassette=None if tool_cassette is None else parse_tool_cassette(tool_cassette, cwd=cwd),
        mock=_parse_mock(raw.get("mock")),
        subagent_cassette=subagent,
        model_cassette=model,
        trace=None if trace is None else os.path.join(cwd, trace),
        report=None if report is None else os.path.join(cwd, report),
    )
    _check_files(config)
    return config


def _refuse_nulls(raw: Mapping[str, Any], cwd: str) -> None:
    """Refuse deep nesting, ``null`` sections and NUL bytes in path fields before parsing."""
    if value_too_deep(raw):
        raise ConfigError("config", DEPTH_REASON)
    check_nul("cwd", cwd)
    for key in _TOP_LEVEL:
        # `toolCassette:` with its block mis-indented is null: refusing it keeps a typo from
        # silently disabling a feature (and running real tool bodies).
        if key in raw and raw[key] is None:
            raise ConfigError(key, "is null (a mis-indented YAML block?); give the section or remove the key")
    if isinstance(raw.get("trace"), str):
        check_nul("trace", raw["trace"])
    subagent = raw.get("subagentCassette")
    if isinstance(subagent, dict) and isinstance(subagent.get("file"), str):
        check_nul("subagentCassette.file", subagent["file"])


def _check_files(config: SidecarConfig) -> None:
    """Check every path a feature will open (see ``python_core.config_paths``)."""
    if config.tool_cassette is not None:
        check_path("toolCassette.file", config.tool_cassette.file,
                   "write" if config.tool_cassette.mode == "record" else "read")
    if config.trace is not None:
        check_path("trace", config.trace, "write")
    subagent = config.subagent_cassette
    if subagent is not None and isinstance(subagent.get("file"), str) and subagent["file"].strip():
        check_path("subagentCassette.file", os.path.join(config.cwd, subagent["file"]),
                   "read" if subagent.get("mode") == "replay" else "write")
