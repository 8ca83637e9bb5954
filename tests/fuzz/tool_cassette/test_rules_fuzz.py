"""Fuzz: random rule specs through the filter, matching, fault and stub parsers; mutated
cassettes through reseal.

5,000 random JSON-ish values per parser (and the row's ``toolCassette`` section holding them):
each is accepted or refused with a one-line ``INVALID_CONFIG`` naming a field, never another
exception; accepted filters and matching rules then apply to random values without raising.
2,000 mutated cassettes through ``reseal_lines``: a named ``CASSETTE_INVALID`` or lines the
verifier accepts.
Seed: the ``fuzz`` fixture prints it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.filters import Filters, parse_filters
from dsh_sidecar.python_core.stubs import parse_stubs
from dsh_sidecar.python_core.tool_cassette.config import parse_config
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid
from dsh_sidecar.python_core.tool_cassette.faults import parse_faults
from dsh_sidecar.python_core.tool_cassette.matching import parse_match, reduce_args
from dsh_sidecar.python_core.tool_cassette.reseal import reseal_lines
from dsh_sidecar.python_core.tool_cassette.store import check_lines

N = 5_000
_PIECES: list[Any] = [
    "credentials", "*token*", "/a", "/a/0", "/~0~1", "~2", "", "(", "a+", ".*", "[", "\x00", "\ud800", "mod:fn",
    "f.py:fn", ":", "a:b:c", "TIMEOUT", "timeout", -1, 0, 1, 2**64, None, True, 1.5, [], {},
]
_KEYS = ["key", "pointer", "regex", "preset", "tool", "in", "ignore", "name", "rules", "code", "message",
         "ordinal", "path", "args", "result", "both"]


def _spec(fuzz: Any, depth: int = 0) -> Any:
    rng = fuzz.rng
    kind = rng.randrange(6 if depth < 3 else 3)
    if kind == 0:
        return rng.choice(_PIECES)
    if kind == 1:
        return fuzz.value()
    if kind == 2:
        return fuzz.string()
    if kind == 3:
        return [_spec(fuzz, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice([*_KEYS, fuzz.string()]): _spec(fuzz, depth + 1) for _ in range(rng.randint(0, 4))}


def _identity(value: Any) -> Any:
    return value


def _named(error: ConfigError) -> None:
    text = str(error)
    assert text.startswith("INVALID_CONFIG: ") and "\n" not in text, text


def test_fuzz_rule_specs_are_accepted_or_refused_by_field(fuzz: Any, tmp_path: Any) -> None:
    accepted = 0
    for _ in range(N):
        spec = _spec(fuzz)
        for parse in (parse_filters, parse_match, parse_faults, parse_stubs):
            try:
                rules = parse(spec)
            except ConfigError as error:
                _named(error)
                continue
            accepted += 1
            value = fuzz.value()
            if parse is parse_filters:
                functions = {rule.call: _identity for rule in rules if rule.call is not None}  # type: ignore[union-attr]
                Filters(rules, functions).apply(value, tool="t", where="args")  # type: ignore[arg-type]
            elif parse is parse_match:
                for rule in rules.values():  # type: ignore[union-attr]
                    reduce_args(value, rule)
        section = {"mode": fuzz.rng.choice(["record", "replay"]), "file": "c.ndjson", "include": ["t"],
                   fuzz.rng.choice(["filters", "match", "faults", "allowRedactedReplay"]): spec}
        try:
            parse_config(section, cwd=str(tmp_path))
        except ConfigError as error:
            _named(error)
        fuzz.count += 1
    print(f"rule spec fuzz: {fuzz.count} specs, {accepted} accepted parses")
    assert fuzz.count == N and accepted > 0


def test_fuzz_mutated_cassettes_reseal_to_a_valid_file_or_a_named_refusal(fuzz: Any, make_cassette: Any) -> None:
    valid = Path(make_cassette()).read_bytes()
    outcomes = {"resealed": 0, "refused": 0}
    for _ in range(2_000):
        lines = fuzz.mutate(valid).splitlines(keepends=True)
        try:
            out, _report = reseal_lines(lines)
        except CassetteInvalid as error:
            assert str(error).startswith("CASSETTE_INVALID: ") and "\n" not in str(error), (fuzz, error)
            outcomes["refused"] += 1
            continue
        check_lines(out)  # what reseal writes, replay loads
        outcomes["resealed"] += 1
        fuzz.count += 1
    print(f"reseal fuzz: {outcomes}")
    assert outcomes["resealed"] > 0 and outcomes["refused"] > 0
