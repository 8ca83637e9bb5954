"""What a person sees when a mock turn fails, through real headless DSH rc.8: the exact stderr
lines (count, code, column, reason, fix) and the exit code.

A refused command (broken grammar, a near miss of ``/mock``) exits 3, prints the named error
once with its column and then the fix; a tool that failed exits 1 with one line that gives the
schema reason or says where the full message is. ``raw_dsh`` runs ``dsh`` itself, so stderr is
exactly what the user's terminal shows.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from dshrun import DSH_HOME, ROOT, Dsh, Run

from dsh_sidecar.python_core.mock.errors import ConversionMismatch, InvalidCommand, InvalidScript
from dsh_sidecar.python_core.mock.reasons import refusal_hint

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
FIX = f"dsh-sidecar: fix: {refusal_hint(InvalidCommand(1, 'any'))}"


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


def test_invalid_args_names_the_schema_reason_in_one_line_never_the_value(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run broken({"reason": "value-not-shown"})')

    assert run.rc == 1
    assert run.stderr.splitlines() == [
        'dsh: INVALID_ARGS: broken (mock-1-1-0) failed at step 1: missing required property "why"; '
        "0 later step(s) stopped"
    ]
    assert _turn_end_code(run) == "INVALID_ARGS"
    assert _statuses(run)[-1]["state"] == "failed"


def test_a_failed_tool_says_where_its_full_message_is_and_the_command_shows_it(raw_dsh: Dsh) -> None:
    run = raw_dsh.run('/mock run broken({"why": "value-not-shown"})')

    (session,) = run.sessions()
    session_id = session[0]["id"]
    assert run.rc == 1
    assert run.stderr.splitlines() == [
        "dsh: TOOL_FAILED: broken (mock-1-1-0) failed at step 1; 0 later step(s) stopped; "
        f"its full message is in the session log: dsh-sidecar sessions show {session_id}"
    ]
    shown = subprocess.run(
        [SIDECAR_CLI, "sessions", "show", session_id], cwd=run.cwd, capture_output=True, text=True,
        env={**os.environ, "DSH_HOME": str(DSH_HOME)}, timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert "broken on purpose: value-not-shown" in shown.stdout


def test_a_missing_replay_file_is_refused_with_the_fix_for_that_rule_and_exit_3(raw_dsh: Dsh) -> None:
    run = raw_dsh.run("/mock replay missing.json")

    assert run.rc == 3
    assert run.stderr.splitlines() == [
        "dsh: PATH_REFUSED: replay path refused by rule not-a-regular-file: the path is not an existing "
        "regular file",
        "dsh-sidecar: fix: name an existing regular file (a script, or a session log listed by "
        "`dsh-sidecar sessions list`); a relative path starts at the session's folder",
    ]
    assert _turn_end_code(run) == "PATH_REFUSED"
    assert [s["card"] for s in _statuses(run)] == ["invalid-script"]


def _assert_refused_source(run: Run, code: str, line: str, location: str) -> None:
    """A replay source refused before any tool ran: exit 3, the line once, its fix, no tool call."""
    assert run.rc == 3, run.stderr
    assert run.stderr.splitlines() == [f"dsh: {code}: {line}", f"dsh-sidecar: fix: {FIXES[code]}"]
    assert _turn_end_code(run) == code
    (status,) = _statuses(run)
    assert (status["state"], status["error_code"], status["card"], status["location"], status["mode"]) == (
        "failed", code, "invalid-script", location, "replay",
    )
    assert _providers(run) == ["mock"]
    assert run.bodies() == []
    assert run.events("tool/call") == []


FIXES = {
    "INVALID_SCRIPT": refusal_hint(InvalidScript("s", "any")),
    "CONVERSION_MISMATCH": refusal_hint(ConversionMismatch("s", turn=1, step=1, field="arguments", lines=(1, 2))),
}


def test_a_script_with_a_leading_wait_is_an_invalid_script_and_runs_no_tool(raw_dsh: Dsh) -> None:
    (raw_dsh.cwd / "lead.json").write_text(json.dumps(
        {"type": "dsh-mock-script", "version": 1, "steps": [{"wait": 5}, {"tool": "echo", "args": {"text": "a"}}]}
    ))

    run = raw_dsh.run("/mock replay lead.json")

    _assert_refused_source(
        run, "INVALID_SCRIPT", "lead.json: a wait cannot be the first step at /steps/0", "lead.json at /steps/0",
    )


def test_a_session_log_whose_records_disagree_is_a_conversion_mismatch_and_runs_no_tool(raw_dsh: Dsh) -> None:
    call = {"turn": 1, "step": 1, "callId": "call_1", "name": "echo"}
    block = {"type": "tool-call", "id": "call_1", "name": "echo", "arguments": '{"text":"a"}'}
    lines = [
        {"type": "session", "version": 0, "id": "session-x", "createdAt": 1, "cwd": "/srv/x", "delegationDepth": 0},
        {"type": "turn/start", "seq": 0, "time": 2, "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": 3, "data": {"turn": 1, "step": 1}},
        {"type": "assistant/message", "seq": 2, "time": 4, "surfaceOp": "append", "data": {
            "turn": 1, "step": 1, "message": {"role": "assistant", "content": [block], "id": "m1",
                                               "source": {"kind": "model", "provider": "p", "model": "m"}}}},
        {"type": "tool/call", "seq": 3, "time": 5, "data": {**call, "arguments": '{"text":"b"}'}},
    ]
    (raw_dsh.cwd / "session.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    run = raw_dsh.run("/mock replay session.jsonl")

    _assert_refused_source(
        run, "CONVERSION_MISMATCH", "session.jsonl: turn 1 step 1: arguments differs between line 4 and line 5",
        "session.jsonl:4 and line 5",
    )
