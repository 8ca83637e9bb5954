"""Subagent cassette configuration: one closed, frozen Struct parsed once.

Rule: every invalid value is a ``ConfigError`` (``INVALID_CONFIG``) naming the field, never
echoing its value. Redaction patterns are compiled and checked here, so a configuration that
parses can always record.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from dsh_sidecar.python_core.canonical import DEPTH_REASON, canonical_bytes
from dsh_sidecar.python_core.config_fields import ConfigSection, Mode, field_of
from dsh_sidecar.python_core.errors import CanonicalJsonError, ConfigError
from dsh_sidecar.python_core.subagent_cassette.redact import build_redactor

__all__ = ["CassetteConfig", "ProviderConfig", "parse_config", "parse_fields"]

MIN_SPEED = 0.001
_SECTION = "subagentCassette"


class ProviderConfig(ConfigSection, frozen=True, kw_only=True):
    """Provider names; ``transparent`` takes over the upstream's own name.

    Transparent setup: the cassette registers as ``upstream`` (``spawn``) and the deployment
    renames the real provider to ``renamedUpstream`` (default ``<upstream>-upstream``), so
    every consumer naming ``spawn`` reaches the cassette without further config.
    """

    cassette: str | None = None
    upstream: str = "spawn"
    transparent: bool = False
    renamedUpstream: str | None = None

    def names(self) -> tuple[str, str]:
        """Return ``(cassette name, upstream name)`` as registered in ``ctx.subagents``."""
        if self.transparent:
            return self.upstream, self.renamedUpstream or f"{self.upstream}-upstream"
        return self.cassette or "cassette", self.upstream


class CassetteConfig(ConfigSection, frozen=True, kw_only=True):
    """The whole subagent cassette configuration (plugin row ``subagentCassette``)."""

    mode: Mode
    file: str
    writeMode: Literal["create", "truncate", "append"] = "create"
    requestView: Literal["metadata", "full"] = "metadata"
    redactSecrets: bool = True
    redactionPatterns: tuple[str, ...] = ()
    timing: Literal["instant", "recorded"] = "instant"
    speed: float = 1.0
    duplicatePolicy: Literal["reject", "sequence"] = "reject"
    allowRedactedReplay: bool = False
    assertConsumed: bool = True
    provider: ProviderConfig = ProviderConfig()


def parse_fields(raw: Mapping[str, Any]) -> CassetteConfig:
    """Validate the section's fields as given (errors name the bare field, ``file`` is not resolved).

    Raises:
        ConfigError: names the offending field (``INVALID_CONFIG``).
    """
    try:
        # Lone surrogates (keys or values) and deep nesting, named before msgspec meets them.
        canonical_bytes(raw)
    except CanonicalJsonError as exc:
        if "surrogate" in exc.reason or exc.reason == DEPTH_REASON:
            field = exc.location.strip("/").replace("/", ".") or "config"
            raise ConfigError(field, exc.reason) from None
    try:
        config = msgspec.convert(raw, CassetteConfig)
    except UnicodeEncodeError:
        raise ConfigError("config", "lone surrogate in a string or object key") from None
    except msgspec.ValidationError as exc:
        field, reason = field_of(str(exc))
        raise ConfigError(field, reason) from None
    if not config.file.strip():
        raise ConfigError("file", "must not be empty")
    if not math.isfinite(config.speed) or config.speed < MIN_SPEED:
        raise ConfigError("speed", f"must be a finite number >= {MIN_SPEED}")
    cassette, upstream = config.provider.names()
    if config.provider.transparent and config.provider.cassette is not None:
        raise ConfigError("provider.cassette", "cannot be set with provider.transparent")
    if not cassette or not upstream:
        raise ConfigError("provider", "provider names must not be empty")
    if cassette == upstream:
        raise ConfigError("provider", "cassette and upstream names must differ")
    build_redactor(config.redactSecrets, config.redactionPatterns)
    return config


def parse_config(raw: Mapping[str, Any], *, cwd: str) -> CassetteConfig:
    """Parse the row's ``subagentCassette`` section, resolving ``file`` against the DSH ``cwd``.

    Raises:
        ConfigError: names the field as the row spells it, ``subagentCassette.<field>``.
    """
    try:
        config = parse_fields(raw)
    except ConfigError as error:
        raise ConfigError(f"{_SECTION}.{error.field}", error.reason) from None
    return msgspec.structs.replace(config, file=os.path.join(cwd, config.file))
