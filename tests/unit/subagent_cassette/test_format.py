"""Format contract: canonical JSON, closed schemas, hash chain, sequences, occurrences."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.python_core.subagent_cassette.errors import (
    CassetteFormatError,
    CassetteIntegrityError,
    TargetMismatch,
)
from dsh_sidecar.python_core.subagent_cassette.format import check_blocks
from dsh_sidecar.python_core.subagent_cassette.store import load, verify_file

Records = list[dict[str, Any]]


@pytest.fixture
def base(
    record_file: Callable[..., Path],
    records_of: Callable[[Path], Records],
    make_start: Callable[..., Any],
    make_outcome: Callable[..., Any],
) -> Records:
    path = record_file(
        [
            (make_start(label="a"), make_outcome()),
            (make_start(label="b"), make_outcome(stop="aborted")),
        ]
    )
    return records_of(path)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[bytes], Path]:
    def factory(data: bytes) -> Path:
        path = tmp_path / "doc.cassette.jsonl"
        path.write_bytes(data)
        return path

    return factory


def reject(path: Path) -> str:
    with pytest.raises(CassetteFormatError) as info:
        load(path)
    return str(info.value)


def test_recorded_document_verifies_with_counts(base: Records, sealed: Any, write: Any) -> None:
    cassette = verify_file(write(sealed(base)))
    assert (cassette.count, cassette.interactions) == (2, ())


@pytest.mark.parametrize("line", [0, 1])
def test_a_version_2_line_that_is_not_canonical_is_rejected(
    base: Records, sealed: Any, write: Any, line: int
) -> None:
    lines = sealed(base).splitlines(keepends=True)
    record = json.loads(lines[line])
    lines[line] = (json.dumps(dict(reversed(list(record.items())))) + "\n").encode()
    assert reject(write(b"".join(lines))) == (
        f"CASSETTE_FORMAT_ERROR: doc.cassette.jsonl:{line + 1}: not canonical JSON "
        "(version 2 lines are written canonical; this one was edited)"
    )


def test_a_version_2_float_written_non_canonically_is_rejected(
    base: Records, sealed: Any, write: Any
) -> None:
    data = sealed(base).replace(b'"durationMs":40', b'"durationMs":40.0')
    assert "not canonical JSON" in reject(write(data))


@pytest.mark.parametrize(
    ("needle", "replacement", "reason"),
    [
        (
            b'"stopReason":"completed"',
            b'"stopReason":"completed","stopReason":"completed"',
            'duplicate object key at an object',
        ),
        (
            b'"stopReason":"completed"',
            b'"stopReason":"completed","\\u0073topReason":"completed"',
            'duplicate object key at an object',
        ),
        (b'"durationMs":40', b'"durationMs":-0.0', "negative zero at /"),
        (b'"durationMs":40', b'"durationMs":NaN', "NaN is not JSON at /"),
        (b'"durationMs":40', b'"durationMs":9007199254740993', "integer outside +-(2^53-1) at /"),
        (
            b'"stopReason":"completed"', b'"stopReason":"\\ud800"',
            "lone surrogate in a string at /outcome/result/stopReason",
        ),
    ],
    ids=["duplicate", "escaped-duplicate", "negative-zero", "nan", "unsafe-int", "surrogate"],
)
def test_strict_json_violations_are_format_errors(
    base: Records, sealed: Any, write: Any, needle: bytes, replacement: bytes, reason: str
) -> None:
    data = sealed(base)
    assert needle in data
    assert reject(write(data.replace(needle, replacement, 1))) == (
        f"CASSETTE_FORMAT_ERROR: doc.cassette.jsonl:2: {reason}"
    )


def _mutate(records: Records, index: int, path: Sequence[str], value: Any) -> Records:
    out = copy.deepcopy(records)
    node = out[index]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(
    ("index", "path", "reason"),
    [
        (0, ["extra"], "unknown field `extra` at $"),
        (0, ["target", "extra"], "unknown field `extra` at $.target"),
        (0, ["provider", "extra"], "unknown field `extra` at $.provider"),
        (
            0,
            ["provider", "capabilities", "extra"],
            "unknown field `extra` at $.provider.capabilities",
        ),
        (1, ["extra"], "unknown field `extra` at $"),
        (1, ["timing", "extra"], "unknown field `extra` at $.timing"),
        (1, ["outcome", "extra"], "unknown field `extra` at $.outcome"),
        (1, ["request", "extra"], "unknown field `extra` at $.request"),
        (1, ["request", "metadata", "extra"], "unknown field `extra` at $.request.metadata"),
        (
            1,
            ["request", "metadata", "toolFilter"],
            "Expected `object`, got `bool` at $.request.metadata.toolFilter",
        ),
    ],
)
def test_closed_wrappers_reject_unknown_fields(
    base: Records, sealed: Any, write: Any, index: int, path: list[str], reason: str
) -> None:
    value: Any = True
    records = _mutate(base, index, path, value)
    line = index + 1
    assert (
        reject(write(sealed(records)))
        == f"CASSETTE_FORMAT_ERROR: doc.cassette.jsonl:{line}: {reason}"
    )


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (["sequence"], 0, "Expected `int` >= 1 at $.sequence"),
        (["occurrence"], "1", "Expected `int`, got `str` at $.occurrence"),
        (
            ["requestFingerprint"],
            "sha256:ABC",
            "expected a sha256:<64 lowercase hex> digest at $.requestFingerprint",
        ),
        (["timing", "durationMs"], -1, "Expected `float` >= 0.0 at $.timing.durationMs"),
        (["timing", "durationMs"], 1, "timing.durationMs is less than timing.startLatencyMs"),
        (["timing", "startedAt"], "yesterday", "timing.startedAt is not an ISO-8601 timestamp"),
        (["outcome", "kind"], "surprise", "invalid value at $.outcome.kind"),
        (
            ["outcome", "result", "output"],
            [{"text": "x"}],
            "outcome.result.output[0] is not a typed content block",
        ),
        (["outcome", "result", "stopReason"], 7, "outcome.result.stopReason is not a string"),
        (
            ["outcome", "result", "diagnostic"],
            "d" * 4097,
            "outcome.result.diagnostic exceeds 4096 UTF-8 bytes",
        ),
        (["published"], False, "published must be true for a result outcome"),
        (["request", "storage"], "full", "unknown field `metadata` at $.request"),
        (
            ["request", "metadata", "promptBytes"],
            -1,
            "Expected `int` >= 0 at $.request.metadata.promptBytes",
        ),
    ],
)
def test_interaction_rules_are_enforced(
    base: Records, sealed: Any, write: Any, path: list[str], value: Any, reason: str
) -> None:
    assert reject(write(sealed(_mutate(base, 1, path, value)))) == (
        f"CASSETTE_FORMAT_ERROR: doc.cassette.jsonl:2: {reason}"
    )


def test_local_requires_publication(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(base, 1, ["published"], False)
    records = _mutate(
        records, 1, ["outcome"], {"kind": "start-error", "error": {"name": "Error", "message": "m"}}
    )
    assert reject(write(sealed(records))).endswith(":2: local requires a published run")


def test_start_error_must_be_unpublished(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(
        base, 1, ["outcome"], {"kind": "start-error", "error": {"name": "Error", "message": "m"}}
    )
    assert reject(write(sealed(records))).endswith(
        ":2: published must be false for a start-error outcome"
    )


def test_request_storage_must_match_header(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(base, 0, ["requestStorage"], "full")
    assert reject(write(sealed(records))).endswith(
        ":2: request.storage metadata differs from header requestStorage full"
    )


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("format", "other-cassette", "format is not dsh-subagent-cassette"),
        ("version", 3, "version is not 1 or 2"),
        ("version", {}, "version is not 1 or 2"),
        ("version", [2], "version is not 1 or 2"),
        ("version", "2", "version is not 1 or 2"),
        ("kind", "cassette/interaction", "first record is not a cassette/header"),
        ("createdAt", "soon", "createdAt is not an ISO-8601 timestamp"),
    ],
)
def test_header_identity_is_exact(
    base: Records, sealed: Any, write: Any, field: str, value: Any, reason: str
) -> None:
    records = _mutate(base, 0, [field], value)
    assert (
        reject(write(sealed(records))) == f"CASSETTE_FORMAT_ERROR: doc.cassette.jsonl:1: {reason}"
    )


def test_other_target_is_refused(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(base, 0, ["target", "dshSubagent"], "0.1.0-rc.7")
    with pytest.raises(TargetMismatch) as info:
        load(write(sealed(records)))
    assert str(info.value) == (
        "TARGET_MISMATCH: doc.cassette.jsonl targets dsh-subagent 0.1.0-rc.7, "
        "this host runs 0.1.0-rc.8"
    )


def test_expected_target_must_match_exactly(base: Records, sealed: Any, write: Any) -> None:
    with pytest.raises(TargetMismatch):
        load(write(sealed(base)), expected_target="0.1.0-rc.9")


def test_empty_document_has_no_header(write: Any) -> None:
    assert reject(write(b"\n\n")) == (
        "CASSETTE_FORMAT_ERROR: doc.cassette.jsonl:1: missing cassette/header"
    )


def test_edited_content_breaks_the_record_hash(base: Records, sealed: Any, write: Any) -> None:
    data = sealed(base).replace(b"child says", b"child said", 1)
    with pytest.raises(CassetteIntegrityError) as info:
        load(write(data))
    assert str(info.value) == (
        "CASSETTE_INTEGRITY_ERROR: doc.cassette.jsonl:2: interaction hash does not match"
    )


def test_edited_header_breaks_the_header_hash(base: Records, sealed: Any, write: Any) -> None:
    data = sealed(base).replace(b'"redactSecrets":true', b'"redactSecrets":false', 1)
    with pytest.raises(CassetteIntegrityError, match="1: header hash does not match"):
        load(write(data))


def test_reordered_lines_break_the_chain(base: Records, sealed: Any, write: Any) -> None:
    lines = sealed(base).splitlines(keepends=True)
    with pytest.raises(CassetteIntegrityError) as info:
        load(write(lines[0] + lines[2] + lines[1]))
    assert str(info.value).endswith(":2: previousHash does not link to the preceding record")


def test_deleted_middle_record_breaks_the_chain(
    base: Records, sealed: Any, write: Any, make_start: Any, make_outcome: Any
) -> None:
    lines = sealed(base).splitlines(keepends=True)
    with pytest.raises(CassetteIntegrityError):
        load(write(lines[0] + lines[2]))


def test_truncated_tail_line_is_a_format_error(base: Records, sealed: Any, write: Any) -> None:
    data = sealed(base)
    assert "not valid JSON" in reject(write(data[:-40]))


def test_physical_order_may_differ_from_sequence(base: Records, sealed: Any, write: Any) -> None:
    records = [base[0], base[2], base[1]]
    assert [r.sequence for r in load(write(sealed(records))).interactions] == [2, 1]


def test_sequence_gap_is_rejected(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(base, 2, ["sequence"], 3)
    assert reject(write(sealed(records))).endswith(
        ":3: sequences are not contiguous: 2 interaction(s), highest sequence 3"
    )


def test_repeated_sequence_is_rejected(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(base, 2, ["sequence"], 1)
    assert reject(write(sealed(records))).endswith(":3: sequence 1 is repeated")


def test_repeated_call_key_is_rejected(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(base, 2, ["callKey"], base[1]["callKey"])
    assert reject(write(sealed(records))).endswith(
        ":3: callKey " + base[1]["callKey"] + " is repeated"
    )


def _same_group(base: Records) -> Records:
    records = copy.deepcopy(base)
    for key in ("parentKey", "parentContextFingerprint", "requestFingerprint"):
        records[2][key] = records[1][key]
    return records


def test_repeated_occurrence_in_a_group_is_rejected(base: Records, sealed: Any, write: Any) -> None:
    assert reject(write(sealed(_same_group(base)))).endswith(
        ":3: occurrence 1 is repeated in its group"
    )


def test_occurrence_gap_in_a_group_is_rejected(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(_same_group(base), 2, ["occurrence"], 3)
    assert reject(write(sealed(records))).endswith(
        ":3: occurrences are not contiguous from 1 in a group"
    )


def test_occurrences_two_in_one_group_load(base: Records, sealed: Any, write: Any) -> None:
    records = _mutate(_same_group(base), 2, ["occurrence"], 2)
    assert load(write(sealed(records))).count == 2


def test_unknown_block_types_and_extra_result_fields_survive(
    base: Records, sealed: Any, write: Any
) -> None:
    records = _mutate(
        base, 1, ["outcome", "result", "output"], [{"type": "future-block", "payload": 1}]
    )
    records = _mutate(records, 1, ["outcome", "result", "structured"], {"ok": True})
    result = load(write(sealed(records))).interactions[0].outcome
    assert result.result["structured"] == {"ok": True}  # type: ignore[union-attr]


def test_block_validation_is_iterative_over_deep_tool_results() -> None:
    blocks: list[Any] = [{"type": "text", "text": "leaf"}]
    for _ in range(20_000):
        blocks = [{"type": "tool-result", "toolCallId": "c", "content": blocks}]
    assert check_blocks(blocks, "output") is None
    blocks[0]["content"][0]["content"] = [{"type": "text"}]
    assert check_blocks(blocks, "output") == "output[0].content[0].content[0].text is not a string"


def test_image_blocks_need_an_attachment_reference() -> None:
    assert check_blocks([{"type": "image", "attachment": {"attachmentId": "a"}}], "p") == (
        "p[0].attachment is not an image reference"
    )

