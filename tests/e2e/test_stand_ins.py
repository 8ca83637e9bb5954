"""Replay with the tool's provider gone (issue 21, item 1), through real headless DSH rc.8.

A version 3 recording keeps each selected tool's registered contract and rendering; at replay
the shim stands up every recorded tool that no plugin registered. Here the provider of
``weather_lookup`` and ``echo`` (the example tools row) is simply left out of the replay's
composition; ``test_mcp_tools.py`` does the same with real MCP servers stopped or removed.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from deepseek_server import WEATHER_SCRIPT, WEATHER_TASK, dead_url, deepseek_server
from weather_service import weather_service

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import ModelCassette, Row, ToolCassette, run
from dsh_sidecar.python_core.tool_cassette.format import encode
from dsh_sidecar.python_core.tool_cassette.reseal import reseal_lines

MODEL = ModelCassette(file="model.ndjson", options={"requestView": "full"})
# Every tool of the provider: the model is offered all of them, so all are stood up again.
EXAMPLE_TOOLS = ["broken", "cancel_later", "conclude", "delegate", "echo", "forbidden", "queue_followup", "relay",
                 "run_command", "sleepy", "weather_lookup"]
TOOLS = ToolCassette(file="tools.ndjson", include=EXAMPLE_TOOLS)
STOOD_UP = f"stood up from the cassette (no plugin registered them): {', '.join(EXAMPLE_TOOLS)}"


def test_a_real_model_turn_replays_with_the_tool_provider_gone_and_the_same_requests(tmp_path: Path) -> None:
    # The model cassette matches each request by its fingerprint, tools offered included: the
    # replay passing proves the model saw the recorded description and parameters again.
    with deepseek_server(tmp_path, WEATHER_SCRIPT) as provider, weather_service(tmp_path) as weather:
        record = run(WEATHER_TASK, cwd=tmp_path, rows=[Row("example-tools", "dsh-example-tools",
                                                             {"weatherUrl": weather.url})],
                     model_cassette=MODEL, tool_cassette=TOOLS, record_mode="once", env=provider.env("sk-test"))
    assert record.ok, record.explain()
    assert weather.requests == 1
    # Every selected tool's contract is recorded, called or not.
    recorded = [msgspec.json.decode(line) for line in (tmp_path / "tools.ndjson").read_bytes().splitlines()]
    assert sorted(f["tool"] for f in recorded if f["kind"] == "tool") == EXAMPLE_TOOLS

    replay = run(WEATHER_TASK, cwd=tmp_path, rows=[], model_cassette=MODEL, tool_cassette=TOOLS,
                 record_mode="none", env={"DEEPSEEK_BASE_URL": dead_url()})
    assert replay.ok, replay.explain()
    assert replay.final_text == "It is sunny in Paris, 21C."
    assert replay.result("weather_lookup").output == "Paris: sunny, 21C"  # the recorded rendering
    assert replay.model_cassette is not None and (replay.model_cassette.consumed,
                                                  replay.model_cassette.unconsumed) == (3, 0)
    assert replay.tool_cassette is not None and replay.tool_cassette.consumed == 1
    assert replay.tool_cassette.stood_up == EXAMPLE_TOOLS
    assert STOOD_UP in replay.stderr
    assert weather.requests == 1  # the service saw no call at replay


def _as_version_2(path: Path) -> None:
    """Rewrite ``path`` as a version 2 recorder wrote it: no tool or observed frames, no composition
    in the header, no rendered successes."""
    frames = [msgspec.json.decode(line) for line in path.read_bytes().splitlines()]
    kept = []
    for frame in frames:
        if frame["kind"] == "tool" or frame["kind"].startswith("observed/"):
            continue
        if frame["kind"] == "header":
            frame["version"] = 2
            frame.pop("plugins", None)
        if frame["kind"] == "call/result" and not frame["isError"]:
            frame.pop("content")
        kept.append(encode(frame) + b"\n")
    lines, _ = reseal_lines(kept)
    path.write_bytes(b"".join(lines))


def test_a_mock_turn_replays_with_the_row_absent_and_an_old_file_names_why_it_cannot(dsh: DshRunner) -> None:
    task = '/mock run echo({"text": "hi"})'
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    record = run(task, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches, tool_cassette=cassette, record_mode="once")
    assert record.ok, record.explain()
    bodies = dsh.cwd / "tool-bodies.log"
    assert bodies.read_text().split() == ["echo"]

    replay = run(task, cwd=dsh.cwd, host=dsh.host, patches=(), tool_cassette=cassette, record_mode="none")
    assert replay.ok, replay.explain()
    assert replay.result("echo").output == "echo:hi"
    assert "stood up from the cassette (no plugin registered them): echo" in replay.stderr

    _as_version_2(dsh.cwd / "echo.ndjson")
    old = run(task, cwd=dsh.cwd, host=dsh.host, patches=(), tool_cassette=cassette, record_mode="none")
    assert old.exit_code == 1
    lines = [line for line in old.stderr.splitlines() if "CASSETTE_TOOL_UNREGISTERED" in line]
    assert lines == [
        "dsh-sidecar: CASSETTE_TOOL_UNREGISTERED: echo at root/0, ordinal 0: not registered during replay: "
        "no plugin registered it, and the cassette (version 2) holds no definition to stand it up"
    ], old.stderr
    assert ("fix: enable the plugin row that registers echo for the replay, or re-record the cassette with "
            "this version") in old.stderr
    assert bodies.read_text().split() == ["echo"]  # no body ran in either replay


def test_a_registered_tool_keeps_its_own_contract_and_is_not_stood_up(dsh: DshRunner) -> None:
    task = '/mock run echo({"text": "hi"})'
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    assert run(task, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches, tool_cassette=cassette,
               record_mode="once").ok
    replay = run(task, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches, tool_cassette=cassette, record_mode="none")
    assert replay.ok, replay.explain()
    assert replay.result("echo").output == "echo:hi"
    assert "stood up" not in replay.stderr
    assert replay.tool_cassette is not None and replay.tool_cassette.stood_up == []


def test_a_pattern_that_matches_no_registered_tool_is_named_at_boot(dsh: DshRunner) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo", "mcp_*_read"])
    record = run('/mock run echo({"text": "hi"})', cwd=dsh.cwd, host=dsh.host, patches=dsh.patches,
                 tool_cassette=cassette, record_mode="once")
    assert record.ok, record.explain()  # echo was selected and recorded: a warning, not a failure
    warnings = [line for line in record.stderr.splitlines() if "CASSETTE_PATTERN_UNMATCHED" in line]
    assert len(warnings) == 1, record.stderr
    assert warnings[0].startswith(
        "dsh-sidecar: warning: CASSETTE_PATTERN_UNMATCHED: toolCassette.include pattern mcp_*_read matches none "
        "of the ")
    assert warnings[0].endswith("; fix: match the pattern to a tool name the host registers (an MCP tool is "
                                "mcp__<server>__<tool>: mcp__notes__* or mcp__*__read*), or drop it")
