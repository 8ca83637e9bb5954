"""Plans keyed by session and turn; idempotent cleanup (docs/mock.md)."""

from __future__ import annotations

import pytest

from python_core.mock.errors import DuplicateMockTurn, SessionsDisposed
from python_core.mock.plan import EmitToolCalls, MockPlan, ObservedResult
from python_core.mock.script import validate_script
from python_core.mock.sessions import MockSessions, SessionsStats

SCRIPT = validate_script(
    {
        "type": "dsh-mock-script",
        "version": 1,
        "steps": [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}],
    },
    source="s.json",
)


def plan(session: str, turn: str) -> MockPlan:
    return MockPlan(
        SCRIPT, session_id=session, turn_id=turn, mode="replay", source_format="canonical-json"
    )


def test_two_sessions_replay_concurrently_without_consuming_each_other() -> None:
    sessions = MockSessions()
    one = sessions.begin(plan("s1", "t1"))
    two = sessions.begin(plan("s2", "t2"))
    first_one = one.next_response([])
    first_two = two.next_response([])
    assert isinstance(first_one, EmitToolCalls) and isinstance(first_two, EmitToolCalls)
    results_two = [ObservedResult(c.call_id, c.name, False, None, "s2") for c in first_two.calls]
    assert isinstance(
        one.next_response(
            [ObservedResult(c.call_id, c.name, False, None, "s1") for c in first_one.calls]
        ),
        EmitToolCalls,
    )
    assert two.status().steps_completed == 0
    assert isinstance(two.next_response(results_two), EmitToolCalls)
    assert sessions.lookup("s1", "t1") is one
    assert sessions.lookup("s1", "t2") is None


def test_a_live_key_cannot_be_reused() -> None:
    sessions = MockSessions()
    sessions.begin(plan("s1", "t1"))
    with pytest.raises(DuplicateMockTurn):
        sessions.begin(plan("s1", "t1"))


def test_finish_releases_and_cancels_and_is_idempotent() -> None:
    sessions = MockSessions()
    live = sessions.begin(plan("s1", "t1"))
    live.next_response([])
    assert sessions.finish("s1", "t1") is live
    assert sessions.finish("s1", "t1") is None
    assert live.status().state == "cancelled"
    assert sessions.statistics() == SessionsStats(plans=0, sessions=0, disposed=False)


def test_drop_session_releases_only_that_session() -> None:
    sessions = MockSessions()
    sessions.begin(plan("s1", "t1"))
    sessions.begin(plan("s1", "t2"))
    kept = sessions.begin(plan("s2", "t1"))
    assert len(sessions.drop_session("s1")) == 2
    assert sessions.drop_session("s1") == ()
    assert sessions.statistics() == SessionsStats(plans=1, sessions=1, disposed=False)
    assert kept.state == "ready"


def test_dispose_all_releases_everything_and_refuses_new_plans() -> None:
    sessions = MockSessions()
    live = sessions.begin(plan("s1", "t1"))
    assert sessions.dispose_all() == (live,)
    assert sessions.dispose_all() == ()
    assert live.is_terminal
    with pytest.raises(SessionsDisposed):
        sessions.begin(plan("s3", "t1"))
    assert sessions.statistics() == SessionsStats(plans=0, sessions=0, disposed=True)
