"""The /mock command grammar (docs/mock.md)."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.mock.command import ReplayCommand, RunCommand, parse_arguments, parse_command
from dsh_sidecar.python_core.mock.errors import InvalidCommand
from dsh_sidecar.python_core.mock.script import encode_script


def run_script(text: str) -> bytes:
    command = parse_command(text)
    assert isinstance(command, RunCommand)
    return encode_script(command.script)


def test_single_run_with_object_becomes_one_tool_step() -> None:
    assert run_script('/mock run probe_tool({"value":"ok"})') == (
        b'{"steps":[{"args":{"value":"ok"},"tool":"probe_tool"}],'
        b'"type":"dsh-mock-script","version":1}'
    )


def test_bracket_group_becomes_one_parallel_step_in_order() -> None:
    script = run_script('/mock run [probe_b({"value":"b"})  probe_a({})]')
    assert script == (
        b'{"steps":[{"parallel":[{"args":{"value":"b"},"tool":"probe_b"},'
        b'{"args":{},"tool":"probe_a"}]}],"type":"dsh-mock-script","version":1}'
    )


def test_whitespace_inside_json_and_around_parens_is_accepted() -> None:
    script = run_script('  /mock   run  exec_command( { "cmd" : "Get-Location" } )\n')
    assert b'"args":{"cmd":"Get-Location"}' in script


def test_json_strings_may_hold_brackets_and_escaped_quotes() -> None:
    script = run_script('/mock run t({"s":"}) ]\\" {"})')
    assert b'"s":"}) ]\\" {"' in script


def test_parse_arguments_takes_the_handler_raw_input() -> None:
    command = parse_arguments(' run t({"a":1})')
    assert isinstance(command, RunCommand)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("/mock run t()", "the arguments of t must be a JSON object, e.g. t({}) (column 13)"),
        ("/mock run t([1])", "the arguments of t must be a JSON object, e.g. t({}) (column 13)"),
        ('/mock run t("x")', "the arguments of t must be a JSON object, e.g. t({}) (column 13)"),
        (
            "/mock run t({'a':1})",
            "the arguments of t are not valid JSON (single quotes, unquoted "
            "keys and comments are not JSON) (column 14)",
        ),
        (
            "/mock run t({a:1})",
            "the arguments of t are not valid JSON (single quotes, unquoted "
            "keys and comments are not JSON) (column 14)",
        ),
        (
            '/mock run t({"a":1,})',
            "the arguments of t are not valid JSON: a trailing comma (column 19)",
        ),
        (
            '/mock run t({"a": [1, 2,]})',
            "the arguments of t are not valid JSON: a trailing comma (column 24)",
        ),
        (
            '/mock run t({"a":1 /* c */})',
            "the arguments of t are not valid JSON (single quotes, "
            "unquoted keys and comments are not JSON) (column 20)",
        ),
        ('/mock run t({"a":1}) // c', "unexpected text after the tool call (column 22)"),
        (
            '/mock run t({"a":NaN})',
            "the arguments of t are not strict JSON: NaN is not JSON (column 13)",
        ),
        (
            '/mock run t({"a":1,"a":2})',
            "the arguments of t are not strict JSON: duplicate object key (column 13)",
        ),
        ('/mock run t({"a":1)', "unterminated JSON object (column 13)"),
        ('/mock run t({"a":1}', "expected ) to close the call to t (column 20)"),
        ("/mock run tools.t({})", "expected ( after tool name tools (column 16)"),
        ("/mock run await t({})", "expected ( after tool name await (column 16)"),
        ("/mock run t({}).then(x)", "unexpected text after the tool call (column 16)"),
        ("/mock run (() => t({}))()", "expected a tool name (A-Z a-z 0-9 _ -) (column 11)"),
        (
            '/mock run {"tool":"t","args":{}}',
            "expected a tool call NAME({...}); a bare object is not a step (column 11)",
        ),
        ("/mock run", "expected a tool call after run (column 10)"),
        ("/mock run []", "a parallel group needs at least one tool call (column 12)"),
        (
            "/mock run [t({}), u({})]",
            "separate the calls of a group with whitespace, not ',' (column 17)",
        ),
        ("/mock run [t({}) [u({})]]", "parallel groups cannot nest (column 18)"),
        ("/mock run [t({}) u({})", "unterminated [ group; expected ] (column 23)"),
        (
            "/mock run " + "x" * 65 + "({})",
            "invalid tool name (DSH tool names are 1-64 characters of A-Z a-z 0-9 _ -) (column 11)",
        ),
        ("/mock walk t({})", "unknown subcommand; expected run or replay (column 7)"),
        ("/mock", "expected run or replay after /mock (column 6)"),
        (
            "/mocker run t({})",
            "a misspelt /mock command; did you mean /mock run? It was not sent to the model (column 1)",
        ),
        ("/mock rnu t({})", "unknown subcommand; did you mean run? (column 7)"),
        ("/mock Replay s.json", "unknown subcommand; did you mean replay? (column 7)"),
        ("mock run t({})", "the command must start with /mock (column 1)"),
    ],
)
def test_malformed_run_is_an_invalid_command(text: str, message: str) -> None:
    with pytest.raises(InvalidCommand) as caught:
        parse_command(text)
    assert caught.value.message == message
    assert str(caught.value) == f"INVALID_COMMAND: {message}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "/mock run a({}) b({})",
            "/mock run takes one tool call or one [...] group; sequential "
            "steps and waits belong in a replay script (column 17)",
        ),
        (
            "/mock run a({}); b({})",
            "/mock run takes one executable unit; ';' starts a second statement (column 16)",
        ),
        (
            "/mock run a({}) wait(100)",
            "/mock run takes one tool call or one [...] group; "
            "sequential steps and waits belong in a replay script (column 17)",
        ),
        (
            "/mock run a({}) --wait 100",
            "/mock run takes one tool call or one [...] group; "
            "sequential steps and waits belong in a replay script (column 17)",
        ),
        (
            "/mock run [a({})] [b({})]",
            "/mock run takes one tool call or one [...] group; "
            "sequential steps and waits belong in a replay script (column 19)",
        ),
        (
            "/mock run --wait 100 a({})",
            "/mock run accepts no options; waits can only be "
            "authored in a replay script (column 11)",
        ),
        (
            "/mock run wait(100)",
            "wait is not accepted by /mock run; waits can only be authored "
            "in a replay script (column 11)",
        ),
        (
            '/mock run wait({"ms":100})',
            "wait is not accepted by /mock run; waits can only be "
            "authored in a replay script (column 11)",
        ),
        (
            "/mock run [a({}) wait(5) b({})]",
            "wait is not accepted by /mock run; waits can only "
            "be authored in a replay script (column 18)",
        ),
        (
            '/mock run {"wait":100}',
            "expected a tool call NAME({...}); a bare object is not a step (column 11)",
        ),
    ],
)
def test_waits_and_sequential_calls_are_rejected_by_run(text: str, message: str) -> None:
    with pytest.raises(InvalidCommand) as caught:
        parse_command(text)
    assert caught.value.message == message


def test_replay_takes_a_path() -> None:
    assert parse_command("/mock replay logs/session.jsonl") == ReplayCommand(
        path="logs/session.jsonl", overwrite_wait_ms=None
    )


def test_replay_takes_the_overwrite_option_after_the_path() -> None:
    assert parse_command("/mock replay s.jsonl --overwrite-wait-time-ms 0") == ReplayCommand(
        path="s.jsonl", overwrite_wait_ms=0
    )


def test_replay_path_may_be_a_json_quoted_string() -> None:
    command = parse_command('/mock replay "my logs/s \\"1\\".jsonl" --overwrite-wait-time-ms 25')
    assert command == ReplayCommand(path='my logs/s "1".jsonl', overwrite_wait_ms=25)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("/mock replay", "expected a path after replay (column 13)"),
        ("/mock replay a.jsonl b.jsonl", "/mock replay takes exactly one path (column 22)"),
        (
            "/mock replay --overwrite-wait-time-ms 5 a.jsonl",
            "expected a path before options (column 14)",
        ),
        (
            "/mock replay a.jsonl --overwrite-wait-time-ms",
            "--overwrite-wait-time-ms needs a non-negative integer (column 46)",
        ),
        (
            "/mock replay a.jsonl --overwrite-wait-time-ms -5",
            "--overwrite-wait-time-ms needs a "
            "non-negative integer without sign or leading zeros (column 47)",
        ),
        (
            "/mock replay a.jsonl --overwrite-wait-time-ms 1.5",
            "--overwrite-wait-time-ms needs a "
            "non-negative integer without sign or leading zeros (column 47)",
        ),
        (
            "/mock replay a.jsonl --overwrite-wait-time-ms 007",
            "--overwrite-wait-time-ms needs a "
            "non-negative integer without sign or leading zeros (column 47)",
        ),
        (
            "/mock replay a.jsonl --overwrite-wait-time-ms 9007199254740992",
            "--overwrite-wait-time-ms exceeds 9007199254740991 ms (column 47)",
        ),
        (
            "/mock replay a.jsonl --overwrite-wait-time-ms 1 --overwrite-wait-time-ms 2",
            "--overwrite-wait-time-ms is given twice (column 49)",
        ),
        (
            "/mock replay a.jsonl --wait 5",
            "unknown option; the only option is --overwrite-wait-time-ms (column 22)",
        ),
        ('/mock replay "a.jsonl', "unterminated quoted path (column 14)"),
        ('/mock replay ""', "the path is empty (column 14)"),
        ('/mock replay "a"b', "expected whitespace after the quoted path (column 17)"),
    ],
)
def test_malformed_replay_is_an_invalid_command(text: str, message: str) -> None:
    with pytest.raises(InvalidCommand) as caught:
        parse_command(text)
    assert caught.value.message == message
