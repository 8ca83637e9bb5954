"""The strict canonical JSON profile every hash and fingerprint stands on."""

from __future__ import annotations

import json
import random

import pytest

from dsh_sidecar.python_core import canonical
from dsh_sidecar.python_core.canonical import (
    MAX_DEPTH,
    NOT_CANONICAL,
    canonical_bytes,
    check_depth,
    decode_canonical,
    digest,
    is_canonical,
    loads_strict,
    too_deep,
    too_deep_lines,
    value_too_deep,
)
from dsh_sidecar.python_core.errors import CanonicalJsonError

# Number.prototype.toString, as Node 24 prints each value.
JS_NUMBERS = {
    0.1: "0.1", 1.0: "1", -2.5: "-2.5", 1e21: "1e+21", 1.5e21: "1.5e+21",
    1e-7: "1e-7", 1.23e-7: "1.23e-7", 0.000001: "0.000001", 123.456: "123.456", 1e300: "1e+300",
    5e-324: "5e-324", 1.7976931348623157e308: "1.7976931348623157e+308", 100.5: "100.5",
}


@pytest.mark.parametrize("value", list(JS_NUMBERS))
def test_floats_print_as_javascript_prints_them(value: float) -> None:
    assert canonical_bytes(value).decode() == JS_NUMBERS[value]


def test_keys_sort_by_utf16_code_units_and_nested_objects_too() -> None:
    value = {"\uff61": 2, "\U0001f600": 1, "b": {"z": 1, "a": [3, {"d": 1, "c": 2}]}}

    assert canonical_bytes(value) == '{"b":{"a":[3,{"c":2,"d":1}],"z":1},"\U0001f600":1,"\uff61":2}'.encode()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (float("nan"), "NaN or Infinity at /"),
        ({"a": [float("inf")]}, "NaN or Infinity at /a/0"),
        ({"a": -0.0}, "negative zero at /a"),
        ({"x": 2**53}, "integer outside +-(2^53-1) at /x"),
        ({"x": 1e16}, "integer outside +-(2^53-1) at /x"),
        ({"s": "\ud800"}, "lone surrogate in a string at /s"),
        ({1: "x"}, "object key is not a string at /"),
        ({"set": {1}}, "set is not a JSON value at /set"),
    ],
)
def test_values_without_a_canonical_form_are_named_errors(value: object, reason: str) -> None:
    with pytest.raises(CanonicalJsonError) as info:
        canonical_bytes(value)
    assert str(info.value) == f"NON_CANONICAL_JSON: {reason}"


def test_deep_nesting_is_a_named_error_not_a_crash() -> None:
    value: object = "x"
    for _ in range(5000):
        value = [value]
    with pytest.raises(CanonicalJsonError, match="nested deeper than 256 levels"):
        canonical_bytes(value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"a": 1, "a": 2}', "duplicate object key at an object"),
        ('{"k": {"secret-key": 1, "secret-key": 1}}', "duplicate object key at an object"),
        ("[NaN]", "NaN is not JSON at /"),
        ("-0", "negative zero at /"),
        ("9007199254740993", "integer outside +-(2^53-1) at /"),
        ("{", "not valid JSON at byte 1"),
    ],
)
def test_strict_loading_refuses_what_the_profile_refuses(text: str, reason: str) -> None:
    with pytest.raises(CanonicalJsonError) as info:
        loads_strict(text)
    assert str(info.value) == f"NON_CANONICAL_JSON: {reason}"
    assert "secret-key" not in str(info.value)


def test_digest_is_sha256_of_the_canonical_bytes() -> None:
    assert digest({"b": 1, "a": 1.0}) == digest(json.loads('{"a": 1, "b": 1}'))
    assert digest({}) == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"


@pytest.mark.parametrize(
    "line",
    [b'{"a":1.0}', b'{"a":1e16}', b'{"a":-0.0}', b'{"a":9007199254740993}', b'{"b":1,"a":2}', b'{"a": 1}',
     b'{"a":1,"a":1}', b'{"a":"\\ud800"}', b'{"a":1.50}', b'{"\xef\xbd\xa1":2,"\xf0\x9f\x98\x80":1}', b"nope"],
)
def test_non_canonical_lines_are_detected(line: bytes) -> None:
    assert decode_canonical(line) is NOT_CANONICAL
    assert not is_canonical(line)


