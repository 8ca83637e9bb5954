"""Fuzz: mutated replay scripts and session logs through the loader and ``mock validate``.

3,000 mutations (DSH_FUZZ_CASES) each of a canonical script and of a real-shaped session log (plain JSONL)
go through ``load_source`` and the CLI: each is accepted or a named error on one line with
exit 1, never a traceback. Seed: the ``fuzz`` fixture prints it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.cli import mock
from dsh_sidecar.python_core.mock.source import load_source

pytestmark = pytest.mark.slow  # 3,000 mutated files through the CLI (DSH_FUZZ_CASES)

N = int(os.environ.get("DSH_FUZZ_CASES", "3000"))  # per generator; scripts/test keeps the default
SCRIPT = json.dumps({"type": "dsh-mock-script", "version": 1, "steps": [
    {"tool": "echo", "args": {"text": "a", "n": [1, 2.5, None]}},
    {"wait": 40},
    {"parallel": [{"tool": "echo", "args": {"text": "\u00e9\U0001f600"}}, {"tool": "b", "args": {}}]},
]}).encode()


def _fuzz_source(fuzz: Any, valid: bytes, target: Path, turn: bool) -> dict[str, int]:
    runner = CliRunner()
    outcomes: dict[str, int] = {}
    for i in range(N):
        data = fuzz.mutate(valid)
        if i % 10 == 0:
            # The library entry point, with the other timing mode.
            try:
                load_source(data, source_name=target.name, preserve_timing=False)
            except SidecarError:
                pass
        target.write_bytes(data)
        args = ["validate" if i % 2 else "convert", str(target)]
        result = runner.invoke(mock, args + (["--turn", "1"] if turn and i % 3 == 0 else []))
        assert result.exception is None or isinstance(result.exception, SystemExit), (fuzz, result.exception)
        assert result.exit_code in (0, 1), (fuzz, result.output)
        code = "valid"
        if result.exit_code == 1:
            assert result.output.count("\n") == 1, (fuzz, result.output)
            code = result.output.split(":")[0]
            assert code.isupper() and " " not in code, (fuzz, result.output)
        outcomes[code] = outcomes.get(code, 0) + 1
        fuzz.count += 1
    return outcomes


def test_fuzz_mutated_scripts(fuzz: Any, tmp_path: Path) -> None:
    outcomes = _fuzz_source(fuzz, SCRIPT, tmp_path / "s.json", turn=False)
    print(f"mock script fuzz: {fuzz.count} inputs, outcomes {sorted(outcomes.items())}")
    assert fuzz.count >= N and outcomes.get("INVALID_SCRIPT", 0) > N // 2


def test_fuzz_mutated_session_logs(fuzz: Any, three_step_log: Any, tmp_path: Path) -> None:
    outcomes = _fuzz_source(fuzz, three_step_log.text(), tmp_path / "session.jsonl", turn=True)
    print(f"session log fuzz: {fuzz.count} inputs, outcomes {sorted(outcomes.items())}")
    assert fuzz.count >= N and outcomes.get("INVALID_SCRIPT", 0) > N // 2
