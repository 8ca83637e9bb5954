"""The plugin row's config, parsed once at ``initialize`` into one closed tree of frozen Structs.

Top-level keys: ``python`` (read by the shim), ``toolCassette``, ``mock``, ``subagentCassette``,
``modelCassette``, ``trace``, ``report``, ``stubs`` (python_core/stubs.py), ``liveTools`` (the
offline guard: the tools that may run live when no cassette serves them, ``*`` for all; absent:
no guard), ``strictReplay`` (a replay that diverged from its recording fails the run instead of
warning: docs/test-logic.md). Each feature section is parsed by its own package's config module; paths come out
resolved against the DSH cwd and checked (``config_paths``).
Every refusal, at any depth, is a ``ConfigError`` naming the field, so a typo fails the DSH boot
instead of being ignored; nothing is opened or created before the whole tree parsed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import msgspec

from dsh_sidecar.python_core.canonical import DEPTH_REASON, value_too_deep
from dsh_sidecar.python_core.config_fields import ConfigSection
from dsh_sidecar.python_core.config_paths import check_nul, check_path
from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.mock.config import MockConfig
from dsh_sidecar.python_core.mock.config import parse_config as parse_mock
from dsh_sidecar.python_core.model_cassette.config import ModelCassetteConfig
from dsh_sidecar.python_core.model_cassette.config import parse_config as parse_model_cassette
from dsh_sidecar.python_core.stubs import parse_stubs
from dsh_sidecar.python_core.subagent_cassette.config import CassetteConfig as SubagentCassetteConfig
from dsh_sidecar.python_core.subagent_cassette.config import parse_config as parse_subagent_cassette
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig
from dsh_sidecar.python_core.tool_cassette.config import parse_config as parse_tool_cassette

__all__ = ["SidecarConfig", "parse_sidecar_config"]

_TOP_LEVEL = (
    "python", "toolCassette", "mock", "subagentCassette", "modelCassette", "trace", "report", "stubs", "liveTools",
    "warm", "strictReplay", "traceValues",
)
# A standalone tool cassette plugin takes these three keys as its whole row config; here one row
# serves every feature, so they sit in the row's `toolCassette` section.
_TOOL_KEYS = ("mode", "file", "include")
_TOOL_KEYS_HINT = (
    "the tool cassette's mode, file and include go under toolCassette in the `sidecar` row: "
    "toolCassette: { mode: record, file: ..., include: [...] }"
)


class SidecarConfig(ConfigSection, frozen=True, kw_only=True):
    """Everything the sidecar was configured with, resolved against the DSH cwd."""

    cwd: str
    python: tuple[str, ...] = ()
    """The interpreter command the shim starts (empty: the installing interpreter)."""
    tool_cassette: ToolCassetteConfig | None = None
    mock: MockConfig = msgspec.field(default_factory=MockConfig)
    subagent_cassette: SubagentCassetteConfig | None = None
    model_cassette: ModelCassetteConfig | None = None
    trace: str | None = None
    report: str | None = None
    """Where the run report goes at shutdown (written by the run API's runs)."""
    stubs: dict[str, str] = msgspec.field(default_factory=dict)
    """Tool name to the ``module:function`` reference that serves it (python_core/stubs.py)."""
    live_tools: tuple[str, ...] | None = None
    """Tools allowed to run live with no cassette serving them (``*``: all); ``None``: no guard."""
    warm: str | None = None
    """A warm host's control socket (docs/warm-host.md): sessions bring their own config."""
    trace_values: bool = False
    """The hook log (``trace``) also holds a model mismatch's request views (the run API's trace)."""
    strict_replay: bool = False
    """A replay that diverged from its recording (``REPLAY_DIVERGED``) fails the run; else a warning."""


def parse_sidecar_config(raw: Mapping[str, Any], *, cwd: str) -> SidecarConfig:
    """Parse the row config sent at ``initialize``.

    Raises:
        ConfigError: an unknown key or an invalid value; the message names the field only.
    """
    for key in raw:
        if key not in _TOP_LEVEL:
            raise ConfigError(key, "unknown key (expected one of: " + ", ".join(_TOP_LEVEL) + ")",
                              hint=_TOOL_KEYS_HINT if key in _TOOL_KEYS else None)
    _refuse_nulls(raw, cwd)
    warm = raw.get("warm")
    if warm is not None:
        if not isinstance(warm, str) or not warm or "\0" in warm:
            raise ConfigError("warm", "must be the path of the run API's control socket")
        others = [key for key in raw if key not in ("python", "warm")]
        if others:
            raise ConfigError(others[0], "cannot go with warm: a warm host's sessions bring their own config")
    python = raw.get("python")
    # schemastery fills an absent array with []: that means "the installing interpreter".
    if python is not None and (
        not isinstance(python, list) or not all(isinstance(p, str) and p for p in python)
    ):
        raise ConfigError("python", "must be a list of non-empty strings")
    tool_cassette = raw.get("toolCassette")
    tool = None if tool_cassette is None else parse_tool_cassette(tool_cassette, cwd=cwd)
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
    live = raw.get("liveTools")
    if live is not None and (not isinstance(live, list) or not all(isinstance(t, str) and t for t in live)):
        raise ConfigError("liveTools", "must be a list of tool names (or [\"*\"] for all)")
    strict = raw.get("strictReplay", False)
    if not isinstance(strict, bool):
        raise ConfigError("strictReplay", "must be true or false")
    values = raw.get("traceValues", False)
    if not isinstance(values, bool):
        raise ConfigError("traceValues", "must be true or false")
    if values and trace is None:
        raise ConfigError("traceValues", "needs trace: the file the values go to")
    mock = raw.get("mock")
    parsed_mock = MockConfig() if mock is None else parse_mock(mock)
    trace_path = None if trace is None else os.path.join(cwd, trace)
    report_path = None if report is None else os.path.join(cwd, report)
    _check_files(tool, trace_path, report_path, subagent, cwd)
    stubs = parse_stubs(raw["stubs"]) if "stubs" in raw else {}
    for name in stubs:
        if tool is not None and tool.selects(name):
            raise ConfigError(f"stubs.{name}", "is also selected by toolCassette.include; a call is "
                                               "stubbed or taped, not both: leave it out of include")
    config = SidecarConfig(
        cwd=cwd,
        python=tuple(python or ()),
        tool_cassette=tool,
        mock=parsed_mock,
        subagent_cassette=None if subagent is None else parse_subagent_cassette(subagent, cwd=cwd),
        model_cassette=None if model is None else parse_model_cassette(model, cwd=cwd),
        trace=trace_path,
        report=report_path,
        stubs=stubs,
        live_tools=None if live is None else tuple(live),
        warm=warm,
        strict_replay=strict,
        trace_values=values,
    )
    if config.model_cassette is not None:
        check_path("modelCassette.file", config.model_cassette.file,
                   "read" if config.model_cassette.mode == "replay" else "write")
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


def _check_files(tool: ToolCassetteConfig | None, trace: str | None, report: str | None,
                 subagent: Mapping[str, Any] | None, cwd: str) -> None:
    """Check every path a feature will open (see ``python_core.config_paths``).

    The subagent file is checked before its section parses, so an unusable path is named as
    a path (a lone surrogate: "no file can have that name") rather than as a string value.
    """
    if tool is not None:
        check_path("toolCassette.file", tool.file, "create" if tool.mode == "record" else "read")
    if trace is not None:
        check_path("trace", trace, "write")
    if report is not None:
        check_path("report", report, "write")
    if subagent is not None and isinstance(subagent.get("file"), str) and subagent["file"].strip():
        check_path("subagentCassette.file", os.path.join(cwd, subagent["file"]),
                   "read" if subagent.get("mode") == "replay" else "write")
