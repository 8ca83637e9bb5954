"""Fuzz: ``dsh-tool-cassette diff`` of mutated cassettes and of random recordings (moved from
``tests/unit/tool_cassette/test_diff.py``). Seed: the ``fuzz`` fixture prints it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError, printable
from dsh_sidecar.python_core.tool_cassette import ToolCassetteSession
from dsh_sidecar.python_core.tool_cassette.cli import main
from dsh_sidecar.python_core.tool_cassette.store import load

N = 2_000


def test_fuzz_diff_of_mutated_cassettes_is_a_verdict_or_one_named_error(
    fuzz: Any, make_cassette: Any, tmp_path: Path,
) -> None:
    valid = Path(make_cassette()).read_bytes()
    target = tmp_path / "m.jsonl"
    reference = tmp_path / "ref.jsonl"
    reference.write_bytes(valid)
    runner = CliRunner()
    outcomes: dict[str, int] = {}
    for i in range(N):
        target.write_bytes(fuzz.mutate(valid))
        sides = [str(reference), str(target)] if i % 2 else [str(target), str(reference)]
        result = runner.invoke(main, ["diff", *sides] + (["--json"] if i % 3 == 0 else []))
        assert result.exception is None or isinstance(result.exception, SystemExit), (fuzz, result.exception)
        if result.exit_code == 1:
            assert re.fullmatch(r"[AB]: CASSETTE_(INVALID|IO): [^\n]+\n", result.output), (fuzz, result.output)
            code = "error"
        else:
            assert result.exit_code in (0, 2), (fuzz, result.output)
            try:
                load(str(target))
            except SidecarError:
                raise AssertionError(f"diff compared a file the loader refuses ({fuzz})") from None
            code = "equivalent" if result.exit_code == 0 else "different"
        outcomes[code] = outcomes.get(code, 0) + 1
        fuzz.count += 1
    print(f"tool cassette diff fuzz: {fuzz.count} inputs, outcomes {sorted(outcomes.items())}")
    assert outcomes.get("error", 0) > N // 2


def test_fuzz_diff_of_random_recordings_is_consistent_and_prints_one_line_per_fact(
    fuzz: Any, make_config: Any, kit: Any, tmp_path: Path,
) -> None:
    runner = CliRunner()
    verdicts: dict[int, int] = {}
    for i in range(200):
        files = []
        calls: list[Any] = []
        for side in "ab":
            # A recording needs a selected call (an empty one is CASSETTE_NOTHING_SELECTED); the
            # second side often repeats the first, so equivalent pairs are drawn too.
            if side == "a" or fuzz.rng.random() < 0.5:
                calls = [kit.Call(path=f"root/{n}", args=json.dumps({"k": fuzz.value()}).encode(),
                                  outcome=kit.ok(json.dumps(fuzz.value()).encode()))
                         for n in range(fuzz.rng.randint(1, 2))]
            session = ToolCassetteSession.open(make_config("record", f"{i}{side}.jsonl"))
            try:
                kit.drive(session, calls)
            except SidecarError:
                pass
            if session.close().published:
                files.append(session.config.file)
        if len(files) < 2:
            continue
        text = runner.invoke(main, ["diff", *files])
        data = runner.invoke(main, ["diff", "--json", *files])
        assert text.exit_code == data.exit_code and text.exit_code in (0, 2), (fuzz, text.output)
        report = json.loads(data.output)
        assert report["equivalent"] == (text.exit_code == 0)
        same = [c.args for c in load(files[0]).calls] == [c.args for c in load(files[1]).calls]
        assert not report["equivalent"] or same
        assert all(printable(line) == line for line in text.output.splitlines()), (fuzz, text.output)
        verdicts[text.exit_code] = verdicts.get(text.exit_code, 0) + 1
        fuzz.count += 1
    print(f"tool cassette diff of random recordings: {fuzz.count} pairs, exit codes {sorted(verdicts.items())}")
    assert verdicts.get(2, 0) > 5 and verdicts.get(0, 0) > 5
