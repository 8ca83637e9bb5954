"""``SubagentHooks``: a recorded child that ended in an error is published with one named warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from msgspec import UNSET

from dsh_sidecar.bridge.hooks.subagent import SubagentHooks
from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.later import Later
from dsh_sidecar.bridge.transport.protocol import (
    ReplayFacts,
    RunOutcome,
    SubagentDecision,
    SubagentOutcomeParams,
    SubagentPublishedParams,
    SubagentStartParams,
    UpstreamFacts,
)
from dsh_sidecar.python_core.cassette_io import seal_mapping
from dsh_sidecar.python_core.subagent_cassette.config import parse_config
from dsh_sidecar.python_core.subagent_cassette.format import Capabilities

UPSTREAM = UpstreamFacts(
    name="spawn-upstream",
    capabilities=Capabilities(outputSchema=True, depthLimit=True, toolFilter=True, persona=True),
    inheritsParentContext=False, continuable=True,
)


def _start(label: str) -> SubagentStartParams:
    return msgspec.convert({
        "request": {"label": label, "prompt": [{"type": "text", "text": f"task {label}"}]},
        "parent": {"sessionId": "session-1"},
    }, SubagentStartParams)


def _outcome(outcome: dict[str, Any]) -> RunOutcome:
    # A run whose start() rejected was never published and has no child id.
    started = outcome["kind"] != "start-error"
    return msgspec.convert({
        "published": started, "local": started, **({"childId": "child"} if started else {}),
        "timing": {"startedAt": "2026-12-01T08:00:00.000Z", "startLatencyMs": 1.0, "durationMs": 2.0},
        "outcome": outcome,
    }, RunOutcome)


def _result(stop: str) -> dict[str, Any]:
    return {"kind": "result", "result": {"output": [{"type": "text", "text": "secret body"}], "stopReason": stop}}


def _error(kind: str, code: str | None) -> dict[str, Any]:
    error: dict[str, Any] = {"name": "Error", "message": "secret message"}
    if code is not None:
        error["code"] = code
    return {"kind": kind, "error": error}


def _open(tmp_path: Path, mode: str) -> SubagentHooks:
    config = parse_config({"mode": mode, "file": "agents.jsonl", "provider": {"transparent": True}}, cwd=str(tmp_path))
    return SubagentHooks.open(config, host_version="0.1.0-rc.8", trace=Trace(None))


async def _answer(answer: SubagentDecision | Later | object) -> Any:
    """The hook's answer, awaited when it waits for its lines to be durable."""
    if not isinstance(answer, Later):
        return answer
    await answer.writer.flush()
    return answer.finish(answer.ticket.failure)


async def _record(tmp_path: Path, outcomes: list[dict[str, Any]]) -> tuple[list[str], list[str], Path]:
    """Record one child per outcome; return the close errors, notes and the cassette path."""
    hooks = _open(tmp_path, "record")
    hooks.hello(UPSTREAM)
    for index, outcome in enumerate(outcomes):
        decision = await _answer(hooks.start(_start(f"child{index}")))
        assert decision.action == "forward" and decision.handle is not None
        if outcome["kind"] != "start-error":
            hooks.published(SubagentPublishedParams(handle=decision.handle, childId=f"child-{index}"))
        await _answer(hooks.outcome(SubagentOutcomeParams(handle=decision.handle, outcome=_outcome(outcome))))
    errors, notes = await hooks.close()
    return [str(e) for e in errors], notes, tmp_path / "agents.jsonl"


@pytest.mark.anyio
async def test_successful_children_publish_without_a_warning(tmp_path: Path) -> None:
    errors, notes, path = await _record(tmp_path, [_result("completed"), _result("aborted")])
    assert errors == [] and path.is_file()
    assert not any("SUBAGENT_CHILD_FAILED" in note for note in notes)


@pytest.mark.parametrize(("outcome", "named"), [
    (_result("error"), "stopReason error"),
    (_error("result-error", "TOOL_FAILED"), "result-error TOOL_FAILED"),
    (_error("start-error", None), "start-error"),
    (_error("start-error", "has spaces: not a code"), "start-error"),
])
@pytest.mark.anyio
async def test_a_failed_child_is_published_with_one_named_warning(tmp_path: Path, outcome: dict[str, Any],
                                                                  named: str) -> None:
    errors, notes, path = await _record(tmp_path, [_result("completed"), outcome, outcome])
    assert errors == [] and path.is_file()
    warnings = [note for note in notes if "SUBAGENT_CHILD_FAILED" in note]
    assert len(warnings) == 1
    warning = warnings[0]
    assert warning.startswith("SUBAGENT_CHILD_FAILED: 2 of 3 recorded child run(s) ended in an error (first: callKey ")
    assert "child1-" in warning and f", {named}); the cassette is published anyway" in warning
    assert warning.endswith("fix it and re-record (record mode all)")
    assert "secret" not in warning and "not a code" not in warning


@pytest.mark.anyio
async def test_replay_never_warns(tmp_path: Path) -> None:
    await _record(tmp_path, [_result("error")])
    hooks = _open(tmp_path, "replay")
    assert (await _answer(hooks.start(_start("child0")))).action == "replay"
    errors, notes = await hooks.close()
    assert errors == [] and not any("SUBAGENT_CHILD_FAILED" in note for note in notes)



@pytest.mark.anyio
async def test_replay_exposes_the_recorded_provider_facts_and_record_the_live_ones(tmp_path: Path) -> None:
    _, _, path = await _record(tmp_path, [_result("completed")])
    header = json.loads(path.read_bytes().splitlines()[0])
    header["provider"]["capabilities"]["persona"] = False
    header["provider"]["inheritsParentContext"] = True
    # Header only: the cassette is opened, not replayed.
    path.write_bytes(seal_mapping({k: v for k, v in header.items() if k != "hash"})[1])
    facts = _open(tmp_path, "replay").setup.replayFacts
    assert isinstance(facts, ReplayFacts)
    shown = (facts.capabilities.persona, facts.capabilities.depthLimit, facts.inheritsParentContext)
    assert shown == (False, True, True)
    path.unlink()
    assert _open(tmp_path, "record").setup.replayFacts is UNSET


@pytest.mark.parametrize(("tool_filter", "reason"), [
    ({"allow": "read"}, "Expected `array`, got `str` - at `$.request.toolFilter.allow`"),
    ({"deny": [1]}, "Expected `str`, got `int` - at `$.request.toolFilter.deny[0]`"),
    ({"only": ["read"]}, "Object contains unknown field `only` - at `$.request.toolFilter`"),
    ([], "Expected `object`, got `array` - at `$.request.toolFilter`"),
])
def test_a_tool_filter_outside_allow_deny_is_refused_before_any_decision(
    tool_filter: Any, reason: str,
) -> None:
    # The params are decoded before the cassette decides, so the upstream is never started.
    wire = msgspec.json.encode({"request": {"prompt": [], "toolFilter": tool_filter}, "parent": {"sessionId": "s"}})
    with pytest.raises(msgspec.ValidationError) as info:
        msgspec.json.decode(wire, type=SubagentStartParams)
    assert str(info.value) == reason
    ok = msgspec.json.encode({"request": {"prompt": [], "toolFilter": {"allow": [], "deny": ["x"]}},
                              "parent": {"sessionId": "s"}})
    assert msgspec.json.decode(ok, type=SubagentStartParams).request.toolFilter is not None
