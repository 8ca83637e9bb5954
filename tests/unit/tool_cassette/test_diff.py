"""``dsh-tool-cassette diff``: alignment by ordinal, what differs by name, exit codes, privacy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
from click.testing import CliRunner

from dsh_sidecar.python_core.tool_cassette import ToolCassetteSession
from dsh_sidecar.python_core.tool_cassette.cli import main
from dsh_sidecar.python_core.tool_cassette.diff import diff_cassettes
from dsh_sidecar.python_core.tool_cassette.store import load


def run(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_a_cassette_is_equivalent_to_itself_and_to_a_copy(make_cassette: Any, tmp_path: Path) -> None:
    path = make_cassette()
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    result = run("diff", str(path), str(copy))
    assert (result.exit_code, result.output) == (
        0, "equivalent: 3 -> 3 calls, 3 unchanged, 0 changed, 0 added, 0 removed\n",
    )


def test_a_changed_added_or_removed_tool_contract_is_drift(make_cassette: Any, kit: Any) -> None:
    contract = kit.WEATHER_CONTRACT
    wider = msgspec.structs.replace(contract, output=msgspec.Raw(b'{"type":"object"}'), timeoutMs=1)
    a = make_cassette(file="a.jsonl", contracts={"weather_lookup": contract, "mcp_fs_read": contract})
    b = make_cassette(file="b.jsonl", contracts={"weather_lookup": wider, "weather_radar": contract})
    result = run("diff", str(a), str(b))
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "different: 3 -> 3 calls, 3 unchanged, 0 changed, 0 added, 0 removed",
        "  - tool contract mcp_fs_read (only in A)",
        "  ~ tool contract weather_lookup (output, timeoutMs changed)",
        "  + tool contract weather_radar (only in B; offered to the model, called in neither file)",
    ]
    same = make_cassette(file="c.jsonl", contracts={"weather_lookup": contract, "mcp_fs_read": contract})
    assert run("diff", str(a), str(same)).exit_code == 0


def test_changed_args_outcome_tool_and_path_are_named_by_field_and_pointer(
    make_cassette: Any, kit: Any, tmp_path: Path,
) -> None:
    a = make_cassette([kit.Call(args=b'{"city":"' + kit.SECRET.encode() + b'"}'),
                       kit.Call(path="root/1"), kit.Call(path="root/2")], file="a.jsonl")
    b = make_cassette([
        kit.Call(args=b'{"city":"Paris","days":2}'),
        kit.Call(path="root/1", outcome=kit.fail(code="E_DOWN")),
        kit.Call(tool="weather_forecast", path="root/3"),
    ], file="b.jsonl")
    result = run("diff", str(a), str(b))
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == "different: 3 -> 3 calls, 0 unchanged, 3 changed, 0 added, 0 removed"
    assert lines[1] == "  ~ #0 weather_lookup at root/0"
    assert re.fullmatch(r"      args sha256:[0-9a-f]{12}… -> sha256:[0-9a-f]{12}…: changed /city, added /days",
                        lines[2])
    assert lines[3] == "  ~ #1 weather_lookup at root/1"
    assert lines[4].startswith("      outcome value -> error E_DOWN: ")
    assert "changed /isError" in lines[4] and "removed /value" in lines[4]
    assert lines[5:] == [
        "  ~ #2 weather_forecast at root/3",
        "      tool weather_lookup -> weather_forecast",
        "      path root/2 -> root/3",
    ]
    assert kit.SECRET not in result.output and "Paris" not in result.output
    assert str(tmp_path) not in result.output


def test_an_outcome_of_the_same_kind_is_shown_by_fingerprint(make_cassette: Any, kit: Any) -> None:
    a = make_cassette([kit.Call(outcome=kit.ok(b'{"temp":1}'))], file="a.jsonl")
    b = make_cassette([kit.Call(outcome=kit.ok(b'{"temp":2}'))], file="b.jsonl")
    result = run("diff", str(a), str(b))
    assert result.exit_code == 2
    assert re.fullmatch(
        r"      outcome sha256:[0-9a-f]{12}… -> sha256:[0-9a-f]{12}…: changed /value/temp",
        result.output.splitlines()[2],
    )


def test_records_only_in_one_file_are_added_or_removed(make_cassette: Any, kit: Any) -> None:
    one = make_cassette([kit.Call()], file="one.jsonl")
    two = make_cassette([kit.Call(), kit.Call(path="root/1")], file="two.jsonl")
    added = run("diff", str(one), str(two))
    removed = run("diff", str(two), str(one))
    assert (added.exit_code, removed.exit_code) == (2, 2)
    assert added.output.splitlines()[1:] == ["  + #1 weather_lookup at root/1 (only in B)"]
    assert removed.output.splitlines()[1:] == ["  - #1 weather_lookup at root/1 (only in A)"]


def test_another_include_list_is_drift(make_cassette: Any, make_config: Any, kit: Any, tmp_path: Path) -> None:
    a = make_cassette([kit.Call()], file="a.jsonl")
    session = ToolCassetteSession.open(make_config("record", "b.jsonl", include=("weather_*",)))
    kit.drive(session, [kit.Call()])
    assert session.close().errors == ()
    report = diff_cassettes(load(str(a)), load(str(tmp_path / "b.jsonl")))
    assert (report.equivalent, report.includeDiffers, report.unchanged) == (False, True, 1)
    result = run("diff", str(a), str(tmp_path / "b.jsonl"))
    assert result.exit_code == 2
    assert result.output.splitlines()[1] == "  ! include differs (replay with one file's include refuses the other)"


def test_the_same_patterns_in_another_order_are_no_drift(make_cassette: Any, make_config: Any, kit: Any,
                                                          tmp_path: Path) -> None:
    a = make_cassette([kit.Call()], file="a.jsonl")
    session = ToolCassetteSession.open(make_config("record", "b.jsonl", include=("mcp_*_read", "weather_*")))
    kit.drive(session, [kit.Call()])
    assert session.close().errors == ()
    report = diff_cassettes(load(str(a)), load(str(tmp_path / "b.jsonl")))
    assert (report.equivalent, report.includeDiffers) == (True, False)


def test_diff_json_is_one_object_with_pointers_and_full_digests(make_cassette: Any, kit: Any) -> None:
    a = make_cassette([kit.Call(args=b'{"city":"x"}')], file="a.jsonl")
    b = make_cassette([kit.Call(args=b'{"city":"y"}'), kit.Call(path="root/1")], file="b.jsonl")
    result = run("diff", "--json", str(a), str(b))
    assert result.exit_code == 2
    data = json.loads(result.output)
    assert (data["equivalent"], data["callsA"], data["callsB"], data["unchanged"]) == (False, 1, 2, 0)
    changed, added = data["changes"]
    assert (changed["kind"], changed["ordinal"], added["kind"], added["ordinal"]) == ("changed", 0, "added", 1)
    (args,) = changed["fields"]
    assert args["field"] == "args" and len(args["before"]) == len("sha256:") + 64
    assert args["pointers"] == [{"kind": "changed", "pointer": "/city"}]


def test_an_unreadable_or_invalid_side_exits_one_naming_which(make_cassette: Any, tmp_path: Path) -> None:
    good = make_cassette()
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(good.read_bytes()[:-1])
    missing = run("diff", str(good), str(tmp_path / "gone.jsonl"))
    invalid = run("diff", str(bad), str(good))
    assert (missing.exit_code, missing.output) == (1, "B: CASSETTE_IO: cannot read gone.jsonl: no such file\n")
    assert (invalid.exit_code, invalid.output) == (1, (
        "A: CASSETTE_INVALID: bad.jsonl: line 8: truncated line (no newline); a file that fails verify cannot be "
        "compared: if you edited it by hand, `dsh-tool-cassette reseal bad.jsonl` makes it verify again (the file is "
        "then yours), else re-record it\n"))


def test_usage_errors_exit_two() -> None:
    assert run("diff", "only-one").exit_code == 2
    assert run("diff").exit_code == 2
