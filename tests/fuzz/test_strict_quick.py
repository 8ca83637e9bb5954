"""``loads_strict``'s C-speed path against its ``json``-with-hooks path, differentially.

40,000 seeded texts built from the profile's edge atoms (negative zero, integral and
non-shortest floats, 2^53 edges, NaN, escapes, lone surrogates, astral characters) in objects
with repeated and escaped-equal keys, with whitespace, truncation and byte mutation. Wherever
the quick path answers, the slow path must accept the same text and give the same value, with
the same Python types at every position; the quick path answering nothing is always allowed.
"""

from __future__ import annotations

from typing import Any

from dsh_sidecar.python_core import canonical
from dsh_sidecar.python_core.errors import CanonicalJsonError

N = 40_000
_ATOMS = [
    "0", "-0", "1", "-1", "1.5", "-0.0", "1.0", "1e5", "1E5", "0.10", "9007199254740991",
    "9007199254740992", "-9007199254740993", "12345678901234567", "0.1", "1e400", "NaN",
    "Infinity", '"a"', '"\\u00e9"', '"\\ud800"', '"\\ud83d\\ude00"', '"é"', '"😀"', '"\\n"',
    '"\\/"', '"a\\"b"', '"\\u0000"', "true", "false", "null",
]
_KEYS = ['"a"', '"b"', '"\\u0061"', '"é"', '"\\u00e9"', '""']


def _text(fuzz: Any, depth: int = 0) -> str:
    rng = fuzz.rng
    roll = rng.random()
    if depth > 3 or roll < 0.4:
        return str(rng.choice(_ATOMS))
    if roll < 0.75:
        members = [
            rng.choice(_KEYS) + rng.choice([":", " : "]) + _text(fuzz, depth + 1)
            for _ in range(rng.randint(0, 4))
        ]
        return "{" + rng.choice([",", ", "]).join(members) + "}"
    return "[" + ",".join(_text(fuzz, depth + 1) for _ in range(rng.randint(0, 3))) + "]"


def _typed(value: Any) -> Any:
    """``value`` with each scalar's type beside it, so ``1`` and ``1.0`` never compare equal."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    return (type(value).__name__, repr(value))


def test_the_quick_path_answers_only_what_the_hooks_path_answers_the_same(fuzz: Any) -> None:
    answered = refused_by_slow = 0
    for _ in range(N):
        text = _text(fuzz)
        if fuzz.rng.random() < 0.2:
            text = f" {text}\n"
        data: bytes | str = text
        if fuzz.rng.random() < 0.5:
            data = fuzz.mutate(text.encode("utf-8", "surrogatepass")) if fuzz.rng.random() < 0.3 \
                else text.encode("utf-8", "surrogatepass")
        if canonical.too_deep(data):
            continue  # loads_strict refuses these before either path runs
        quick = canonical._strict_quick(data)
        try:
            slow = canonical._strict_slow(data)
        except CanonicalJsonError:
            refused_by_slow += 1
            assert quick is canonical.NOT_CANONICAL, data
            continue
        if quick is not canonical.NOT_CANONICAL:
            answered += 1
            assert _typed(quick) == _typed(slow), data
    # Both outcomes must be exercised for the comparison to mean anything.
    assert answered > N // 10 and refused_by_slow > N // 10, (answered, refused_by_slow)


def test_the_quick_path_declines_each_profile_rule() -> None:
    for text in ['{"a":1,"a":1}', "-0", "-0.0", "1.0", "9007199254740993", '{"a":[1,{"b":2,"b":3}]}']:
        assert canonical._strict_quick(text) is canonical.NOT_CANONICAL, text
    assert canonical._strict_quick('{"path": "src/a.py", "limit": 200}') == {
        "path": "src/a.py",
        "limit": 200,
    }
