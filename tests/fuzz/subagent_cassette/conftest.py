"""The subagent cassette fixtures of ``tests/unit/subagent_cassette`` (one definition), for the fuzz
tests here."""

from tests.unit.subagent_cassette.conftest import (
    clock,
    ids,
    make_outcome,
    make_start,
    open_cassette,
    record_file,
    recorded,
    records_of,
    sealed,
)

__all__ = [
    "clock", "ids", "make_outcome", "make_start", "open_cassette", "record_file", "recorded", "records_of",
    "sealed",
]
