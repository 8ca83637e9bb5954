"""CLI: verify, inspect, diff; exit codes, metadata-only output, escaped control characters."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from dsh_sidecar.python_core.subagent_cassette import cli as cli_module
from dsh_sidecar.python_core.subagent_cassette.cli import cli
from dsh_sidecar.python_core.subagent_cassette.format import Cassette
from dsh_sidecar.python_core.subagent_cassette.store import load

from .conftest import BODY, PROMPT, SECRET


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _assert_private(result: Result) -> None:
    for text in (PROMPT, BODY, SECRET, "provider offline", "[REDACTED]", "weird-reason"):
        assert text not in result.output
        assert text not in (result.stderr if result.stderr_bytes is not None else "")


@pytest.fixture
def pair(record_file: Any, make_start: Any, make_outcome: Any) -> tuple[Path, Path]:
    calls = [(make_start(label="a"), make_outcome()), (make_start(label="b"), make_outcome())]
    return record_file(calls, name="a.cassette.jsonl"), record_file(calls, name="b.cassette.jsonl")


def test_verify_reports_counts(pair: tuple[Path, Path]) -> None:
    result = run("verify", str(pair[0]))
    assert result.exit_code == 0
    assert result.output == (
        "ok: a.cassette.jsonl: 2 interaction(s), chain intact, target dsh-subagent 0.1.0-rc.8\n"
    )


def test_verify_of_a_tampered_file_exits_1_with_the_line(pair: tuple[Path, Path]) -> None:
    data = pair[0].read_bytes().replace(b"child says", b"child lies", 1)
    pair[0].write_bytes(data)
    result = run("verify", str(pair[0]))
    assert result.exit_code == 1
    assert result.output.splitlines()[0] == (
        "CASSETTE_INTEGRITY_ERROR: a.cassette.jsonl:2: interaction hash does not match"
    )


def test_verify_of_a_missing_file_exits_1(tmp_path: Path) -> None:
    result = run("verify", str(tmp_path / "nope.jsonl"))
    assert (result.exit_code, result.output) == (
        1,
        "CASSETTE_NOT_FOUND: nope.jsonl does not exist\n",
    )


def test_inspect_prints_metadata_only(record_file: Any, make_start: Any, make_outcome: Any) -> None:
    path = record_file(
        [
            (make_start(label="ok"), make_outcome(text=f"{BODY} {SECRET}")),
            (make_start(label="odd"), make_outcome(stop="weird-reason", diagnostic=PROMPT)),
            (
                make_start(label="fail"),
                make_outcome(
                    kind="start-error", published=False, local=False, text="provider offline"
                ),
            ),
        ]
    )
    result = run("inspect", str(path), "--show-calls")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "rec.cassette.jsonl: 3 interaction(s)"
    assert "  outcomes    completed=1, other=1, start-error=1" in lines
    assert "  redaction   secrets=true, 0 pattern(s), 1 redacted result(s)" in lines
    assert lines[-1].startswith("  #3 root/fail-") and lines[-1].endswith(" start-error 40.0ms")
    _assert_private(result)
    as_json = run("inspect", str(path), "--json", "--show-calls")
    summary = json.loads(as_json.output)
    assert summary["outcomes"] == {"completed": 1, "other": 1, "start-error": 1}
    assert [c["outcome"] for c in summary["calls"]] == ["completed", "other", "start-error"]
    _assert_private(as_json)


def test_inspect_escapes_control_characters_in_labels(
    record_file: Any, make_start: Any, make_outcome: Any, records_of: Any, sealed: Any
) -> None:
    path = record_file()
    records = records_of(path)
    records[1]["callKey"] = "root/evil\x1b[2J\u2028-x"
    path.write_bytes(sealed(records))
    result = run("inspect", str(path), "--show-calls")
    assert result.exit_code == 0
    assert "\x1b" not in result.output and "\u2028" not in result.output
    assert "root/evil\\u001b[2J\\u2028-x" in result.output
    assert "\x1b" not in run("inspect", str(path), "--json", "--show-calls").output


def test_diff_of_equivalent_cassettes_exits_0(pair: tuple[Path, Path]) -> None:
    result = run("diff", str(pair[0]), str(pair[1]))
    assert result.exit_code == 0
    assert result.output.splitlines()[0] == (
        "equivalent: 2 unchanged, 0 added, 0 removed, 0 outcome changed, 0 policy drift"
    )


def test_diff_classifies_added_removed_and_changed(
    record_file: Any, make_start: Any, make_outcome: Any
) -> None:
    a = record_file(
        [
            (make_start(label="keep"), make_outcome()),
            (make_start(label="gone"), make_outcome()),
            (make_start(label="flip"), make_outcome()),
        ],
        name="a.cassette.jsonl",
    )
    b = record_file(
        [
            (make_start(label="keep"), make_outcome(duration=99.0)),
            (make_start(label="flip"), make_outcome(stop="refusal", text=SECRET)),
            (make_start(label="new"), make_outcome()),
        ],
        name="b.cassette.jsonl",
    )
    result = run("diff", str(a), str(b))
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == (
        "different: 1 unchanged, 1 added, 1 removed, 1 outcome changed, 0 policy drift"
    )
    assert [line[:4] for line in lines[1:4]] == ["  - ", "  + ", "  ~ "]
    assert lines[3].endswith(": completed -> refusal")
    assert lines[4] == "  timing (informational): 120.0ms -> 179.0ms total"
    _assert_private(result)
    report = json.loads(run("diff", str(a), str(b), "--json").output)
    assert (len(report["added"]), len(report["removed"]), len(report["outcomeChanged"])) == (
        1,
        1,
        1,
    )


def test_diff_reports_policy_drift(record_file: Any, make_start: Any, make_outcome: Any) -> None:
    calls = [(make_start(), make_outcome())]
    a = record_file(calls, name="a.cassette.jsonl")
    b = record_file(calls, name="b.cassette.jsonl", requestView="full")
    result = run("diff", str(a), str(b))
    assert result.exit_code == 2
    assert result.output.splitlines()[:2] == [
        "different: 1 unchanged, 0 added, 0 removed, 0 outcome changed, 1 policy drift",
        "  ! policy requestStorage differs",
    ]


def test_diff_with_a_broken_file_exits_1(pair: tuple[Path, Path]) -> None:
    pair[1].write_bytes(b"{}\n")
    result = run("diff", str(pair[0]), str(pair[1]))
    assert (result.exit_code, result.output) == (
        1,
        "CASSETTE_FORMAT_ERROR: b.cassette.jsonl:1: first record is not a cassette/header\n",
    )


def test_diff_of_incomparable_cassettes_exits_2(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    # rc.8 is the one supported target, so no two loadable files differ in target: the loader
    # is swapped for one that moves B to another target of the same format version.
    def loaded(file: str) -> Cassette:
        cassette = load(file)
        if file != str(pair[1]):
            return cassette
        target = msgspec.structs.replace(cassette.header.target, dshSubagent="0.1.0-rc.9")
        return msgspec.structs.replace(cassette, header=msgspec.structs.replace(cassette.header, target=target))

    monkeypatch.setattr(cli_module, "load", loaded)
    result = run("diff", str(pair[0]), str(pair[1]))
    assert (result.exit_code, result.output) == (
        2, "NOT_COMPARABLE: header target.dshSubagent differs; the cassettes are not comparable\n",
    )


def test_usage_errors_exit_2() -> None:
    assert run("diff", "only-one").exit_code == 2


def test_the_commands_are_also_the_dsh_subagent_cassette_program(pair: tuple[Path, Path]) -> None:
    # The name the format's own implementation ships its CLI under, next to dsh-sidecar's group.
    program = Path(sys.executable).with_name("dsh-subagent-cassette")
    for args, code in ((["verify", str(pair[0])], 0), (["diff", str(pair[0]), str(pair[1])], 0),
                       (["verify", str(pair[0].with_name("missing.jsonl"))], 1)):
        done = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=60, check=False)
        assert (done.returncode, done.stdout, done.stderr) == (code, run(*args).stdout, run(*args).stderr)