def _random_value(rand: random.Random, depth: int = 0) -> object:
    kind = rand.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return rand.choice([None, True, False])
    if kind == 1:
        return rand.randrange(-(2**53) + 1, 2**53)
    if kind == 2:
        return rand.choice([0.5, 1e-7, 1e21, 3.0, 123.456, -2.25, 1e300, 0.1 + 0.2])
    if kind in (3, 4):
        return "".join(rand.choice("ab\"\\\n\t\u00e9\uff61\U0001f600") for _ in range(rand.randrange(6)))
    if kind == 5:
        return [_random_value(rand, depth + 1) for _ in range(rand.randrange(4))]
    keys = ["".join(rand.choice("ab\u00e9\uff61\U0001f600") for _ in range(rand.randrange(1, 4))) for _ in range(4)]
    return {key: _random_value(rand, depth + 1) for key in keys[: rand.randrange(4)]}


@pytest.mark.parametrize("seed", range(20))
def test_the_fast_check_agrees_with_the_encoder(seed: int) -> None:
    rand = random.Random(seed)
    for _ in range(50):
        value = _random_value(rand)
        line = canonical_bytes(value)
        assert decode_canonical(line) == json.loads(line), f"seed {seed}"
        spaced = json.dumps(json.loads(line), ensure_ascii=False).encode()
        assert is_canonical(spaced) == (spaced == line), f"seed {seed}"


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_the_depth_limit_is_256_levels_of_arrays_and_objects() -> None:
    assert MAX_DEPTH == 256
    assert not too_deep(_nested(256))
    assert too_deep(_nested(257))
    assert not too_deep(b'{"a":' * 256 + b"1" + b"}" * 256)
    assert too_deep(b'{"a":' * 257 + b"1" + b"}" * 257)


def test_too_deep_lines_agrees_with_too_deep_per_line() -> None:
    """Deep lines are found wherever they sit; many shallow openers or string brackets are not deep."""
    lines = [
        _nested(257),                                 # first line
        b'{"a":1}',
        b"[" + b"[]," * 400 + b"[]]",                 # 401 openers, depth 2
        b"",
        b'["' + b"[{" * 1000 + b'"]',                 # openers inside a string
        b'{"a":' * 257 + b"1" + b"}" * 257,
        _nested(256),
        _nested(300),                                 # last line, no newline after it
    ]
    data = b"\n".join(lines)
    assert too_deep_lines(data, data.split(b"\n")) == {i for i, line in enumerate(lines) if too_deep(line)}
    assert too_deep_lines(data, data.split(b"\n")) == {0, 5, 7}


def test_canonical_bytes_matches_the_slow_path_on_random_values() -> None:
    """The msgspec quick path and ``_prepare`` agree; what the quick path cannot prove goes slow."""
    rng = random.Random(11)
    atoms = [0, 1, -7, 2**53 - 1, 0.5, 1.0, -2.5, 1e21, 1e-7, 123.456, True, False, None, "", "é"]
    keys = ["a", "b", "é", "\U0001f600", "\ue000", "z"]  # UTF-16 and code-point orders differ
    atoms += keys
    for _ in range(2000):
        value = {rng.choice(keys): rng.choice(atoms) for _ in range(rng.randint(0, 5))}
        value["list"] = [rng.choice(atoms) for _ in range(rng.randint(0, 4))]
        assert canonical_bytes(value) == canonical._ENCODER.encode(canonical._prepare(value, []))
    assert canonical_bytes({"\U0001f600": 1, "\ue000": 2}) == '{"\U0001f600":1,"\ue000":2}'.encode()
    assert canonical_bytes({"a": 1.0, "b": (1, 2), "c": 1e21}) == b'{"a":1,"b":[1,2],"c":1e+21}'


def test_brackets_inside_strings_do_not_count() -> None:
    assert not too_deep(b'["' + b"[{" * 1000 + b'\\"[["]')


def test_the_depth_limit_is_one_named_error_for_text_and_values() -> None:
    with pytest.raises(CanonicalJsonError, match=r"^NON_CANONICAL_JSON: nested deeper than 256 levels at /$"):
        loads_strict(_nested(257))
    with pytest.raises(CanonicalJsonError, match="nested deeper than 256 levels"):
        check_depth(_nested(1000))
    assert decode_canonical(_nested(5000)) is NOT_CANONICAL
    assert canonical_bytes(loads_strict(_nested(256))) == _nested(256)
    value: object = 1
    for _ in range(257):
        value = [value]
    assert value_too_deep(value) and not value_too_deep([[1]])
    with pytest.raises(CanonicalJsonError, match="nested deeper than 256 levels"):
        canonical_bytes(value)


def test_a_lone_surrogate_in_an_object_key_is_refused_by_name() -> None:
    with pytest.raises(CanonicalJsonError) as info:
        canonical_bytes({"ok": {"\ud800": 1}})
    assert str(info.value) == "NON_CANONICAL_JSON: lone surrogate in an object key at /ok"
    assert canonical_bytes({"\U0001f600": 1}) == '{"\U0001f600":1}'.encode()
