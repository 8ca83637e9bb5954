"""Stubs for tests/e2e/test_test_logic.py: imported by the sidecar process from this file."""

from __future__ import annotations

from typing import Any

from dsh_sidecar import StubFailure


def sunny(args: dict[str, Any]) -> dict[str, Any]:
    """Serve any city as sunny and cold."""
    return {"city": args["city"], "forecast": "stubbed sun", "temperatureC": 5}


def timeout(args: dict[str, Any]) -> dict[str, Any]:
    """Fail as a timed-out service would."""
    raise StubFailure("TIMEOUT", f"weather for {args['city']} timed out")


def wrong_shape(args: dict[str, Any]) -> dict[str, Any]:
    """Return what the tool's output schema refuses."""
    return {"city": args["city"]}

