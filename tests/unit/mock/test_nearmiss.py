"""Near misses of /mock: refused with a did-you-mean, while ordinary prompts stay ordinary."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.mock.assemble import find_command
from dsh_sidecar.python_core.mock.command import parse_command
from dsh_sidecar.python_core.mock.errors import InvalidCommand
from dsh_sidecar.python_core.mock.nearmiss import closest_subcommand, distance, is_near_miss


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("mock", "mock", 0), ("mok", "mock", 1), ("mcok", "mock", 1), ("rnu", "run", 1), ("mode", "mock", 2),
     ("model", "mock", 3), ("", "run", 3), ("replay", "relay", 1), ("ca", "abc", 3)],
)
def test_distance_counts_a_swap_of_neighbours_as_one_edit(a: str, b: str, expected: int) -> None:
    assert distance(a, b) == expected


@pytest.mark.parametrize(
    ("text", "meant"),
    [
        ('/mok run echo({"text": "a"})', "run"),
        ('/mcok run [a({}) b({})]', "run"),
        ('/Mock run echo({})', "run"),
        ("/MOCK", ""),
        ("/mocker rnu t({})", "run"),
        ("/mok replay s.json", "replay"),
        ("/mok relpay s.json --overwrite-wait-time-ms 0", "replay"),
    ],
)
def test_misspelt_commands_are_near_misses_and_refused_with_a_suggestion(text: str, meant: str) -> None:
    assert is_near_miss(text) == meant
    assert find_command(["hello", text]) == text
    with pytest.raises(InvalidCommand) as caught:
        parse_command(text)
    suggestion = f"/mock {meant}".rstrip()
    assert caught.value.message == (
        f"a misspelt /mock command; did you mean {suggestion}? It was not sent to the model (column 1)"
    )


@pytest.mark.parametrize(
    "text",
    [
        "/model deepseek-v4-pro",
        "/mode up the hill",
        "/lock run the tests",
        "/lock reply to this mail",
        "/mok run",
        "/mockery is fun",
        "/help",
        "please /mock run echo({})",
        "mock run echo({})",
        "run the mock tests",
        "/" + "m" * 10_000 + " run x(",
    ],
)
def test_ordinary_prompts_are_not_near_misses(text: str) -> None:
    assert is_near_miss(text) is None
    assert find_command([text]) is None


def test_the_exact_command_word_is_left_to_the_grammar() -> None:
    assert is_near_miss("/mock rnu t({})") is None
    assert find_command(["/mock rnu t({})"]) == "/mock rnu t({})"
    assert closest_subcommand("rnu") == "run" and closest_subcommand("walk") is None
