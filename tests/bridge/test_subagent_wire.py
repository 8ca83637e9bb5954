"""The subagent hooks map the wire payloads to the engine's domain types without losing a fact.

Drives the real ``Sidecar`` over the in-memory peer: a child run settles with ``childId`` (no
``subagent/published``), so only the outcome mapping can key its grandchild; a second run's
``start-error`` must reach the file as a ``start-error`` outcome with its error facts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.bridge.session.sidecar import Sidecar
from dsh_sidecar.bridge.transport.server import Server

# Helpers of the server tests (importlib mode: import the module by its path).
from tests.bridge.test_server import Peer, serving

pytestmark = pytest.mark.anyio

TIMING = {"startedAt": "2027-01-15T08:00:00.000Z", "startLatencyMs": 1.0, "durationMs": 2.0}
CAPABILITIES = {"outputSchema": True, "depthLimit": True, "toolFilter": True, "persona": True}


def start(id_: str, label: str, parent: str, **facts: Any) -> dict[str, Any]:
    request = {"prompt": [{"type": "text", "text": label}], "label": label}
    return {"id": id_, "method": "subagent/start",
            "params": {"request": request, "parent": {"sessionId": parent, "events": [], **facts}}}


async def ask(peer: Peer, message: dict[str, Any]) -> Any:
    await peer.send(**message)
    answer = await peer.read()
    assert "result" in answer, answer
    return answer["result"]


async def test_outcome_child_id_and_error_kinds_reach_the_engine(tmp_path: Path) -> None:
    sidecar = Sidecar()
    config = {"subagentCassette": {"mode": "record", "file": "s.cassette.jsonl"}}
    async with serving(Server(sidecar), initialize=False) as peer:
        setup = await ask(peer, {"id": "init", "method": "initialize", "params": {
            "protocolVersion": 1, "host": {"@deepseek-ai/dsh-subagent": "0.1.0-rc.8"}, "config": config,
            "cwd": str(tmp_path), "pid": 1}})
        upstream = setup["subagent"]["upstream"]
        await ask(peer, {"id": "hello", "method": "subagent/hello", "params": {
            "name": upstream, "capabilities": CAPABILITIES, "inheritsParentContext": False, "continuable": True}})
        await peer.send(method="session/turn", params={"sessionId": "root-session", "turn": 1, "phase": "start"})
        child = (await ask(peer, start("s1", "child", "root-session")))["handle"]
        await ask(peer, {"id": "o1", "method": "subagent/outcome", "params": {"handle": child, "outcome": {
            "published": True, "local": True, "childId": "child-session", "timing": TIMING,
            "outcome": {"kind": "result", "result": {"output": [], "stopReason": "completed"}}}}})
        grandchild = (await ask(peer, start("s2", "grandchild", "child-session",
                                            origin="subagent", delegationDepth=1)))["handle"]
        await ask(peer, {"id": "o2", "method": "subagent/outcome", "params": {"handle": grandchild, "outcome": {
            "published": False, "local": False, "timing": TIMING,
            "outcome": {"kind": "start-error", "error": {"name": "Error", "message": "offline", "code": "E_NET"}}}}})
        await peer.send(method="session/turn", params={"sessionId": "root-session", "turn": 1, "phase": "end",
                                                       "reason": "completed"})
        status = await ask(peer, {"id": "end", "method": "shutdown", "params": {}})
        await peer.close()

    assert status["errors"] == []
    lines = [json.loads(line) for line in (tmp_path / "s.cassette.jsonl").read_bytes().splitlines()]
    first, second = lines[1], lines[2]
    assert (first["callKey"], first["outcome"]["kind"]) == (child["callKey"], "result")
    assert second["parentKey"] == child["callKey"]
    assert second["outcome"] == {"kind": "start-error", "error": {"name": "Error", "message": "offline",
                                                                   "code": "E_NET"}}
    assert (second["published"], second["local"]) == (False, False)
