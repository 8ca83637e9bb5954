"""Fuzz: mutated tool cassettes through the verifier and the ``dsh-tool-cassette`` CLI.

3,000 mutations (DSH_FUZZ_CASES) of a valid recording holding a tool definition (bit flips, cut,
doubled and swapped lines, deep
nesting, lone surrogates, NULs, huge numbers; every 20th first gives the header's ``version``
another JSON shape: an object, an array, a string) go through ``verify`` and ``inspect``: every
one is valid or a named error on one line with exit 1, never a traceback. Seed: the ``fuzz``
fixture prints it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.tool_cassette.cli import main
from dsh_sidecar.python_core.tool_cassette.store import load, verify_file

pytestmark = pytest.mark.slow  # 3,000 mutated files through the CLI (DSH_FUZZ_CASES)

N = int(os.environ.get("DSH_FUZZ_CASES", "3000"))  # per generator; scripts/test keeps the default
# Header versions of every JSON type: an object once reached a set lookup (TypeError).
HEADER_VERSIONS = [b"{}", b"[]", b'{"v":3}', b"[3]", b"true", b"null", b'"3"', b"3.0", b"-0", b"1e400"]


def test_fuzz_mutated_cassettes_get_named_errors_only(fuzz: Any, make_cassette: Any, kit: Any,
                                                      tmp_path: Path) -> None:
    valid = Path(make_cassette(contracts={"weather_lookup": kit.WEATHER_CONTRACT})).read_bytes()
    assert b'"kind":"tool"' in valid
    target = tmp_path / "m.ndjson"
    runner = CliRunner()
    outcomes: dict[str, int] = {}
    for i in range(N):
        data = valid
        if i % 20 == 0:
            data = valid.replace(b'"version":3', b'"version":' + fuzz.rng.choice(HEADER_VERSIONS), 1)
        target.write_bytes(data if i % 40 == 0 else fuzz.mutate(data))
        result = runner.invoke(main, ["verify" if i % 2 else "inspect", str(target)])
        assert result.exception is None or isinstance(result.exception, SystemExit), (fuzz, result.exception)
        assert result.exit_code in (0, 1), (fuzz, result.output)
        if i % 10 == 0:
            # The replay loader must refuse exactly what the verifier refuses.
            report = verify_file(str(target))
            assert result.exit_code == (0 if report.error is None else 1)
            try:
                load(str(target))
            except SidecarError as error:
                assert report.error is not None and error.code == report.error.code
            else:
                assert report.error is None, f"load accepted what verify refused ({fuzz})"
        named = re.search(r"\b([A-Z][A-Z_]+): ", result.output)
        assert result.exit_code == 0 or named is not None, (fuzz, result.output)
        code = "valid" if named is None else named.group(1)
        outcomes[code] = outcomes.get(code, 0) + 1
        fuzz.count += 1
    print(f"tool cassette fuzz: {fuzz.count} inputs, outcomes {sorted(outcomes.items())}")
    assert fuzz.count >= N and outcomes.get("CASSETTE_INVALID", 0) > N // 2
