"""docs/test-logic.md's pytest example: a stubbed tool through the ``dsh_config`` fixture."""

from typing import Any

import pytest

from dsh_sidecar import StubFailure


def sunny(args: dict[str, Any]) -> dict[str, Any]:
    return {"city": args["city"], "forecast": "sunny", "temperatureC": 30}


def timed_out(args: dict[str, Any]) -> dict[str, Any]:
    raise StubFailure("TIMEOUT", "weather service timed out")


@pytest.fixture
def dsh_config() -> dict[str, Any]:
    return {"stubs": {"weather_lookup": sunny}}


def test_stubbed_weather(dsh):
    result = dsh.run('/mock run weather_lookup({"city": "Lima"})')
    assert result.result("weather_lookup").output == "Lima: sunny, 30C"


@pytest.mark.dsh(config={"stubs": {"weather_lookup": timed_out}})
def test_agent_sees_the_timeout(dsh):
    result = dsh.run('/mock run weather_lookup({"city": "Lima"})', check=False)
    assert result.result("weather_lookup").error_code == "TIMEOUT"
