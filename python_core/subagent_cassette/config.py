"""Subagent cassette configuration: one closed, frozen Struct parsed once.

Rule: every invalid value is a ``ConfigError`` (``INVALID_CONFIG``) naming the field, never
echoing its value. Redaction patterns are compiled and checked here, so a configuration that
parses can always record.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from python_core.canonical import DEPTH_REASON, canonical_bytes
from python_core.errors import CanonicalJsonError, ConfigError
from python_core.subagent_cassette.redact import build_redactor

__all__ = ["CassetteConfig", "ProviderConfig", "parse_config"]

MIN_SPEED = 0.001


class ProviderConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
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


class CassetteConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The whole subagent cassette configuration (plugin row ``subagentCassette``)."""

    mode: Literal["record", "replay"]
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


def _field_of(message: str) -> tuple[str, str]:
    """Split a msgspec message into (field path, value-free reason)."""
    text, _, location = message.partition(" - at ")
    field = location.strip("`").removeprefix("$").lstrip(".") or "config"
    if text.startswith("Object contains unknown field"):
        name = text.removeprefix("Object contains unknown field ").strip("`")
        return (f"{field}.{name}" if field != "config" else name), "unknown field"
    if text.startswith("Object missing required field"):
        name = text.removeprefix("Object missing required field ").strip("`")
        return (f"{field}.{name}" if field != "config" else name), "required"
    if text.startswith("Expected"):
        return field, text.split(",")[0].replace("Expected", "expected", 1)
    return field, "invalid value"


def parse_config(raw: Mapping[str, Any]) -> CassetteConfig:
    """Validate a plugin/CLI configuration mapping.

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
        field, reason = _field_of(str(exc))
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
