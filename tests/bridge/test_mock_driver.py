"""The mock route's driver: routing per turn, restore, plans, and session teardown."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import anyio
import msgspec
import pytest

from dsh_sidecar.bridge.hooks.mock import MOCK_ROUTE, ORDINARY_TURN_TEXT, MockDriver
from dsh_sidecar.bridge.hooks.tools import ToolHooks
from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.protocol import (
    LlmStreamParams,
    PreStepParams,
    ResultParams,
    Route,
    RouteParams,
    SeenResult,
)
from dsh_sidecar.python_core.mock.config import MockConfig
from dsh_sidecar.python_core.tool_cassette.engine import HostToolResult

REAL = Route(provider="deepseek-official", model="deepseek-v4-flash")


def driver() -> MockDriver:
    return MockDriver(MockConfig(default_gap_ms=0), Trace(None))


def pre_step(d: MockDriver, text: str, turn: int = 1, session: str = "s1") -> bool:
    return d.pre_step(PreStepParams(sessionId=session, turn=turn, step=1, cwd="/work", texts=[text])).mock


def route(d: MockDriver, turn: int, proposed: Route, session: str = "s1") -> Route | None:
    return d.route(RouteParams(sessionId=session, turn=turn, step=1, proposed=proposed)).route


def stream(d: MockDriver, turn: int, results: list[SeenResult] | None = None, session: str = "s1") -> LlmStreamParams:
    return LlmStreamParams(sessionId=session, purpose=None, turn=turn, step=1, results=results or [], tools=[])


def test_only_the_mock_turn_is_routed_and_the_real_route_comes_back() -> None:
    d = driver()
    assert pre_step(d, '/mock run echo({"text": "a"})')

    assert route(d, 1, REAL) == MOCK_ROUTE
    assert route(d, 1, MOCK_ROUTE) == MOCK_ROUTE
    assert route(d, 2, MOCK_ROUTE) == REAL
    assert route(d, 2, REAL) is None


@pytest.mark.anyio
async def test_a_command_steered_into_a_later_step_of_an_ordinary_turn_is_refused_not_started() -> None:
    d = driver()
    reply = d.pre_step(PreStepParams(sessionId="s1", turn=1, step=2, cwd="/work", texts=['/mock run echo({})']))

    assert reply.mock and reply.status is not None
    assert (reply.status.error_code, reply.status.card) == ("MID_TURN_MOCK_COMMAND", "invalid-script")
    assert route(d, 1, REAL) == MOCK_ROUTE
    refused = await d.stream(stream(d, 1, [SeenResult(callId="call_real", tool="echo", isError=False)]))
    assert (refused.kind, refused.code) == ("error", "MID_TURN_MOCK_COMMAND")
    assert d.close() == ["send /mock as its own message once the turn has ended, or as the /mock slash command, "
                         "which queues it as the next turn"]


def test_ordinary_text_does_not_start_a_mock_turn() -> None:
    d = driver()

    assert not pre_step(d, "please run the tests")
    assert route(d, 1, REAL) is None


@pytest.mark.anyio
async def test_a_plan_emits_its_call_then_the_final_text() -> None:
    d = driver()
    pre_step(d, '/mock run echo({"text": "a"})')

    first = await d.stream(stream(d, 1))
    assert first.kind == "tool-calls"
    (call,) = first.calls
    d.observe("s1", call.id, "echo", False, None)
    final = await d.stream(stream(d, 1, [SeenResult(callId=call.id, tool="echo", isError=False)]))

    assert final.kind == "text"
    assert final.status is not None and final.status.state == "succeeded"


@pytest.mark.anyio
async def test_an_unknown_tool_result_stops_the_plan_with_its_code() -> None:
    d = driver()
    pre_step(d, '/mock run nope({"x": 1})')
    (call,) = (await d.stream(stream(d, 1))).calls
    d.observe("s1", call.id, "nope", True, "UNKNOWN_TOOL")

    stop = await d.stream(stream(d, 1, [SeenResult(callId=call.id, tool="nope", isError=True)]))

    assert (stop.kind, stop.code) == ("error", "UNKNOWN_TOOL")


@pytest.mark.anyio
async def test_tools_result_outcomes_are_judged_only_in_their_own_session() -> None:
    # Both sessions' turn 1 mints the same call id; each failure keeps its own runtime code.
    d = driver()
    hooks = ToolHooks.open(None, Trace(None), d)
    pre_step(d, '/mock run nope({})', session="s1")
    pre_step(d, '/mock run nope({})', session="s2")
    (one,) = (await d.stream(stream(d, 1, session="s1"))).calls
    (two,) = (await d.stream(stream(d, 1, session="s2"))).calls
    assert one.id == two.id
    for session, code in (("s1", "UNKNOWN_TOOL"), ("s2", "TOOL_EXECUTION_FAILED")):
        error = {"message": "failed", "info": {"name": "HarnessError", "code": code}}
        failed = msgspec.json.decode(msgspec.json.encode({"isError": True, "content": [], "error": error}),
                                     type=HostToolResult)
        hooks.result(
            ResultParams(handle="h", path="root/0", tool="nope", callId=one.id, result=failed, sessionId=session)
        )

    seen = [SeenResult(callId=one.id, tool="nope", isError=True)]
    stops = [await d.stream(stream(d, 1, seen, session=session)) for session in ("s1", "s2")]

    assert [(s.kind, s.code) for s in stops] == [("error", "UNKNOWN_TOOL"), ("error", "TOOL_FAILED")]


@pytest.mark.anyio
async def test_a_refused_command_fails_the_turn_once() -> None:
    d = driver()
    pre_step(d, "/mock run echo({text: 1})")

    refused = await d.stream(stream(d, 1))

    assert (refused.kind, refused.code) == ("error", "INVALID_COMMAND")
    assert refused.text.endswith("(column 17)") and not refused.text.startswith("INVALID_COMMAND")
    assert (await d.stream(stream(d, 1))).text == ORDINARY_TURN_TEXT
    assert d.refused and d.close()[0].startswith("write `/mock run tool({...})`")


@pytest.mark.anyio
async def test_session_end_drops_plans_and_routes_and_is_idempotent() -> None:
    d = driver()
    pre_step(d, '/mock run echo({"text": "a"})')
    route(d, 1, REAL)

    d.end_session("s1")
    d.end_session("s1")

    assert route(d, 2, MOCK_ROUTE) is None
    assert (await d.stream(stream(d, 1))).text == ORDINARY_TURN_TEXT


def test_a_replayed_script_calling_a_configured_nested_tool_is_refused(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text(
        '{"type": "dsh-mock-script", "version": 1, "steps": [{"tool": "my_team", "args": {}}]}'
    )
    d = MockDriver(MockConfig(nested_tools=("my_team",)), Trace(None))

    d.pre_step(PreStepParams(sessionId="s1", turn=1, step=1, cwd=str(tmp_path), texts=["/mock replay s.json"]))

    refused = anyio.run(d.stream, stream(d, 1))
    assert (refused.kind, refused.code) == ("error", "UNSUPPORTED_NESTED_TOOL")


def test_ordinary_tool_results_with_the_mock_enabled_and_unused_leave_memory_flat() -> None:
    d = driver()
    hooks = ToolHooks.open(None, Trace(None), d)
    result = HostToolResult(isError=False, content=msgspec.Raw(b'[{"type":"text","text":"ok"}]'))

    def burst(start: int) -> None:
        for i in range(start, start + 50_000):
            hooks.result(ResultParams(handle=f"h{i}", path=f"root/{i}", tool="echo", callId=f"call-{i}", result=result))

    burst(0)  # warm up: allocator pools, interned names
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        burst(50_000)
        burst(100_000)
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # Keeping every outcome, as the driver once did, costs ~20 MB for these 100,000 results.
    assert after - before < 64 * 1024
    assert d.turns.statistics().outcomes == 0


@pytest.mark.anyio
async def test_each_kind_of_refusal_prints_its_fix_once() -> None:
    d = driver()
    for turn, text in enumerate(["/mock run a(", "/mock run b(", "/mock replay ../x.json"], start=1):
        pre_step(d, text, turn=turn)
        assert (await d.stream(stream(d, turn))).kind == "error"

    fixes = d.close()

    assert len(fixes) == 2
    assert fixes[0].startswith("write `/mock run tool({...})`")
    assert fixes[1].startswith("replay a file inside the session's folder")
