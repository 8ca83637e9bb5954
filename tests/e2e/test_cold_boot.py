"""Cheaper cold boots (issue 23): the run API's Node compile cache, and its switch back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dshrun import ROOT

from dsh_sidecar.bridge.hostenv import HostEnv
from dsh_sidecar.bridge.run import COMPILE_CACHE_DIR, Row, ToolCassette, find_host, run

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
