"""The model cassette through real headless DSH rc.8 and its stock DeepSeek adapter.

The provider is ``deepseek_server``: a loopback server speaking the chat-completions SSE
format that rc.8's ``dsh-llm-deepseek`` parses, answering from a script and logging every
request. Ordinary (non-``/mock``) turns go to the stock ``deepseek-official`` route through
``$DEEPSEEK_BASE_URL``; the model decides which tools to call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepseek_server import deepseek_server
from weather_service import weather_service

from bridge.run import Row, run

WEATHER_TASK = "What is the weather in Paris?"
WEATHER_SCRIPT: dict[str, Any] = {
    "title": "Paris weather",
    "conversations": [{"match": "weather in Paris", "replies": [
        {"tool_calls": [{"name": "weather_lookup", "arguments": {"city": "Paris"}}]},
        {"text": "It is sunny in Paris, 21C."},
    ]}],
}


def _tools(url: str = "http://127.0.0.1:9") -> list[Row]:
    return [Row("example-tools", "dsh-example-tools", {"weatherUrl": url})]


def test_an_ordinary_turn_runs_against_the_loopback_provider(tmp_path: Path) -> None:
    with deepseek_server(tmp_path, WEATHER_SCRIPT) as provider, weather_service(tmp_path) as weather:
        result = run(WEATHER_TASK, cwd=tmp_path, rows=_tools(weather.url), env=provider.env("sk-canary-0001"))
        requests = provider.requests()
    assert result.ok, result.explain()
    assert result.final_text == "It is sunny in Paris, 21C."
    assert result.result("weather_lookup").output == "Paris: sunny, 21C"
    assert weather.requests == 1
    assert sorted(r["kind"] for r in requests) == ["conversation", "conversation", "title"]
    assert {r["path"] for r in requests} == {"/chat/completions"}
    assert {r["auth"] for r in requests} == {"Bearer sk-canary-0001"}
    [first, second] = [r for r in requests if r["kind"] == "conversation"]
    assert "weather_lookup" in first["tools"] and "subagent" in first["tools"]
    assert second["messages"] == first["messages"] + 2  # the assistant's call and the tool result
