"""JSON pointer differences: kinds, escaping, document order, the capped one-line description."""

from __future__ import annotations

import pytest

from dsh_sidecar.python_core.json_pointers import PointerChange, describe, differing_pointers, escape_token


def _pairs(recorded: object, actual: object) -> list[tuple[str, str]]:
    return [(c.kind, c.pointer) for c in differing_pointers(recorded, actual)]


def test_equal_values_have_no_difference() -> None:
    value = {"a": [1, {"b": None}], "c": "x"}
    assert differing_pointers(value, {"c": "x", "a": [1, {"b": None}]}) == []


def test_keys_and_elements_added_removed_and_changed_in_document_order() -> None:
    recorded = {"a": {"b": 1, "c": 2}, "list": [1, 2, 3], "z": 0}
    actual = {"a": {"b": 9, "d": 2}, "list": [1], "new": True, "z": 0}
    assert _pairs(recorded, actual) == [
        ("changed", "/a/b"), ("removed", "/a/c"), ("added", "/a/d"),
        ("removed", "/list/1"), ("removed", "/list/2"), ("added", "/new"),
    ]


@pytest.mark.parametrize(("recorded", "actual"), [
    (1, True), (0, False), (1, 1.5), ("1", 1), ({}, []), ([1], {"0": 1}), (None, 0), ({"a": 1}, "a"),
])
def test_a_type_change_is_changed_at_its_pointer(recorded: object, actual: object) -> None:
    assert _pairs({"k": recorded}, {"k": actual}) == [("changed", "/k")]


def test_a_replaced_root_is_one_change_named_as_the_whole_value() -> None:
    changes = differing_pointers([1, 2], {"a": 1})
    assert changes == [PointerChange("changed", "")]
    assert describe(changes) == "changed (the whole value)"


def test_keys_are_escaped_per_rfc_6901() -> None:
    assert escape_token("a/b~c") == "a~1b~0c"
    assert _pairs({}, {"a/b~c": 1}) == [("added", "/a~1b~0c")]


def test_array_indexes_sort_numerically() -> None:
    recorded = list(range(12))
    actual = [-1 for _ in range(12)]
    assert [p for _, p in _pairs(recorded, actual)][:3] == ["/0", "/1", "/2"]
    assert [p for _, p in _pairs(recorded, actual)][-2:] == ["/10", "/11"]


def test_describe_names_five_then_counts_the_rest() -> None:
    changes = differing_pointers({}, {f"k{i}": i for i in range(8)})
    assert describe(changes) == "added /k0, added /k1, added /k2, added /k3, added /k4, and 3 more"
    assert describe(changes[:5]) == "added /k0, added /k1, added /k2, added /k3, added /k4"
    assert describe([]) == ""


def test_describe_cuts_a_long_pointer() -> None:
    shown = describe(differing_pointers({}, {"x" * 200: 1}))
    assert shown == "added /" + "x" * 58 + "…"


def test_deep_nesting_does_not_recurse() -> None:
    recorded: object = 1
    actual: object = 2
    for _ in range(5000):
        recorded, actual = [recorded], [actual]
    (change,) = differing_pointers(recorded, actual)
    assert change.kind == "changed" and change.pointer == "/0" * 5000


def test_describe_escapes_control_characters_in_keys() -> None:
    assert describe(differing_pointers({}, {"a\x1fb\u2028": 1})) == "added /a\\u001fb\\u2028"
