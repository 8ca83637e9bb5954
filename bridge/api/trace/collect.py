"""Keeping a run's trace sources, and writing them as a trace now or when a test has failed.

``run(trace=PATH)`` writes the page at once; ``run(trace=TraceLater())`` only keeps what the
trace is built from, so a passing test under ``--dsh-trace retain-on-failure`` pays for its hook
log and nothing more, and a failing one writes every run it made into one page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsh_sidecar.bridge.api.trace.build import RunSources, build_run
from dsh_sidecar.bridge.api.trace.document import TraceDocument
from dsh_sidecar.bridge.api.trace.redact import Redactor
from dsh_sidecar.bridge.api.trace.render import write_trace
from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["TraceLater", "redactor_for", "write_runs"]


class TraceLater:
    """The sources of a test's runs, written as one trace when asked (``write``)."""

    def __init__(self) -> None:
        self.runs: list[RunSources] = []

    def add(self, sources: RunSources) -> None:
        self.runs.append(sources)

    def write(self, path: Path, *, title: str, test: str | None = None, outcome: str | None = None) -> Path | None:
        """Write the trace of every run kept so far (none kept: nothing is written)."""
        if not self.runs:
            return None
        return write_runs(self.runs, path, title=title, test=test, outcome=outcome)


def write_runs(runs: Sequence[RunSources], path: Path, *, title: str, test: str | None = None,
               outcome: str | None = None) -> Path:
    """One page holding ``runs``; the texts any run's filters hid are scrubbed from all of them."""
    built = [build_run(sources) for sources in runs]
    redactor = Redactor()
    for sources in runs:  # what each run's filters hid while it was built
        redactor.hidden |= sources.redactor.hidden
    document = TraceDocument(title=title, test=test, outcome=outcome, runs=built)
    return write_trace(document, redactor, path)


def redactor_for(entries: Sequence[Any], functions: Mapping[str, Callable[[Any], Any]] | None = None) -> Redactor:
    """The trace's filters for the cassettes' ``filters`` entries (row form); rules that do not
    compile (the run refused them, by name) hide every value: a trace fails closed."""
    try:
        return Redactor(entries, functions)
    except SidecarError:
        return Redactor(hide_all=True)
