"""The pytest plugin's trace writing (``_trace``) without a host: where a page goes, and a page
that cannot be written named in the report while the test's outcome stands."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dsh_sidecar.bridge.api import pytest_plugin
from dsh_sidecar.bridge.api.trace.build import RunSources
from dsh_sidecar.bridge.api.trace.collect import TraceLater
from dsh_sidecar.bridge.api.types import RunResult


def _item(root: Path, mode: str) -> Any:
    later = TraceLater()
    result = RunResult(exit_code=1, timed_out=False, duration_ms=1, task="t", stdout="", stderr="", final_text="",
                       tool_calls=[], tool_results=[], mock=[], tool_cassette=None, subagent_cassette=None,
                       errors=[], session_id=None, session_path=None, child_session_ids=[], events=[])
    later.add(RunSources(result=result, hooks=[], label="t.py:1: t"))
    stash = pytest.Stash()
    stash[pytest_plugin._RUNNER] = SimpleNamespace(trace=later, trace_mode=mode)  # type: ignore[assignment]
    return SimpleNamespace(stash=stash, config=SimpleNamespace(rootpath=root), nodeid="t.py::test_a[x/y]")


def _report(failed: bool) -> Any:
    return SimpleNamespace(failed=failed, outcome="failed" if failed else "passed", sections=[])


def test_a_failed_test_gets_its_page_under_the_rootdir_and_a_passing_one_none(tmp_path: Path) -> None:
    page = pytest_plugin._trace(_item(tmp_path, "retain-on-failure"), _report(True))
    assert page is not None and page.startswith(".dsh-sidecar/traces/t.py_test_a_x_y_-") and page.endswith(".html")
    assert (tmp_path / page).is_file() and (tmp_path / page).with_suffix(".json").is_file()
    assert pytest_plugin._trace(_item(tmp_path, "retain-on-failure"), _report(False)) is None
    assert pytest_plugin._trace(_item(tmp_path, "on"), _report(False)) is not None


def test_a_page_that_cannot_be_written_is_one_named_line_in_the_report(tmp_path: Path) -> None:
    (tmp_path / ".dsh-sidecar").write_text("a file where the folder goes")
    report = _report(True)
    assert pytest_plugin._trace(_item(tmp_path, "retain-on-failure"), report) is None
    ((title, line),) = report.sections
    assert title == "dsh trace" and line.startswith("TRACE_NOT_WRITTEN: .dsh-sidecar/traces: ")
