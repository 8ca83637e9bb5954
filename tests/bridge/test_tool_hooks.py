"""The tools hooks' answers: which calls need their ``tools/execute`` and ``tools/post-execute`` round trips."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from dsh_sidecar.bridge.hooks.tools import ToolHooks
from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.session.sidecar import Sidecar
from dsh_sidecar.bridge.transport.later import Later
from dsh_sidecar.bridge.transport.protocol import (
    PROTOCOL_VERSION,
    ExecuteDecision,
    ExecuteParams,
    InitializeParams,
    ShutdownParams,
)
from dsh_sidecar.python_core.tool_cassette import parse_config


def _call(tool: str = "echo", n: int = 0) -> ExecuteParams:
    return ExecuteParams(handle=f"h{n}", path=f"root/{n}", tool=tool, callId=f"c{n}", args='{"text":"hi"}')


def test_an_unselected_call_without_trace_skips_post_execute() -> None:
    hooks = ToolHooks.open(None, Trace(None), None)

    assert msgspec.json.encode(hooks.execute(_call())) == b'{"action":"next","post":false}'


def test_a_traced_call_asks_post_execute_and_is_traced(tmp_path: Path) -> None:
    trace = Trace(str(tmp_path / "trace.jsonl"))
    hooks = ToolHooks.open(None, trace, None)

    answer = hooks.execute(_call())
    trace.close()

    assert msgspec.json.encode(answer) == b'{"action":"next"}'
    assert b'"method":"tools/execute"' in (tmp_path / "trace.jsonl").read_bytes()


def test_a_selected_call_asks_post_execute_and_an_unselected_one_does_not(tmp_path: Path) -> None:
    config = parse_config({"mode": "record", "file": "c.ndjson", "include": ["echo"]}, cwd=str(tmp_path))
    hooks = ToolHooks.open(config, Trace(None), None)

    selected = hooks.execute(_call("echo", 0))
    other = hooks.execute(_call("sleepy", 1))

    # A recorded call is answered once its line is durable: a Later, never the no-post answer.
    assert isinstance(selected, Later)
    assert not selected.ticket.done
    assert isinstance(other, ExecuteDecision)
    assert (other.action, other.post) == ("next", False)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("config", "ask"),
    [
        ({}, False),
        ({"trace": "trace.jsonl"}, True),
        ({"toolCassette": {"mode": "record", "file": "c.ndjson", "include": ["echo"]}}, True),
    ],
)
async def test_initialize_asks_for_execute_decisions_only_when_something_looks_at_calls(
    tmp_path: Path, config: dict[str, object], ask: bool
) -> None:
    sidecar = Sidecar()
    params = InitializeParams(protocolVersion=PROTOCOL_VERSION, host={}, config=config, cwd=str(tmp_path), pid=1)

    result = await sidecar.initialize(params)
    await sidecar.shutdown(ShutdownParams())

    assert "tools" in result.hooks
    assert result.askExecute is ask
