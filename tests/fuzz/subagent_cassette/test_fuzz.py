"""Fuzz: mutated subagent cassettes through the loader and the ``subagent-cassette`` CLI.

3,000 mutations (DSH_FUZZ_CASES) of a valid two-interaction recording (every 20th first gives the header's
``version`` another JSON shape) go through ``verify``/``inspect`` (and ``diff`` against the
original): each is accepted or a named error on one line with exit 1,
never a traceback. Seed: the ``fuzz`` fixture prints it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette.cli import cli
from dsh_sidecar.python_core.subagent_cassette.store import verify_file

pytestmark = pytest.mark.slow  # 3,000 mutated files through the CLI (DSH_FUZZ_CASES)

N = int(os.environ.get("DSH_FUZZ_CASES", "3000"))  # per generator; scripts/test keeps the default
HEADER_VERSIONS = [b"{}", b"[]", b'{"v":2}', b"[2]", b"true", b"null", b'"2"', b"2.0", b"-0", b"1e400"]


def test_fuzz_mutated_cassettes_get_named_errors_only(
    fuzz: Any, record_file: Any, make_start: Any, make_outcome: Any, tmp_path: Path,
) -> None:
    original = record_file([(make_start(label="a"), make_outcome()),
                            (make_start(label="b"), make_outcome(text="other"))])
    valid = original.read_bytes()
    target = tmp_path / "m.cassette.jsonl"
    runner = CliRunner()
    outcomes: dict[str, int] = {}
    commands = (["verify"], ["inspect"], ["diff", str(original)])
    for i in range(N):
        data = valid
        if i % 20 == 0:
            data = valid.replace(b'"version":2', b'"version":' + fuzz.rng.choice(HEADER_VERSIONS), 1)
        target.write_bytes(data if i % 40 == 0 else fuzz.mutate(data))
        code = "valid"
        if i % 3 == 2:
            try:
                verify_file(target)
            except SidecarError as error:
                code = error.code
        result = runner.invoke(cli, [*commands[i % 3], str(target)])
        assert result.exception is None or isinstance(result.exception, SystemExit), (fuzz, result.exception)
        # diff exits 2 for a valid file whose identities differ from the original's.
        assert result.exit_code in ((0, 1, 2) if i % 3 == 2 else (0, 1)), (fuzz, result.output)
        if i % 3 < 2 and result.exit_code == 1:
            code = result.output.split(":")[0]
        if code != "valid":
            assert result.exit_code == 1
            assert result.output.count("\n") == 1 and result.output.startswith(code + ": "), (fuzz, result.output)
        outcomes[code] = outcomes.get(code, 0) + 1
        fuzz.count += 1
    print(f"subagent cassette fuzz: {fuzz.count} inputs, outcomes {sorted(outcomes.items())}")
    assert fuzz.count >= N and outcomes.get("CASSETTE_FORMAT_ERROR", 0) > N // 2
