"""Redaction: credential shapes, configured patterns, structural fields untouched."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.subagent_cassette.redact import REDACTED, build_redactor


@pytest.mark.parametrize(
    "secret",
    [
        "sk-abcdefghijklmnopqrstuvwx12",
        "Bearer abcdefghijklmnop.qrstuv",
        "AKIAABCDEFGHIJKLMNOP",
        "aws_secret_access_key = " + "A" * 40,
        "ghp_" + "a" * 36,
        "xoxb-1234567890-abcdef",
        "AIza" + "b" * 35,
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3In0.c2lnbmF0dXJlX3ZhbHVl",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----",
        "password: correct-horse-battery",
    ],
    ids=[
        "sk",
        "bearer",
        "aws-id",
        "aws-secret",
        "github",
        "slack",
        "google",
        "jwt",
        "private-key",
        "assignment",
    ],
)
def test_builtin_patterns_redact_common_credentials(secret: str) -> None:
    text, count = build_redactor(True, ()).text(f"use {secret} now")
    assert (text, count) == (f"use {REDACTED} now", 1)


def test_configured_pattern_redacts_and_counts() -> None:
    redactor = build_redactor(False, (r"ACME-\d{4}",))
    value, count = redactor.value({"output": [{"type": "text", "text": "ACME-1234 ACME-9999"}]})
    assert (value, count) == ({"output": [{"type": "text", "text": f"{REDACTED} {REDACTED}"}]}, 2)


def test_redaction_leaves_the_input_untouched() -> None:
    original = {"a": ["sk-abcdefghijklmnopqrstuvwx12"]}
    build_redactor(True, ()).value(original)
    assert original == {"a": ["sk-abcdefghijklmnopqrstuvwx12"]}


def test_no_patterns_means_no_substitution() -> None:
    redactor = build_redactor(False, ())
    assert redactor.value({"k": "sk-abcdefghijklmnopqrstuvwx12"}) == (
        {"k": "sk-abcdefghijklmnopqrstuvwx12"},
        0,
    )


@pytest.mark.parametrize(
    ("pattern", "structural"),
    [("tool-", "type"), ("^text$", "type"), ("image/png", "mediaType"), ("jpe?g", "mediaType")],
)
def test_pattern_matching_a_structural_field_is_invalid_config(
    pattern: str, structural: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_redactor(False, (pattern,))
    assert str(info.value) == (
        f"INVALID_CONFIG: redactionPatterns[0]: pattern would alter structural field {structural}"
    )


def test_structural_values_met_while_recording_are_guarded() -> None:
    redactor = build_redactor(False, (r"custom-kind",))
    with pytest.raises(ConfigError, match="would alter structural field type"):
        redactor.value({"output": [{"type": "custom-kind"}]})


def test_protected_fields_are_never_substituted() -> None:
    redactor = build_redactor(False, (r"zzz",))
    value, count = redactor.value(
        {"type": "image", "attachment": {"mediaType": "image/png", "name": "zzz"}}
    )
    assert count == 1 and value["type"] == "image"
    assert value["attachment"] == {"mediaType": "image/png", "name": REDACTED}


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(", "not a valid regular expression"),
        ("x*", "pattern matches the empty string"),
        ("REDACT", "pattern matches the replacement [REDACTED]"),
    ],
)
def test_unusable_patterns_are_invalid_config(pattern: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_redactor(False, ("ok-\\d+", pattern))
    assert str(info.value) == f"INVALID_CONFIG: redactionPatterns[1]: {reason}"
