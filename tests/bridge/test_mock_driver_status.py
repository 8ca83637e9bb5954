"""What the driver publishes for the web UI: a refused turn's status, cancellation in a wait."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from dsh_sidecar.bridge.hooks.mock import MockDriver
from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.protocol import CancelParams, LlmStreamParams, PreStepParams, SeenResult
from dsh_sidecar.python_core.mock.config import MockConfig


def stream_params(results: list[SeenResult] | None = None) -> LlmStreamParams:
    return LlmStreamParams(sessionId="s1", purpose=None, turn=1, step=1, results=results or [], tools=[])


def test_a_turn_refused_before_any_tool_publishes_the_invalid_script_status(tmp_path: Path) -> None:
    steps = [{"wait": 5}, {"tool": "echo", "args": {}}]
    (tmp_path / "bad.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": steps}))
    d = MockDriver(MockConfig(), Trace(None))

    params = PreStepParams(sessionId="s1", turn=3, step=1, cwd=str(tmp_path), texts=["/mock replay bad.json"])
    reply = d.pre_step(params)

    assert reply.mock and reply.status is not None
    status = reply.status
    assert (status.card, status.phase, status.error_code, status.mode, status.source_name) == (
        "invalid-script", "failed", "INVALID_SCRIPT", "replay", "bad.json"
    )
    assert (status.turn_id, status.location) == ("3", "bad.json at /steps/0")


@pytest.mark.anyio
async def test_mock_cancel_overtaking_a_sleeping_wait_keeps_the_progress_at_the_step_before(tmp_path: Path) -> None:
    steps = [{"tool": "echo", "args": {}}, {"tool": "echo", "args": {}}]
    (tmp_path / "two.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": steps}))
    d = MockDriver(MockConfig(default_gap_ms=600_000), Trace(None))
    d.pre_step(PreStepParams(sessionId="s1", turn=1, step=1, cwd=str(tmp_path), texts=["/mock replay two.json"]))
    (call,) = (await d.stream(stream_params())).calls
    d.observe("s1", call.id, "echo", False, None)

    async with anyio.create_task_group() as tg:
        tg.start_soon(d.stream, stream_params([SeenResult(callId=call.id, tool="echo", isError=False)]))
        await anyio.wait_all_tasks_blocked()  # the second response sleeps its 600 s gap
        status = d.cancel(CancelParams(sessionId="s1", turn=1)).status
        tg.cancel_scope.cancel()

    assert status is not None
    assert (status.phase, status.step, status.step_count) == ("cancelled", 1, 2)
