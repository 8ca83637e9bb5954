"""The turn ledger: a recording is complete only once every turn it saw really ended."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.turns import RecordingInterrupted, TurnLedger


def test_a_turn_that_completed_is_a_real_end() -> None:
    ledger = TurnLedger()
    ledger.start("s1", 1)
    ledger.end("s1", 1, "completed")
    assert ledger.interruption() is None


@pytest.mark.parametrize("reason", ["error", "blocked", "max-tokens"])
def test_a_turn_that_failed_still_ended(reason: str) -> None:
    ledger = TurnLedger()
    ledger.start("s1", 1)
    ledger.end("s1", 1, reason)
    assert ledger.interruption() is None


def test_an_open_turn_is_an_interruption() -> None:
    ledger = TurnLedger()
    ledger.start("s1", 1)
    ledger.end("s1", 1, "completed")
    ledger.start("s1", 2)
    assert ledger.interruption() == (
        "turn 2 did not end (DSH was stopped mid-turn, e.g. by SIGTERM or SIGINT)"
    )


def test_an_open_child_turn_is_an_interruption_even_if_the_root_ended() -> None:
    ledger = TurnLedger()
    ledger.start("root", 1)
    ledger.start("child", 1)
    ledger.end("root", 1, "completed")
    assert ledger.interruption() is not None


@pytest.mark.parametrize("reason", ["aborted", "interrupted", None])
def test_an_aborted_turn_is_an_interruption(reason: str | None) -> None:
    ledger = TurnLedger()
    ledger.start("s1", 1)
    ledger.end("s1", 1, reason)
    assert ledger.interruption() == f"turn 1 ended {reason or 'no reason'}"


def test_an_aborted_follow_up_turn_with_no_selected_call_open_is_not_an_interruption() -> None:
    # create_goal headless: the goal driver's follow-up turn ends aborted after the task's turn.
    ledger = TurnLedger()
    ledger.start("s1", 1)
    ledger.end("s1", 1, "completed")
    ledger.start("s1", 2)
    ledger.end("s1", 2, "aborted", busy=False)
    assert ledger.interruption() is None


def test_an_aborted_follow_up_turn_during_a_selected_call_is_an_interruption() -> None:
    ledger = TurnLedger()
    ledger.start("s1", 1)
    ledger.end("s1", 1, "completed")
    ledger.start("s1", 2)
    ledger.end("s1", 2, "aborted", busy=True)
    assert ledger.interruption() == "turn 2 ended aborted"


def test_a_follow_up_in_another_session_or_without_a_reason_is_an_interruption() -> None:
    ledger = TurnLedger()
    ledger.end("s1", 1, "completed")
    ledger.end("s2", 2, "aborted")
    assert ledger.interruption() == "turn 2 ended aborted"
    ledger = TurnLedger()
    ledger.end("s1", 1, "completed")
    ledger.end("s1", 2, None)
    assert ledger.interruption() == "turn 2 ended no reason"


def test_no_turn_at_all_is_an_interruption() -> None:
    assert TurnLedger().interruption() == "no agent turn ran to its end"


def test_the_error_names_the_cassette_the_reason_and_what_was_kept() -> None:
    error = RecordingInterrupted("tool cassette c.ndjson", "turn 1 ended aborted", "kept c.ndjson.partial")
    assert str(error) == "RECORDING_INTERRUPTED: tool cassette c.ndjson: turn 1 ended aborted; kept c.ndjson.partial"
