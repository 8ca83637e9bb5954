"""Two format versions: v1 as docs/subagent-cassette-format.md defines it (rc.7), v2 the rc.8 header.

The v1 documents here are written from that schema by hand (closed header, no
``provider.continuable``, ``target.dshSubagent`` exactly ``0.1.0-rc.7``), not by our writer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette import Replay
from dsh_sidecar.python_core.subagent_cassette.cli import cli
from dsh_sidecar.python_core.subagent_cassette.diff import diff_cassettes
from dsh_sidecar.python_core.subagent_cassette.store import load, verify_file

SEED_V1_HEADER: dict[str, Any] = {
    "kind": "cassette/header",
    "format": "dsh-subagent-cassette",
    "version": 1,
    "cassetteId": "0f70b758-74cc-4ae2-b278-fd32a2adfc48",
    "createdAt": "2026-08-18T03:00:00.000Z",
    "target": {"dshSubagent": "0.1.0-rc.7"},
    "provider": {
        "cassette": "cassette",
        "upstream": "spawn",
        "capabilities": {"outputSchema": True, "depthLimit": True, "toolFilter": True, "persona": True},
        "inheritsParentContext": False,
    },
    "requestStorage": "metadata",
    "redactSecrets": True,
    "redactionPatterns": [],
}


def _seed_interaction(sequence: int, **changes: Any) -> dict[str, Any]:
    """An interaction with exactly the fields of the documented example."""
    record: dict[str, Any] = {
        "kind": "cassette/interaction",
        "sequence": sequence,
        "callKey": f"root/audit-8c676fdd50f5~{sequence}",
        "parentKey": "root",
        "parentContextFingerprint": "sha256:" + "a" * 64,
        "occurrence": sequence,
        "requestFingerprint": "sha256:" + "b" * 64,
        "request": {"storage": "metadata", "metadata": {
            "label": "audit", "promptBlocks": 1, "promptBytes": 96, "hasOutputSchema": False,
            "hasPersona": False}},
        "timing": {"startedAt": "2026-08-18T03:00:01.000Z", "startLatencyMs": 14.22, "durationMs": 829.17},
        "published": True,
        "local": True,
        "outcome": {"kind": "result", "result": {"output": [], "stopReason": "completed"}, "redactions": 0},
    }
    record.update(changes)
    return record


def _to_v1(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same recording under a v1 header (what an rc.7 writer would have written)."""
    header = dict(records[0])
    header.update(version=1, target={"dshSubagent": "0.1.0-rc.7"})
    header["provider"] = {k: v for k, v in header["provider"].items() if k != "continuable"}
    return [header, *records[1:]]


@pytest.fixture
def v1_file(tmp_path: Path, sealed: Any) -> Path:
    path = tmp_path / "v1.cassette.jsonl"
    start_error = {"kind": "start-error", "error": {"name": "Error", "message": "x", "code": "OFFLINE"}}
    path.write_bytes(sealed([SEED_V1_HEADER, _seed_interaction(1),
                             _seed_interaction(2, published=True, local=False, outcome=start_error)]))
    return path


def test_our_writer_stamps_version_2_with_the_continuable_fact(record_file: Any, records_of: Any) -> None:
    header = records_of(record_file())[0]
    assert header["version"] == 2
    assert header["target"] == {"dshSubagent": "0.1.0-rc.8"}
    assert isinstance(header["provider"]["continuable"], bool)


def test_a_v1_file_written_from_the_v1_schema_verifies(v1_file: Path) -> None:
    cassette = verify_file(v1_file)
    assert (cassette.header.version, cassette.count) == (1, 2)
    assert cassette.header.target.dshSubagent == "0.1.0-rc.7"


@pytest.mark.parametrize(("version", "provider_extra", "target", "message"), [
    (1, {"continuable": True}, "0.1.0-rc.7", "provider.continuable is not a field of version 1"),
    (1, {}, "0.1.0-rc.6", "version 1 targets dsh-subagent 0.1.0-rc.7 (or 0.1.0-rc.8)"),
    (2, {}, "0.1.0-rc.8", "provider.continuable is required in version 2"),
    (3, {}, "0.1.0-rc.8", "version is not 1 or 2"),
])
def test_each_version_has_exactly_its_own_header(
    tmp_path: Path, sealed: Any, version: int, provider_extra: dict[str, Any], target: str, message: str,
) -> None:
    header = {**SEED_V1_HEADER, "version": version, "target": {"dshSubagent": target},
              "provider": {**SEED_V1_HEADER["provider"], **provider_extra}}
    path = tmp_path / "h.cassette.jsonl"
    path.write_bytes(sealed([header]))
    with pytest.raises(SidecarError) as info:
        verify_file(path)
    assert message in str(info.value)


def test_a_v1_file_an_rc8_writer_stamped_with_its_target_verifies_and_replays(
    record_file: Any, records_of: Any, sealed: Any, open_cassette: Any, make_start: Any, tmp_path: Path,
) -> None:
    # Another implementation of the v1 format retargeted to rc.8 keeps version 1 and the v1
    # header (no provider.continuable) and stamps the host it ran on.
    records = _to_v1(records_of(record_file()))
    records[0]["target"] = {"dshSubagent": "0.1.0-rc.8"}
    path = tmp_path / "v1-rc8.cassette.jsonl"
    path.write_bytes(sealed(records))
    assert verify_file(path).header.target.dshSubagent == "0.1.0-rc.8"
    assert CliRunner().invoke(cli, ["verify", str(path)]).exit_code == 0
    replay = open_cassette(path, mode="replay")
    assert isinstance(replay.on_start(make_start()), Replay)
    assert replay.close().errors == ()


