"""Mock plans keyed by (DSH session id, mock turn id); no module state.

Rule: one registry per plugin instance; every cleanup is idempotent and cancels the plans it
releases, so a released plan can never emit another response.
"""

from __future__ import annotations

import msgspec

from python_core.mock.errors import DuplicateMockTurn, SessionsDisposed
from python_core.mock.plan import MockPlan

__all__ = ["MockSessions", "SessionsStats"]


class SessionsStats(msgspec.Struct, frozen=True):
    """Counts of live plans, for diagnostics and leak tests."""

    plans: int
    sessions: int
    disposed: bool


class MockSessions:
    """The live plans of one plugin instance."""

    def __init__(self) -> None:
        self._plans: dict[tuple[str, str], MockPlan] = {}
        self._disposed = False

    def begin(self, plan: MockPlan) -> MockPlan:
        """Register ``plan`` under its session and turn id and return it.

        Raises:
            SessionsDisposed: the registry was disposed.
            DuplicateMockTurn: a live plan already has this session and turn id.
        """
        if self._disposed:
            raise SessionsDisposed()
        key = (plan.session_id, plan.turn_id)
        if key in self._plans:
            raise DuplicateMockTurn(plan.turn_id)
        self._plans[key] = plan
        return plan

    def lookup(self, session_id: str, turn_id: str) -> MockPlan | None:
        """Return the live plan for this key, or ``None``."""
        return self._plans.get((session_id, turn_id))

    def finish(self, session_id: str, turn_id: str) -> MockPlan | None:
        """Release one plan (cancelling it if still running); idempotent."""
        plan = self._plans.pop((session_id, turn_id), None)
        if plan is not None:
            plan.cancel()
        return plan

    def drop_session(self, session_id: str) -> tuple[MockPlan, ...]:
        """Release every plan of a session (session teardown); idempotent."""
        keys = [key for key in self._plans if key[0] == session_id]
        return tuple(plan for key in keys if (plan := self.finish(*key)) is not None)

    def dispose_all(self) -> tuple[MockPlan, ...]:
        """Release every plan and refuse new ones (plugin disposal); idempotent."""
        self._disposed = True
        return tuple(plan for key in list(self._plans) if (plan := self.finish(*key)) is not None)

    def statistics(self) -> SessionsStats:
        """Return live-plan counts."""
        return SessionsStats(
            plans=len(self._plans),
            sessions=len({key[0] for key in self._plans}),
            disposed=self._disposed,
        )
