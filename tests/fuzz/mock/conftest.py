"""The mock fixtures of ``tests/unit/mock`` (one definition), for the mock fuzz tests here."""

from tests.unit.mock.conftest import make_session, three_step_log

__all__ = ["make_session", "three_step_log"]
