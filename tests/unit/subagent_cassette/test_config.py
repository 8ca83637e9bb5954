"""Configuration: closed schema, defaults, named fields, never echoed values."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.subagent_cassette.config import parse_fields


def test_defaults_are_safe() -> None:
    config = parse_fields({"mode": "replay", "file": "a.jsonl"})
    assert (
        config.writeMode,
        config.requestView,
        config.redactSecrets,
        config.timing,
        config.duplicatePolicy,
        config.allowRedactedReplay,
        config.assertConsumed,
    ) == ("create", "metadata", True, "instant", "reject", False, True)
    assert config.provider.names() == ("cassette", "spawn")


def test_transparent_setup_takes_the_upstream_name() -> None:
    config = parse_fields({"mode": "record", "file": "a", "provider": {"transparent": True}})
    assert config.provider.names() == ("spawn", "spawn-upstream")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"file": "a"}, "mode: required"),
        ({"mode": "rewind-secret-value", "file": "a"}, "mode: invalid value"),
        ({"mode": "record", "file": "a", "speeed": 1}, "speeed: unknown field"),
        ({"mode": "record", "file": 3}, "file: expected `str`"),
        ({"mode": "record", "file": " "}, "file: must not be empty"),
        ({"mode": "record", "file": "a", "speed": 0}, "speed: must be a finite number >= 0.001"),
        (
            {"mode": "record", "file": "a", "speed": float("inf")},
            "speed: must be a finite number >= 0.001",
        ),
        (
            {"mode": "record", "file": "a", "provider": {"upstrem": "x"}},
            "provider.upstrem: unknown field",
        ),
        (
            {"mode": "record", "file": "a", "provider": {"transparent": True, "cassette": "c"}},
            "provider.cassette: cannot be set with provider.transparent",
        ),
        (
            {"mode": "record", "file": "a", "provider": {"cassette": "spawn"}},
            "provider: cassette and upstream names must differ",
        ),
        (
            {"mode": "record", "file": "a", "redactionPatterns": ["("]},
            "redactionPatterns[0]: not a valid regular expression",
        ),
        (
            {"mode": "record", "file": "a", "redactionPatterns": ["tool-result"]},
            "redactionPatterns[0]: pattern would alter structural field type",
        ),
    ],
)
def test_invalid_config_names_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_fields(raw)
    assert str(info.value) == f"INVALID_CONFIG: {message}"
    assert "secret-value" not in str(info.value)
