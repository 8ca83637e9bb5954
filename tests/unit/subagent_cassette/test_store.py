"""Store: write modes, the writer lock, append compatibility, durable appends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.python_core.subagent_cassette.engine import Forward, SubagentCassetteEngine
from dsh_sidecar.python_core.subagent_cassette.errors import (
    AppendIncompatible,
    CassetteExists,
    CassetteLocked,
    CassetteNotFound,
)
from dsh_sidecar.python_core.subagent_cassette.store import CassetteWriter, load

Open = Callable[..., SubagentCassetteEngine]


def _record_one(cassette: SubagentCassetteEngine, start: Any, outcome: Any) -> None:
    decision = cassette.on_start(start)
    assert isinstance(decision, Forward)
    cassette.on_outcome(decision.handle, outcome)


def test_create_refuses_an_existing_file(record_file: Any, open_cassette: Open) -> None:
    path = record_file()
    with pytest.raises(CassetteExists) as info:
        open_cassette(path)
    assert str(info.value) == (
        "CASSETTE_EXISTS: rec.cassette.jsonl already exists (writeMode create); "
        "use truncate or append"
    )
    assert not path.with_name(path.name + ".writer.lock").exists()


def test_truncate_replaces_the_document(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file(
        [(make_start(label="a"), make_outcome()), (make_start(label="b"), make_outcome())]
    )
    cassette = open_cassette(path, writeMode="truncate")
    _record_one(cassette, make_start(label="c"), make_outcome())
    assert cassette.close().errors == ()
    assert [r.callKey.split("-")[0] for r in load(path).interactions] == ["root/c"]


def test_append_continues_chain_numbering_and_occurrences(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file()
    before = load(path)
    cassette = open_cassette(path, writeMode="append")
    _record_one(cassette, make_start(), make_outcome())
    assert cassette.close().errors == ()
    after = load(path)
    assert after.header == before.header
    assert [(r.sequence, r.occurrence) for r in after.interactions] == [(1, 1), (2, 2)]
    assert after.interactions[1].previousHash == before.last_hash


def test_append_to_a_missing_file_starts_a_new_document(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = tmp_path / "new.cassette.jsonl"
    cassette = open_cassette(path, writeMode="append")
    _record_one(cassette, make_start(), make_outcome())
    cassette.close()
    assert load(path).count == 1


def test_append_repairs_a_missing_final_newline(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file()
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    cassette = open_cassette(path, writeMode="append")
    _record_one(cassette, make_start(label="x"), make_outcome())
    cassette.close()
    assert load(path).count == 2


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"requestView": "full"}, "requestStorage"),
        ({"redactSecrets": False}, "redactSecrets"),
        ({"redactionPatterns": ["ACME-\\d+"]}, "redactionPatterns"),
        ({"provider": {"cassette": "other"}}, "provider.cassette"),
    ],
)
def test_append_refuses_an_incompatible_policy(
    record_file: Any, open_cassette: Open, config: dict[str, Any], field: str
) -> None:
    path = record_file()
    with pytest.raises(AppendIncompatible) as info:
        open_cassette(path, writeMode="append", **config)
    assert str(info.value) == (
        f"APPEND_INCOMPATIBLE: rec.cassette.jsonl: header {field} differs from this configuration"
    )
    assert not path.with_name(path.name + ".writer.lock").exists()


def test_second_writer_fails_at_once_and_first_keeps_writing(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = tmp_path / "busy.cassette.jsonl"
    first = open_cassette(path)
    with pytest.raises(CassetteLocked) as info:
        open_cassette(path, writeMode="truncate")
    assert str(info.value).startswith(
        "CASSETTE_LOCKED: busy.cassette.jsonl.writer.lock exists: another writer is active"
    )
    _record_one(first, make_start(), make_outcome())
    first.close()
    assert load(path).count == 1
    assert not path.with_name(path.name + ".writer.lock").exists()


def test_leftover_lock_is_never_broken(tmp_path: Path, open_cassette: Open) -> None:
    path = tmp_path / "crashed.cassette.jsonl"
    lock = path.with_name(path.name + ".writer.lock")
    lock.mkdir()
    (lock / "dead.owner").write_text("pid 1\n")
    with pytest.raises(CassetteLocked):
        open_cassette(path)
    assert (lock / "dead.owner").exists()


def test_release_keeps_unknown_files_in_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "x.cassette.jsonl"
    writer = CassetteWriter.open(path, "create", owner="me", expected_target="0.1.0-rc.8")
    (writer._lock.directory / "someone-else").write_text("")
    writer.close()
    assert sorted(p.name for p in writer._lock.directory.iterdir()) == ["someone-else"]


def test_missing_file_is_named_without_directories(tmp_path: Path) -> None:
    with pytest.raises(CassetteNotFound) as info:
        load(tmp_path / "deep" / "absent.cassette.jsonl")
    assert str(info.value) == "CASSETTE_NOT_FOUND: absent.cassette.jsonl does not exist"


def test_every_interaction_is_on_disk_before_on_outcome_returns(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = tmp_path / "live.cassette.jsonl"
    cassette = open_cassette(path)
    _record_one(cassette, make_start(label="a"), make_outcome())
    assert load(path).count == 1
    _record_one(cassette, make_start(label="b"), make_outcome())
    assert load(path).count == 2
    cassette.close()
