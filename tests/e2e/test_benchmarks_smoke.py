"""Every benchmark but ``bench_suite`` runs once in smoke mode (``bench_smoke.py`` says how)."""

from __future__ import annotations

import pytest
from bench_smoke import FIGURES, benchmark_scripts, smoke

pytestmark = pytest.mark.slow  # benchmark scripts, one after another

SUITE = "bench_suite"  # the longest; test_benchmarks_smoke_suite.py runs it on the other worker


def test_every_benchmark_script_has_its_figure_patterns() -> None:
    assert benchmark_scripts() == sorted(FIGURES), "every scripts/bench_* needs its figure patterns in FIGURES"


def test_every_benchmark_but_the_suite_runs_to_its_figures_in_smoke_mode() -> None:
    smoke([name for name in benchmark_scripts() if name != SUITE])
