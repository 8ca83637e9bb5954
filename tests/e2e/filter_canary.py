"""Filter functions for tests/e2e/test_test_logic.py: imported by the sidecar process from this file."""

from __future__ import annotations

from typing import Any


def mask_keys(value: Any) -> Any:
    """Replace every string that looks like an API key (``sk-...``), at any depth, by the placeholder."""
    if isinstance(value, str):
        return "[redacted]" if value.startswith("sk-") else value
    if isinstance(value, dict):
        return {key: mask_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [mask_keys(item) for item in value]
    return value


def broken(value: Any) -> Any:
    """Fail the way a filter with a bug does, with the value in its exception."""
    raise ValueError(f"cannot filter {value!r}")
