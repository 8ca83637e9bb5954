"""The plugin row's ``modelCassette`` section, parsed once into a frozen Struct.

Rule: keys ``mode`` and ``file`` are required; ``requestView`` (``metadata``), ``timing``
(``instant``), ``providers`` (every route but the sidecar's own ``mock``) and ``filters`` (none:
the request view kept as normalized) have defaults. Every refusal is a ``ConfigError`` naming
the field, never echoing its value.
"""

from __future__ import annotations

import os
from typing import Literal

from dsh_sidecar.python_core.config_fields import ConfigSection, Mode
from dsh_sidecar.python_core.errors import ConfigError

# The tool cassette's filter rules, reused as they are (issue 24): one syntax for every cassette.
from dsh_sidecar.python_core.filters import FilterRule, parse_filters

__all__ = ["ModelCassetteConfig", "parse_config"]

_SECTION = "modelCassette"
_KEYS = ("mode", "file", "requestView", "timing", "providers", "filters")
# The sidecar's deterministic mock route needs no cassette; recording it would only echo the script.
_NEVER_DEFAULT = frozenset({"mock"})


class ModelCassetteConfig(ConfigSection, frozen=True):
    """Validated settings; ``file`` is already resolved against the DSH cwd."""

    mode: Mode
    file: str
    requestView: Literal["metadata", "full"] = "metadata"
    timing: Literal["instant", "recorded"] = "instant"
    providers: tuple[str, ...] | None = None
    filters: tuple[FilterRule, ...] = ()

    def captures(self, provider: str) -> bool:
        """Tell whether calls to the ``provider`` route go through the cassette."""
        if self.providers is None:
            return provider not in _NEVER_DEFAULT
        return provider in self.providers


def _field(name: str) -> str:
    return f"{_SECTION}.{name}"


def _choice(raw: dict[str, object], key: str, allowed: tuple[str, ...], default: str | None) -> str:
    value = raw.get(key, default)
    if value not in allowed:
        suffix = "" if default is None else f" (default {default})"
        raise ConfigError(_field(key), "must be " + " or ".join(allowed) + suffix)
    assert isinstance(value, str)
    return value


def parse_config(raw: object, *, cwd: str) -> ModelCassetteConfig:
    """Validate the ``modelCassette`` section and resolve ``file`` against ``cwd``.

    Raises:
        ConfigError: an unknown key or an invalid value; the message names the field only.
    """
    if not isinstance(raw, dict):
        raise ConfigError(_SECTION, "must be an object")
    for key in raw:
        if key not in _KEYS:
            raise ConfigError(_field(str(key)), "unknown key (expected one of: " + ", ".join(_KEYS) + ")")
    mode = _choice(raw, "mode", ("record", "replay"), None)
    file = raw.get("file")
    if not isinstance(file, str) or not file or "\0" in file:
        raise ConfigError(_field("file"), "must be a non-empty path")
    view = _choice(raw, "requestView", ("metadata", "full"), "metadata")
    timing = _choice(raw, "timing", ("instant", "recorded"), "instant")
    providers = raw.get("providers")
    if providers is not None and (
        not isinstance(providers, list) or not providers or not all(isinstance(p, str) and p for p in providers)
        or len(set(providers)) != len(providers)
    ):
        raise ConfigError(_field("providers"), "must be a non-empty list of distinct route names")
    filters = parse_filters(raw.get("filters", []), field=_field("filters"))
    for index, rule in enumerate(filters):
        # The request view is filtered; answers replay as streamed and a route has no tool.
        for name, value in (("tool", rule.tool), ("call", rule.call)):
            if value is not None:
                raise ConfigError(_field(f"filters[{index}].{name}"), "is not a model cassette filter key")
        if rule.where != "both":
            raise ConfigError(_field(f"filters[{index}].in"),
                              "is not a model cassette filter key: it filters the request view only")
    return ModelCassetteConfig(
        filters=filters,
        mode=mode,  # type: ignore[arg-type]
        file=os.path.join(cwd, file),
        requestView=view,  # type: ignore[arg-type]
        timing=timing,  # type: ignore[arg-type]
        providers=None if providers is None else tuple(providers),
    )
