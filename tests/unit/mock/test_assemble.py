"""From a ``/mock`` text to a plan: what the assembled plan emits (docs/mock.md, "Plan")."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from dsh_sidecar.python_core.mock.assemble import assemble_plan
from dsh_sidecar.python_core.mock.plan import EmitToolCalls, MockPlan, ObservedResult


def emitted_ids(plan: MockPlan) -> list[str]:
    """Every call id the plan emits when each of its calls succeeds."""
    ids: list[str] = []
    action = plan.next_response([])
    while isinstance(action, EmitToolCalls):
        ids += [call.call_id for call in action.calls]
        action = plan.next_response([ObservedResult(c.call_id, c.name, False) for c in action.calls])
    return ids


def replay(cwd: Path, session_id: str, turn: int = 1) -> MockPlan:
    return assemble_plan(
        "/mock replay session.jsonl", session_id=session_id, turn=turn, cwd=str(cwd), default_gap_ms=0
    )


def test_a_replayed_mock_log_gets_call_ids_other_than_its_source_ids(
    three_step_log: Any, tmp_path: Path
) -> None:
    # The log a mock turn 1 wrote (ids mock-1-1-0, mock-1-2-0, mock-1-2-1), replayed as turn 1.
    (tmp_path / "session.jsonl").write_bytes(three_step_log.text())
    source_ids = {"mock-1-1-0", "mock-1-2-0", "mock-1-2-1"}

    ids = emitted_ids(replay(tmp_path, "s2"))

    assert len(ids) == len(set(ids)) == 3
    assert not source_ids & set(ids)


def test_replayed_call_ids_are_deterministic_for_one_source(three_step_log: Any, tmp_path: Path) -> None:
    (tmp_path / "session.jsonl").write_bytes(three_step_log.text())
    first = emitted_ids(replay(tmp_path, "s1"))
    tag = "r" + hashlib.sha256(three_step_log.text()).hexdigest()[:8]
    assert first == [f"mock-{tag}-1-1-0", f"mock-{tag}-1-2-0", f"mock-{tag}-1-2-1"]
    assert emitted_ids(replay(tmp_path, "s2")) == first
    assert emitted_ids(replay(tmp_path, "s1", turn=2)) != first


def test_a_log_written_by_a_replay_is_replayed_with_ids_of_its_own(
    make_session: Any, three_step_log: Any, tmp_path: Path
) -> None:
    (tmp_path / "session.jsonl").write_bytes(three_step_log.text())
    first = emitted_ids(replay(tmp_path, "s1"))
    log = make_session()
    log.start_turn()
    log.tool_step(1, [(first[0], "mock_echo", '{"text":"hello from mock"}')])
    log.tool_step(2, [(first[1], "mock_echo", '{"text":"p1"}'), (first[2], "mock_echo", '{"text":"p2"}')])
    (tmp_path / "session.jsonl").write_bytes(log.text())

    assert not set(first) & set(emitted_ids(replay(tmp_path, "s2")))
