"""What a person sees when a mock turn fails, through real headless DSH rc.8: the exact stderr
lines (count, code, column, reason, fix) and the exit code.

A refused command (broken grammar, a near miss of ``/mock``) exits 3, prints the named error
once with its column and then the fix.
``raw_dsh`` runs ``dsh`` itself, so stderr is exactly what the user's terminal shows.
"""

from __future__ import annotations

from typing import Any

from dshrun import Dsh, Run

from python_core.mock.reasons import refusal_hint_for

FIX = f"dsh-sidecar: fix: {refusal_hint_for('INVALID_COMMAND')}"


def _statuses(run: Run) -> list[dict[str, Any]]:
    return [e["data"] for e in run.events("mock/status")]


def _turn_end_code(run: Run) -> str:
    (end,) = run.events("turn/end")
    return str(end["data"]["reason"]["error"]["code"])


def _providers(run: Run) -> list[str]:
    return [e["data"]["header"]["config"]["provider"] for e in run.events("request/header")]


def _assert_refused(run: Run, line: str, location: str) -> None:
    assert run.rc == 3, run.stderr
    assert run.stderr.splitlines() == [f"dsh: INVALID_COMMAND: {line}", FIX]
    assert _turn_end_code(run) == "INVALID_COMMAND"
    (status,) = _statuses(run)
    assert (status["state"], status["error_code"], status["card"], status["location"]) == (
        "failed", "INVALID_COMMAND", "invalid-script", location,
    )
    assert _providers(run) == ["mock"]  # never the real provider
    assert run.bodies() == []
    assert run.events("tool/call") == []


def test_a_trailing_comma_is_refused_once_at_its_column_with_the_fix_and_exit_3(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run echo({"text": "a",})')

    _assert_refused(run, "the arguments of echo are not valid JSON: a trailing comma (column 28)", "column 28")


def test_a_misspelt_command_word_is_refused_with_a_suggestion_instead_of_reaching_the_model(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mok run echo({"text": "a"})')

    _assert_refused(
        run,
        "a misspelt /mock command; did you mean /mock run? It was not sent to the model (column 1)",
        "column 1",
    )


def test_a_misspelt_subcommand_is_refused_with_a_suggestion(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock rnu echo({"text": "a"})')

    _assert_refused(run, "unknown subcommand; did you mean run? (column 7)", "column 7")


def test_an_ordinary_slash_prompt_still_goes_to_the_configured_model(raw_dsh: Dsh) -> None:
    run = raw_dsh.run("/model deepseek-v4-pro")

    assert run.rc == 1
    assert "MISSING_CREDENTIAL" in run.stderr and "INVALID_COMMAND" not in run.stderr
    assert _providers(run) == ["deepseek-official"]
    assert _statuses(run) == []
