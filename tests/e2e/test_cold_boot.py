"""Cheaper cold boots (issue 23): the Node compile cache, the rows a run skips, and their switches back."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from dshrun import ROOT

from dsh_sidecar.bridge.api.compose import COMPILE_CACHE_DIR
from dsh_sidecar.bridge.api.run import ModelCassette, Row, ToolCassette, find_host, run
from dsh_sidecar.bridge.host.toolchain import HostEnv

TASK = '/mock run echo({"text": "cache"})'
ROWS = [Row("example-tools", "dsh-example-tools", {})]
CASSETTE = ToolCassette(file="c.ndjson", include=["echo"])


def _shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """A session log without ids and times: event types and their tool calls' names."""
    return [(e.get("type"), (e.get("data") or {}).get("name")) for e in events if e.get("type") != "session"]


def test_the_compile_cache_lives_under_the_host_prefix_and_changes_no_session_log(tmp_path: Path) -> None:
    real = find_host(ROOT)
    # A prefix of its own (bin/ linked to the real host) so the cache folder starts absent.
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    (prefix / "bin").symlink_to(real.bin_dir)
    host = HostEnv(prefix=prefix, dsh_home=real.dsh_home)
    work = tmp_path / "work"
    work.mkdir()
    first = run(TASK, cwd=work, rows=ROWS, tool_cassette=CASSETTE, record_mode="once", host=host,
                compile_cache=False)
    assert first.ok, first.explain()
    assert not (prefix / COMPILE_CACHE_DIR).exists()
    cached = run(TASK, cwd=work, rows=ROWS, tool_cassette=CASSETTE, host=host)
    assert cached.ok, cached.explain()
    assert any((prefix / COMPILE_CACHE_DIR).rglob("*")), "the compile cache folder stayed empty"
    assert cached.tool_cassette is not None and cached.tool_cassette.consumed == 1
    assert _shape(cached.events) == _shape(first.events)
    assert [r.output for r in cached.tool_results] == [r.output for r in first.tool_results]


# Records every module URL of the dormant provider adapter Node resolves (main thread and workers).
_LOADED_HOOK = """
import { registerHooks } from 'node:module'
import { appendFileSync } from 'node:fs'
registerHooks({ resolve(specifier, context, next) {
  const found = next(specifier, context)
  if (found.url.includes('/dsh-llm-pi-ai/')) appendFileSync(process.env.LOADED_LOG, found.url + '\\n')
  return found
} })
"""
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TIMES = frozenset({"time", "createdAt"})
_SEQS = frozenset({"seq", "sourceEventSeqs", "messageSeqs"})


def _without_ids_and_times(value: Any, order: dict[Any, int]) -> Any:
    """``value`` with ids masked, times dropped and sequence numbers mapped through ``order``."""
    if isinstance(value, dict):
        kept: dict[str, Any] = {}
        for key, item in value.items():
            if key in _TIMES:
                continue
            if key in _SEQS:
                kept[key] = [order.get(s) for s in item] if isinstance(item, list) else order.get(item)
            else:
                kept[key] = _without_ids_and_times(item, order)
        return kept
    if isinstance(value, list):
        return [_without_ids_and_times(v, order) for v in value]
    return _UUID.sub("<id>", value) if isinstance(value, str) else value


def _comparable(events: list[dict[str, Any]]) -> tuple[Any, Any]:
    """A session log without ids and times: (its events but the title, the title events).

    rc.8 titles a session with a model call of its own, concurrent with the turn: where the
    `session/title` event lands among the turn's events is timing (it moves between two runs
    of one composition), so the title is compared apart and sequence numbers are renumbered
    without it.
    """
    rest = [e for e in events if e.get("type") != "session/title"]
    order = {e.get("seq"): n for n, e in enumerate(rest)}
    titles = [e for e in events if e.get("type") == "session/title"]
    return _without_ids_and_times(rest, order), _without_ids_and_times(titles, order)


def _model_calls(path: Path) -> list[dict[str, Any]]:
    """The recorded model requests and answers, without the chain hashes and chunk times."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("hash", "prev", "atMs", "durationMs")}
            for r in records if r.get("kind") == "call"]


def test_skipping_the_unused_provider_row_changes_no_session_log_and_no_model_request(tmp_path: Path) -> None:
    hook = tmp_path / "loaded.mjs"
    hook.write_text(_LOADED_HOOK)
    work = tmp_path / "work"
    work.mkdir()
    assert run(TASK, cwd=work, rows=ROWS, tool_cassette=CASSETTE, record_mode="once").ok
    logs, calls = {}, {}
    for skip in (False, True):
        loaded = tmp_path / f"loaded-{skip}.txt"
        loaded.touch()
        # The mock route's own requests, recorded in full: system prompt, tool list, history.
        model = ModelCassette(file=f"m-{skip}.ndjson", options={"providers": ["mock"], "requestView": "full"})
        result = run(TASK, cwd=work, rows=ROWS, tool_cassette=CASSETTE, model_cassette=model, record_mode="once",
                     skip_unused_rows=skip, env={"NODE_OPTIONS": f"--import={hook}", "LOADED_LOG": str(loaded)})
        assert result.ok, result.explain()
        assert result.tool_cassette is not None and result.tool_cassette.consumed == 1
        assert result.model_cassette is not None and result.model_cassette.published
        assert bool(loaded.read_text()) is not skip, f"skip_unused_rows={skip}: pi-ai adapter modules loaded?"
        logs[skip] = _comparable(result.events)
        calls[skip] = _model_calls(work / f"m-{skip}.ndjson")
    assert calls[True] and "echo" in [name for name, _ in calls[True][0]["request"]["tools"]]
    assert calls[True] == calls[False]
    assert logs[True][1], "no session/title event: the comparison would miss the title"
    assert logs[True] == logs[False]


_INNER_TEST = '''
import os

import pytest

from dsh_sidecar.bridge.api.run import Row


@pytest.mark.dsh(allow_live_tools=True)
def test_echo(dsh):
    result = dsh.run('/mock run echo({"text": "rows"})', rows=[Row("example-tools", "dsh-example-tools", {})],
                     env={"NODE_OPTIONS": "--import=" + os.environ["LOADED_HOOK"]})
    assert result.result("echo").output == "echo:rows"
'''


def test_the_pytest_plugin_skips_the_row_unless_its_flag_or_ini_switch_asks_for_every_row(tmp_path: Path) -> None:
    hook = tmp_path / "loaded.mjs"
    hook.write_text(_LOADED_HOOK)
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_rows.py").write_text(_INNER_TEST)
    for label, ini, args, loads in (("default", "", [], False), ("flag", "", ["--dsh-all-rows"], True),
                                    ("ini", "dsh_all_rows = true\n", [], True)):
        (project / "pytest.ini").write_text(f"[pytest]\n{ini}")
        loaded = tmp_path / f"loaded-{label}.txt"
        loaded.touch()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--dsh-host={ROOT / '.host'}", *args],
            cwd=project, capture_output=True, text=True, timeout=120,
            env={**os.environ, "LOADED_HOOK": str(hook), "LOADED_LOG": str(loaded)},
        )
        assert proc.returncode == 0 and "1 passed" in proc.stdout, proc.stdout[-3000:]
        assert bool(loaded.read_text()) is loads, f"{label}: pi-ai adapter modules loaded: {not loads}"