def test_a_v1_file_needs_no_canonical_key_order_whitespace_or_number_form(v1_file: Path) -> None:
    # Version 1: lines need not be canonical (key order, whitespace, number form); hashes are
    # over the re-canonicalised record.
    records = [json.loads(line) for line in v1_file.read_bytes().splitlines()]
    lines = [json.dumps(dict(reversed(list(r.items()))), indent=1).replace("\n", " ") for r in records]
    v1_file.write_text("\n\n".join(lines).replace('"durationMs": 829.17', '"durationMs": 8.2917e2') + "\n")
    cassette = load(v1_file)
    assert cassette.count == 2 and cassette.interactions[0].timing.durationMs == 829.17


def test_a_v1_start_error_may_be_published_as_v1_allows(v1_file: Path) -> None:
    assert load(v1_file).interactions[1].published is True


@pytest.mark.parametrize("command", [["verify"], ["inspect"], ["inspect", "--json"], ["inspect", "--show-calls"]])
def test_the_cli_reads_v1(v1_file: Path, command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, str(v1_file)])
    assert result.exit_code == 0, result.output
    if command == ["inspect"]:
        assert "continuable=unknown (format v1)" in result.output


def test_diff_compares_identities_across_versions(
    record_file: Any, records_of: Any, sealed: Any, tmp_path: Path,
) -> None:
    v2 = record_file()
    v1 = tmp_path / "as-v1.cassette.jsonl"
    v1.write_bytes(sealed(_to_v1(records_of(v2))))

    report = diff_cassettes(load(v1), load(v2))

    assert report.equivalent is False
    assert (len(report.added), len(report.removed), len(report.outcomeChanged), report.unchanged) == (0, 0, 0, 1)
    assert report.policyDrift == ("version", "target.dshSubagent")
    result = CliRunner().invoke(cli, ["diff", str(v1), str(v2), "--json"])
    assert result.exit_code == 2
    assert json.loads(result.output)["unchanged"] == 1


def test_replay_serves_a_v1_recording_on_the_rc8_host(
    record_file: Any, records_of: Any, sealed: Any, open_cassette: Any, make_start: Any,
    tmp_path: Path,
) -> None:
    v2 = record_file()
    v1 = tmp_path / "as-v1.cassette.jsonl"
    v1.write_bytes(sealed(_to_v1(records_of(v2))))

    replay = open_cassette(v1, mode="replay")
    decision = replay.on_start(make_start())

    assert isinstance(decision, Replay)
    assert replay.close().errors == ()


def test_appending_a_v2_writer_to_a_v1_file_is_refused(
    record_file: Any, records_of: Any, sealed: Any, open_cassette: Any, tmp_path: Path,
) -> None:
    v1 = tmp_path / "as-v1.cassette.jsonl"
    v1.write_bytes(sealed(_to_v1(records_of(record_file()))))
    with pytest.raises(SidecarError) as info:
        open_cassette(v1, writeMode="append")
    assert str(info.value).startswith("APPEND_INCOMPATIBLE")
    assert "version" in str(info.value)


def _v1_line_edit(v1_file: Path, old: bytes, new: bytes) -> None:
    """Replace number text in a v1 document (v1 hashes the re-canonicalised record, so it holds)."""
    data = v1_file.read_bytes()
    assert old in data
    v1_file.write_bytes(data.replace(old, new))


@pytest.mark.parametrize(
    "text", [b'"durationMs":829.170000000000000000001', b'"startLatencyMs":14.2200000000000000001']
)
def test_a_v1_number_that_does_not_survive_parsing_is_refused(v1_file: Path, text: bytes) -> None:
    # The format's numbers are lossless: text that reads back as another number is refused.
    field = text.split(b":")[0]
    _v1_line_edit(v1_file, field + b":" + (b"829.17" if b"duration" in field else b"14.22"), text)
    with pytest.raises(SidecarError) as info:
        verify_file(v1_file)
    assert str(info.value) == "CASSETTE_FORMAT_ERROR: v1.cassette.jsonl:2: number does not survive parsing at /"


def test_v1_numbers_are_read_as_javascript_reads_them(v1_file: Path) -> None:
    # Another writer may print an integral number as 1.0 or a float with trailing zeros: the
    # value is what counts (JavaScript has one number type), so `1.0` is a valid sequence.
    _v1_line_edit(v1_file, b'"sequence":1,', b'"sequence":1.0,')
    _v1_line_edit(v1_file, b'"durationMs":829.17', b'"durationMs":829.1700')
    cassette = load(v1_file)
    assert (cassette.interactions[0].sequence, cassette.interactions[0].timing.durationMs) == (1, 829.17)


def test_a_line_that_is_not_utf8_is_refused_by_name(v1_file: Path) -> None:
    lines = v1_file.read_bytes().splitlines(keepends=True)
    v1_file.write_bytes(lines[0] + lines[1].decode().replace(":829.17", ":829.1700").encode("utf-16"))
    with pytest.raises(SidecarError) as info:
        verify_file(v1_file)
    assert str(info.value) == "CASSETTE_FORMAT_ERROR: v1.cassette.jsonl:2: not UTF-8 at /"


def test_two_v1_files_of_different_targets_are_not_comparable(
    record_file: Any, records_of: Any, sealed: Any, tmp_path: Path,
) -> None:
    records = _to_v1(records_of(record_file()))
    rc7, rc8 = tmp_path / "rc7.cassette.jsonl", tmp_path / "rc8.cassette.jsonl"
    rc7.write_bytes(sealed(records))
    records[0]["target"] = {"dshSubagent": "0.1.0-rc.8"}
    rc8.write_bytes(sealed(records))
    result = CliRunner().invoke(cli, ["diff", str(rc7), str(rc8)])
    assert result.exit_code == 2
    assert "NOT_COMPARABLE: header target.dshSubagent differs" in result.output
