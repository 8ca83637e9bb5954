"""Every ``scripts/bench_*`` runs once in smoke mode, so a benchmark cannot rot unnoticed.

``BENCH_SMOKE=1 scripts/bench_all [NAME...]`` runs each benchmark with tiny sizes against the
real host; figures are printed, never judged: a smoke test asserts only that each script ran to
the end (exit 0) and printed its figure lines. The benchmarks are split over two test modules
(``test_benchmarks_smoke.py``, ``test_benchmarks_smoke_suite.py``) so two xdist workers share them.
"""

from __future__ import annotations

import os
import re
import subprocess

from dshrun import ROOT

# One pattern per benchmark for a line only its last section prints: a new benchmark script
# must add its own here, or the test fails (a smoke run nobody checks is how bench_subagent rotted).
FIGURES = {
    "bench_api": [r"ratio run\(\)/raw: \d", r"speed-up: \d", r"^\s+100\s+\d+ us"],
    "bench_bridge": [r"ratio b/a sequential median \d", r"enabled vs disabled, same default-model path: [+-]\d"],
    "bench_mock": [r"median paired ratio \d", r"ratio sidecar/JS: \d"],
    "bench_model_cassette": [r"ratio replay/live \d", r"verify \(full view\).* ratio \d"],
    "bench_subagent": [r"sha256sum same file: .* ratio \d", r"ratio spawn/replay \d"],
    "bench_suite": [r"replayed test, tool-cassette replay of one call: median \d+ ms wall, turn \d",
                    r"replayed test, 3-step mock script: median \d+ ms wall, turn \d", r"ratio new/today: \d",
                    r"llm-pi-ai +\d+ ms wall, +\d+ ms CPU; without it [+-]\d",
                    r"warm replayed test, 3-step mock script: median \d+ ms wall, turn \d",
                    r"-n 2: warm [\d.]+ s, cold [\d.]+ s wall; cold/warm [\d.]+x",
                    r"full GC after each session .* after \d+ sessions [\d.]+ MiB, after \d+: [\d.]+ MiB",
                    r"warm offline MCP replay: median \d+ ms wall, turn \d+ ms; wall/turn [\d.]+x",
                    r"pool full: [\d.]+ MiB RSS for 2 hosts",
                    r"warm: pytest [\d.]+ s wall, its tests [\d.]+ s .* tests/turns [\d.]+x",
                    r"cold \(--dsh-cold\): pytest [\d.]+ s wall, its tests [\d.]+ s; cold/warm [\d.]+x",
                    r"--dsh-trace retain-on-failure: median [\d.]+ ms wall; ratio retain-on-failure/off [\d.]+",
                    r"built and written in \d+ ms; page \d+ KiB, JSON \d+ KiB",
                    r"Chromium: rendered in \d+ ms; filter to the last call and open it \d+ ms"],
    "bench_warm_host": [r"warm session \(2nd on\): median \d", r"ratio warm session/cold boot: \d",
                        r"RSS after session \d+: \d"],
    "bench_tool_cassette": [r"ratio pass-through/no-sidecar per call: median \d"],
}


def benchmark_scripts() -> list[str]:
    """Every executable ``scripts/bench_*`` but ``bench_all``."""
    return sorted(path.name for path in (ROOT / "scripts").glob("bench_*")
                  if path.is_file() and os.access(path, os.X_OK) and path.name != "bench_all")


def smoke(names: list[str]) -> None:
    """Run ``names`` through ``scripts/bench_all`` in smoke mode; each must print its figures."""
    proc = subprocess.run([str(ROOT / "scripts" / "bench_all"), *names], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "BENCH_SMOKE": "1"}, check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    sections = re.split(r"^======== (bench_\w+) ========$", proc.stdout, flags=re.MULTILINE)
    printed = dict(zip(sections[1::2], sections[2::2], strict=True))
    assert sorted(printed) == sorted(names), output[-4000:]
    for name in names:
        body = printed[name]
        assert f"-------- {name}: done in" in body, body[-2000:]
        assert "not measured" not in body, body[-2000:]
        for pattern in FIGURES[name]:
            assert re.search(pattern, body, flags=re.MULTILINE), f"{name}: no line matches {pattern!r}\n{body[-2000:]}"
