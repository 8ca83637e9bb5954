"""The canonical script and its one validator (docs/mock.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dsh_sidecar.python_core.mock.errors import InvalidScript
from dsh_sidecar.python_core.mock.script import (
    ExecutableStep,
    ToolStep,
    decode_script,
    encode_script,
    executable_steps,
    script_id,
    validate_script,
)

SEED_EXAMPLE = {
    "type": "dsh-mock-script",
    "version": 1,
    "steps": [
        {"tool": "a", "args": {}},
        {"wait": 1000},
        {"parallel": [{"tool": "b", "args": {}}, {"tool": "c", "args": {}}]},
        {"wait": 500},
        {"tool": "d", "args": {}},
    ],
}


def make_script(*steps: Any, **top: Any) -> dict[str, Any]:
    return {"type": "dsh-mock-script", "version": 1, "steps": list(steps), **top}


def invalid(value: Any) -> str:
    with pytest.raises(InvalidScript) as caught:
        validate_script(value, source="s.json")
    return str(caught.value)


def test_seed_example_has_three_executable_steps_not_five() -> None:
    steps = executable_steps(validate_script(SEED_EXAMPLE, source="s.json"))
    assert [len(step.calls) for step in steps] == [1, 2, 1]
    assert [step.wait_before for step in steps] == [None, 1000, 500]


def test_single_parallel_and_wait_steps_validate() -> None:
    script = validate_script(
        make_script(
            {"tool": "probe_tool", "args": {"value": "ok"}},
            {"parallel": [{"tool": "probe_a", "args": {}}, {"tool": "probe_b", "args": {"v": 2}}]},
            {"wait": 250},
            {"tool": "probe_c", "args": {}},
        ),
        source="s.json",
    )
    assert executable_steps(script)[2] == ExecutableStep(
        calls=(ToolStep(tool="probe_c", args=script.steps[3].args),),
        wait_before=250,  # type: ignore[union-attr]
    )


def test_encoding_is_canonical_and_round_trips() -> None:
    script = validate_script(
        make_script({"args": {"z": 1.0, "a": [True, None, "é"]}, "tool": "t"}), source="s.json"
    )
    encoded = encode_script(script)
    assert encoded == (
        b'{"steps":[{"args":{"a":[true,null,"\xc3\xa9"],"z":1},"tool":"t"}],'
        b'"type":"dsh-mock-script","version":1}'
    )
    assert decode_script(encoded, source="s.json") == script
    assert script_id(script).startswith("sha256:")


def test_args_remain_data_and_are_never_evaluated() -> None:
    script = validate_script(
        make_script({"tool": "t", "args": {"code": "__import__('os').system('x')"}}),
        source="s.json",
    )
    assert json.loads(bytes(script.steps[0].args)) == {  # type: ignore[union-attr]
        "code": "__import__('os').system('x')"
    }


def test_zero_wait_is_an_explicit_wait() -> None:
    script = validate_script(
        make_script({"tool": "a", "args": {}}, {"wait": 0}, {"tool": "b", "args": {}}),
        source="s.json",
    )
    assert executable_steps(script)[1].wait_before == 0


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"wait": 5}, {"tool": "a", "args": {}}], "a wait cannot be the first step at /steps/0"),
        ([{"tool": "a", "args": {}}, {"wait": 5}], "a wait cannot be the last step at /steps/1"),
        (
            [{"tool": "a", "args": {}}, {"wait": 5}, {"wait": 6}, {"tool": "b", "args": {}}],
            "a wait cannot follow another wait at /steps/2",
        ),
        (
            [{"parallel": [{"tool": "a", "args": {}}, {"wait": 5}]}],
            "a wait cannot appear inside a parallel group at /steps/0/parallel/1",
        ),
        (
            [{"tool": "a", "args": {}}, {"wait": -1}, {"tool": "b", "args": {}}],
            "wait must be a non-negative integer of milliseconds at /steps/1/wait",
        ),
        (
            [{"tool": "a", "args": {}}, {"wait": 2.5}, {"tool": "b", "args": {}}],
            "wait must be a non-negative integer of milliseconds at /steps/1/wait",
        ),
        (
            [{"tool": "a", "args": {}}, {"wait": True}, {"tool": "b", "args": {}}],
            "wait must be a non-negative integer of milliseconds at /steps/1/wait",
        ),
        (
            [{"tool": "a", "args": {}}, {"wait": 2**53}, {"tool": "b", "args": {}}],
            "wait exceeds 9007199254740991 ms at /steps/1/wait",
        ),
        ([{"wait": 5}], "the script has no executable step at /steps"),
        ([], "the script has no executable step at /steps"),
    ],
)
def test_illegal_wait_placement_is_an_invalid_script(steps: list[Any], message: str) -> None:
    assert invalid(make_script(*steps)) == f"INVALID_SCRIPT: s.json: {message}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([], "expected an object, got array at /"),
        (make_script({"tool": "a", "args": {}}, extra=1), 'unknown field "extra" at /'),
        ({"type": "dsh-mock-script", "version": 1}, 'missing field "steps" at /'),
        (
            make_script({"tool": "a", "args": {}}) | {"type": "other"},
            'type must be "dsh-mock-script" at /type',
        ),
        (
            make_script({"tool": "a", "args": {}}) | {"version": 2},
            "unsupported version 2; this reader supports 1 at /version",
        ),
        (
            make_script({"tool": "a", "args": {}}) | {"version": "1"},
            "version must be an integer, got string at /version",
        ),
        (
            make_script({"tool": "a", "args": {}}) | {"steps": {}},
            "steps must be an array, got object at /steps",
        ),
        (make_script({"tool": "a", "args": {}, "note": "x"}), 'unknown field "note" at /steps/0'),
        (make_script({"tool": "a"}), 'missing field "args" at /steps/0'),
        (
            make_script({"tool": "a", "args": []}),
            "args must be a JSON object, got array at /steps/0/args",
        ),
        (
            make_script({"tool": "a", "args": "{}"}),
            "args must be a JSON object, got string at /steps/0/args",
        ),
        (
            make_script({"tool": "a b", "args": {}}),
            "invalid tool name (DSH tool names are 1-64 "
            "characters of A-Z a-z 0-9 _ -) at /steps/0/tool",
        ),
        (
            make_script({"tool": "", "args": {}}),
            "invalid tool name (DSH tool names are 1-64 "
            "characters of A-Z a-z 0-9 _ -) at /steps/0/tool",
        ),
        (
            make_script({"tool": 3, "args": {}}),
            "invalid tool name (DSH tool names are 1-64 "
            "characters of A-Z a-z 0-9 _ -) at /steps/0/tool",
        ),
        (
            make_script({"parallel": []}),
            "parallel must be a non-empty array of tool steps at /steps/0/parallel",
        ),
        (
            make_script({"parallel": [{"parallel": [{"tool": "a", "args": {}}]}]}),
            "parallel groups cannot nest at /steps/0/parallel/0",
        ),
        (
            make_script({"parallel": [{"tool": "a", "args": {}}], "wait": 3}),
            'unknown field "parallel" at /steps/0',
        ),
        (
            make_script({"run": "a"}),
            "a step needs exactly one of tool, parallel or wait at /steps/0",
        ),
        (make_script("a"), "a step must be an object, got string at /steps/0"),
        (
            make_script({"tool": "a", "args": {"n": 2**53}}),
            "args are not canonical JSON: integer outside +-(2^53-1) at /steps/0/args",
        ),
    ],
)
def test_bad_shapes_are_invalid_scripts_with_a_pointer(value: Any, message: str) -> None:
    assert invalid(value) == f"INVALID_SCRIPT: s.json: {message}"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            b'{"type":"dsh-mock-script","type":"x","version":1,"steps":[]}',
            "not strict JSON: duplicate object key",
        ),
        (b"{'type': 'dsh-mock-script'}", "not strict JSON: not valid JSON"),
        (
            b'{"type":"dsh-mock-script","version":1,"steps":[{"wait":NaN}]}',
            "not strict JSON: NaN is not JSON",
        ),
        (b"// comment\n{}", "not strict JSON: not valid JSON"),
    ],
)
def test_non_strict_json_text_is_an_invalid_script(text: bytes, reason: str) -> None:
    with pytest.raises(InvalidScript) as caught:
        decode_script(text, source="s.json")
    assert caught.value.message == f"s.json: {reason}"


def test_a_lone_surrogate_in_args_is_an_invalid_script() -> None:
    assert invalid(make_script({"tool": "a", "args": {"s": "\ud800"}})) == (
        "INVALID_SCRIPT: s.json: args are not canonical JSON: lone surrogate in a string at "
        "/steps/0/args"
    )


def test_line_of_adds_the_source_line_to_a_diagnostic() -> None:
    with pytest.raises(InvalidScript) as caught:
        validate_script(
            make_script({"tool": "a", "args": []}),
            source="session.jsonl",
            line_of=lambda location: 17 if location.startswith("/steps/0") else None,
        )
    assert str(caught.value) == (
        "INVALID_SCRIPT: session.jsonl:17: args must be a JSON object, got array at /steps/0/args"
    )


def test_long_unknown_field_names_are_capped_in_messages() -> None:
    message = invalid(make_script({"tool": "a", "args": {}}) | {"k" * 100: 1})
    assert "k" * 41 not in message


@pytest.mark.parametrize("wait", [2**31 - 1, 2**31, 2**40, 2**53 - 1])
def test_any_non_negative_integer_wait_of_the_canonical_range_is_accepted(wait: int) -> None:
    text = json.dumps(make_script({"tool": "a", "args": {}}, {"wait": wait}, {"tool": "b", "args": {}}))
    script = decode_script(text.encode(), source="s.json")
    assert json.loads(encode_script(script))["steps"][1] == {"wait": wait}
