"""``bench_suite`` runs once in smoke mode (``bench_smoke.py`` says how), in a module of its
own so that it and the other benchmarks run on two xdist workers at once."""

from __future__ import annotations

import pytest
from bench_smoke import smoke

pytestmark = pytest.mark.slow


def test_the_suite_benchmark_runs_to_its_figures_in_smoke_mode() -> None:
    smoke(["bench_suite"])
