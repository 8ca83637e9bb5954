"""Fuzz: mutated subagent cassettes through ``reseal`` (moved from
``tests/unit/subagent_cassette/test_reseal.py``). Seed: the ``fuzz`` fixture prints it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette.reseal import reseal_lines
from dsh_sidecar.python_core.subagent_cassette.store import verify_file


def test_fuzz_mutated_cassettes_reseal_to_a_loadable_file_or_a_named_refusal(fuzz: Any, recorded: Path) -> None:
    valid = recorded.read_bytes()
    outcomes = {"resealed": 0, "refused": 0}
    target = recorded.with_name("m.cassette.jsonl")
    for _ in range(2_000):
        lines = fuzz.mutate(valid).splitlines(keepends=True)
        try:
            out, _report = reseal_lines(lines, "m.cassette.jsonl")
        except SidecarError as error:
            assert "\n" not in str(error) and str(error).split(":")[0] in (
                "CASSETTE_FORMAT_ERROR", "CASSETTE_INTEGRITY_ERROR", "TARGET_MISMATCH"), (fuzz, error)
            outcomes["refused"] += 1
            continue
        target.write_bytes(b"".join(out))
        verify_file(target)  # what reseal writes, replay loads
        outcomes["resealed"] += 1
        fuzz.count += 1
    print(f"subagent reseal fuzz: {outcomes}")
    assert outcomes["resealed"] > 0 and outcomes["refused"] > 0
