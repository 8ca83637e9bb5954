"""The warm host through real headless DSH rc.8 (issue 23, docs/warm-host.md).

Runs of one composition share one DSH process (``run(warm=pool)``); each is a session with its
own config, cwd and cassettes. What is checked: cassettes recorded cold replay warm and the
reverse, with the real service stopped; the session log and the model-cassette fingerprints
are those of a cold run; one session's poison, mismatch or death never reaches the next; a run
the host cannot take runs cold; a timeout ends the host and the next run gets a fresh one.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from deepseek_server import WEATHER_SCRIPT, WEATHER_TASK, dead_url, deepseek_server
from dshrun import stable
from third_party import CWD_TOOLS, plugin_row
from weather_service import weather_service

from dsh_sidecar.bridge.api.compose import Composition, unused_rows
from dsh_sidecar.bridge.api.run import (
    ModelCassette,
    Row,
    RunResult,
    SubagentCassette,
    ToolCassette,
    find_host,
    run,
)
from dsh_sidecar.bridge.api.transport import warm_boot
from dsh_sidecar.bridge.api.warm_pool import WarmPool
from dsh_sidecar.bridge.transport.control import WarmReply, WarmRun
from dsh_sidecar.python_core.session_log import read_session_log, session_log_candidates

pytestmark = pytest.mark.e2e

CANARY = "sk-canary-7f3e9b21"
ECHO = Row("example-tools", "dsh-example-tools", {})
def _log(result: RunResult) -> list[Any]:
    """The session log without ids, times and the title event (its place is timing)."""
    return [stable(e) for e in result.events if e.get("type") != "session/title"]


def _weather(url: str) -> list[Row]:
    return [Row("example-tools", "dsh-example-tools", {"weatherUrl": url})]


@pytest.fixture
def pool() -> Any:
    warm = WarmPool()
    yield warm
    warm.close()


def test_runs_share_one_host_each_a_session_of_its_own(pool: WarmPool, tmp_path: Path) -> None:
    results = []
    for i in range(3):
        work = tmp_path / f"w{i}"
        work.mkdir()
        results.append(run(f'/mock run echo({{"text": "warm{i}"}})', cwd=work, rows=[ECHO], warm=pool))
    assert pool.boots == 1
    for i, result in enumerate(results):
        assert result.ok, result.explain()
        assert [r.output for r in result.tool_results] == [f"echo:warm{i}"]
        # Each session numbers its calls from root/0 and has its own log, in its own folder's project.
        assert [c.path for c in result.tool_calls] == ["root/0"]
        assert result.session_path is not None and f"w{i}" in result.session_path
    assert len({r.session_id for r in results}) == 3
    # A cold run of the same turn logs the same events (ids and times aside).
    cold = run('/mock run echo({"text": "warm0"})', cwd=tmp_path / "w0", rows=[ECHO])
    assert cold.ok, cold.explain()
    assert _log(cold) == _log(results[0])


def test_a_tool_cassette_recorded_cold_replays_warm_and_the_reverse_with_the_service_stopped(
    pool: WarmPool, tmp_path: Path,
) -> None:
    task = '/mock run weather_lookup({"city": "Paris"})'
    cold_dir, warm_dir = tmp_path / "cold", tmp_path / "warm"
    cold_dir.mkdir()
    warm_dir.mkdir()
    cassette = ToolCassette(file="tools.ndjson", include=["weather_lookup"])
    with weather_service(tmp_path) as weather:
        cold = run(task, cwd=cold_dir, rows=_weather(weather.url), tool_cassette=cassette, record_mode="once")
        warm = run(task, cwd=warm_dir, rows=_weather(weather.url), tool_cassette=cassette, record_mode="once",
                   warm=pool)
        assert weather.requests == 2
    for result in (cold, warm):
        assert result.ok, result.explain()
        assert result.tool_cassette is not None and result.tool_cassette.published
    # The service is stopped: each recording replays in the other mode, with no real call.
    rows = _weather(dead_url())
    warm_of_cold = run(task, cwd=cold_dir, rows=rows, tool_cassette=cassette, allow_live_tools=False, warm=pool)
    cold_of_warm = run(task, cwd=warm_dir, rows=rows, tool_cassette=cassette, allow_live_tools=False)
    for result, recorded in ((warm_of_cold, cold), (cold_of_warm, warm)):
        assert result.ok, result.explain()
        assert result.tool_cassette is not None
        assert (result.tool_cassette.consumed, result.tool_cassette.unconsumed) == (1, 0)
        assert result.final_text == recorded.final_text
        assert [r.output for r in result.tool_results] == [r.output for r in recorded.tool_results]
    assert (tmp_path / "cold" / "tools.ndjson").read_bytes().count(b"\n") == \
        (tmp_path / "warm" / "tools.ndjson").read_bytes().count(b"\n")
    # Rows with the live URL, then rows with the dead one: two compositions, a host each.
    assert pool.boots == 2


def test_a_model_cassette_recorded_warm_replays_cold(pool: WarmPool, tmp_path: Path) -> None:
    cassette = ModelCassette(file="model.ndjson")
    tools = ToolCassette(file="tools.ndjson", include=["weather_lookup"])
    with deepseek_server(tmp_path, WEATHER_SCRIPT) as provider, weather_service(tmp_path) as weather:
        record = run(WEATHER_TASK, cwd=tmp_path, rows=_weather(weather.url), env=provider.env(CANARY),
                     model_cassette=cassette, tool_cassette=tools, record_mode="once", warm=pool)
    assert record.ok, record.explain()
    assert record.model_cassette is not None and record.model_cassette.published
    assert pool.boots == 1
    # Provider and service gone, a process of its own: the warm recording's fingerprints match.
    replay = run(WEATHER_TASK, cwd=tmp_path, rows=_weather(dead_url()), env={"DEEPSEEK_BASE_URL": dead_url()},
                 model_cassette=cassette, tool_cassette=tools)
    assert replay.ok, replay.explain()
    assert replay.model_cassette is not None
    assert (replay.model_cassette.consumed, replay.model_cassette.unconsumed) == (record.model_cassette.recorded, 0)
    assert replay.final_text == record.final_text
    assert _log(replay) == _log(record)


def test_a_model_cassette_recorded_cold_replays_warm_with_equal_fingerprints(pool: WarmPool, tmp_path: Path) -> None:
    cassette = ModelCassette(file="model.ndjson")
    tools = ToolCassette(file="tools.ndjson", include=["weather_lookup"])
    with deepseek_server(tmp_path, WEATHER_SCRIPT) as provider, weather_service(tmp_path) as weather:
        record = run(WEATHER_TASK, cwd=tmp_path, rows=_weather(weather.url), env=provider.env(CANARY),
                     model_cassette=cassette, tool_cassette=tools, record_mode="once")
    assert record.ok, record.explain()
    offline = {"DEEPSEEK_BASE_URL": dead_url()}
    replay = run(WEATHER_TASK, cwd=tmp_path, rows=_weather(dead_url()), env=offline, model_cassette=cassette,
                 tool_cassette=tools, warm=pool)
    # Replayed warm: every request matched its recorded fingerprint, every call was consumed.
    assert replay.ok, replay.explain()
    assert replay.model_cassette is not None and replay.tool_cassette is not None
    assert (replay.model_cassette.consumed, replay.model_cassette.unconsumed) == (record.model_cassette.recorded, 0)
    assert replay.final_text == record.final_text
    assert _log(replay) == _log(record)
    assert pool.boots == 1


def test_a_mismatch_and_a_poisoned_session_leave_the_next_session_unharmed(pool: WarmPool, tmp_path: Path) -> None:
    cassette = ToolCassette(file="tools.ndjson", include=["echo"])
    recorded = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=[ECHO], tool_cassette=cassette,
                   record_mode="once", warm=pool)
    assert recorded.ok, recorded.explain()
    # Another argument: the session refuses the call and fails with the mismatch, once.
    bad = run('/mock run echo({"text": "b"})', cwd=tmp_path, rows=[ECHO], tool_cassette=cassette,
              allow_live_tools=False, warm=pool)
    assert bad.exit_code == 1
    assert [e.code for e in bad.errors][:1] == ["CASSETTE_MISMATCH"], bad.explain()
    assert bad.stderr.count("dsh-sidecar: CASSETTE_MISMATCH: echo at root/0, ordinal 0") == 1, bad.stderr
    # The same host's next session replays the cassette whole: nothing of the failed one is left.
    good = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=[ECHO], tool_cassette=cassette,
               allow_live_tools=False, warm=pool)
    assert good.ok, good.explain()
    assert good.tool_cassette is not None and (good.tool_cassette.consumed, good.tool_cassette.unconsumed) == (1, 0)
    assert pool.boots == 1


def test_a_broken_config_fails_its_run_by_name_and_the_host_lives_on(pool: WarmPool, tmp_path: Path) -> None:
    ok = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=[ECHO], warm=pool)
    assert ok.ok, ok.explain()
    (tmp_path / "bad.ndjson").write_text("not a cassette\n")
    bad = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=[ECHO], warm=pool,
              tool_cassette=ToolCassette(file="bad.ndjson", include=["echo"]))
    assert bad.exit_code == 1
    lines = bad.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("dsh-sidecar: CASSETTE_INVALID: "), bad.stderr
    assert lines[1].startswith("dsh-sidecar: fix: ")
    assert str(tmp_path) not in bad.stderr
    again = run('/mock run echo({"text": "b"})', cwd=tmp_path, rows=[ECHO], warm=pool)
    assert again.ok, again.explain()
    assert pool.boots == 1


def test_a_run_the_host_cannot_take_runs_in_a_process_of_its_own(pool: WarmPool, tmp_path: Path) -> None:
    # A subagent cassette registers a provider for the whole process: the run boots cold, and
    # says what a cold run says of a turn that delegated nothing.
    result = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=[ECHO], warm=pool, record_mode="once",
                 subagent_cassette=SubagentCassette(file="agents.jsonl"))
    assert result.exit_code == 1 and "NOTHING_RECORDED: no subagent start() reached the cassette" in result.stderr
    assert pool.boots == 0
    # A replay whose tool no plugin registers stands it up for its own session: it stays warm.
    with weather_service(tmp_path) as weather:
        recorded = run('/mock run weather_lookup({"city": "Paris"})', cwd=tmp_path, rows=_weather(weather.url),
                       tool_cassette=ToolCassette(file="w.ndjson", include=["weather_lookup"]), record_mode="once")
    assert recorded.ok, recorded.explain()
    stood = run('/mock run weather_lookup({"city": "Paris"})', cwd=tmp_path, rows=[], warm=pool,
                tool_cassette=ToolCassette(file="w.ndjson", include=["weather_lookup"]))
    assert stood.ok, stood.explain()
    assert stood.tool_cassette is not None and stood.tool_cassette.stood_up == ["weather_lookup"]
    stats = pool.statistics()
    assert (stats.boots, stats.sessions, stats.unsuited) == (1, 1, 0), stats


def test_a_timeout_ends_the_host_and_the_next_run_gets_a_fresh_one(pool: WarmPool, tmp_path: Path) -> None:
    script = {"type": "dsh-mock-script", "version": 1, "steps": [
        {"tool": "echo", "args": {"text": "a"}}, {"wait": 600_000}, {"tool": "echo", "args": {"text": "b"}}]}
    slow = run(script=script, cwd=tmp_path, rows=[ECHO], warm=pool, timeout=6)
    assert slow.timed_out and slow.exit_code != 0
    fine = run('/mock run echo({"text": "after"})', cwd=tmp_path, rows=[ECHO], warm=pool)
    assert fine.ok, fine.explain()
    assert pool.boots == 2


def _warm_host(tmp_path: Path, rows: list[Row]) -> Any:
    host = find_host(tmp_path)
    boot = warm_boot(Composition(host=host, profile="headless", rows=rows, extras=[], sidecar={},
                                 skipped=unused_rows(host, "headless", rows, []),
                                 environ=host.environ(dict(os.environ))))
    return host, boot.start(boot.key([]))


def _turn_span(host: Any, folder: Path, session_id: str) -> tuple[int, int]:
    [log] = [p for p in session_log_candidates(str(host.dsh_home / "sessions"), str(folder), session_id)
             if os.path.exists(p)]
    events = read_session_log(log)
    return (next(e["time"] for e in events if e["type"] == "turn/start"),
            next(e["time"] for e in events if e["type"] == "turn/end"))


def test_two_concurrent_sessions_of_one_host_replay_their_own_cassettes(tmp_path: Path) -> None:
    # Two recordings of different calls in one folder, then both replayed at once in one host (each
    # script waits after its call, so the sessions overlap): each consumes exactly its own cassette.
    folder = tmp_path
    for name, text in (("a", "alpha"), ("b", "beta")):
        steps = [{"tool": "echo", "args": {"text": text}}, {"wait": 400}, {"tool": "echo", "args": {"text": "end"}}]
        (folder / f"{name}.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": steps}))
        recorded = run(script=f"{name}.json", cwd=folder, rows=[ECHO], record_mode="once",
                       tool_cassette=ToolCassette(file=f"{name}.ndjson", include=["echo"]))
        assert recorded.ok, recorded.explain()
    host, warm = _warm_host(tmp_path, [ECHO])
    try:
        sent = []
        for i, name in enumerate("ab"):
            config = {"toolCassette": {"mode": "replay", "file": str(folder / f"{name}.ndjson"), "include": ["echo"]},
                      "liveTools": [], "report": str(folder / f"report-{name}.json")}
            offset = warm.send(WarmRun(id=i, cwd=str(folder), task=f'/mock replay "{name}.json"', config=config))
            assert offset is not None
            sent.append(offset)
        # Read in the opposite order: a reply read first for the other run is kept for it.
        replies = {i: warm.receive(i, sent[i], 60) for i in (1, 0)}
    finally:
        warm.close()
    for i, name in enumerate("ab"):
        reply = replies[i]
        assert isinstance(reply, WarmReply) and reply.exitCode == 0, reply
        report = json.loads((folder / f"report-{name}.json").read_text())
        [tool] = [c for c in report["cassettes"] if c["kind"] == "tool"]
        assert (tool["consumed"], tool["unconsumed"], tool["poisoned"]) == (2, 0, False), report
        assert report["sessions"] == [reply.sessionId]
    assert isinstance(replies[0], WarmReply) and isinstance(replies[1], WarmReply)
    assert replies[0].sessionId != replies[1].sessionId
    # They did overlap: the second turn started before the first ended.
    spans = [_turn_span(host, folder, reply.sessionId) for reply in (replies[0], replies[1])]
    assert spans[1][0] < spans[0][1] and spans[0][0] < spans[1][1], spans


def test_runs_sent_at_once_in_two_folders_take_turns_each_with_its_folder_as_process_cwd(tmp_path: Path) -> None:
    # The process has one cwd: a session in another folder than an open one waits for it to close.
    row = plugin_row(tmp_path / "plugins", "cwd-tools", CWD_TOOLS)
    folders = [tmp_path / "a", tmp_path / "b"]
    script = {"type": "dsh-mock-script", "version": 1, "steps": [
        {"tool": "cat_input", "args": {}}, {"wait": 300}, {"tool": "cat_input", "args": {}}]}
    for folder in folders:
        folder.mkdir()
        (folder / "input.txt").write_text(f"input of {folder.name}")
        (folder / "s.json").write_text(json.dumps(script))
    host, warm = _warm_host(tmp_path, [row])
    try:
        sent = []
        for i, folder in enumerate(folders):
            config = {"toolCassette": {"mode": "record", "file": str(folder / "t.ndjson"), "include": ["cat_input"]}}
            offset = warm.send(WarmRun(id=i, cwd=str(folder), task='/mock replay "s.json"', config=config))
            assert offset is not None
            sent.append(offset)
        replies = {i: warm.receive(i, sent[i], 60) for i in (0, 1)}
    finally:
        warm.close()
    for i, folder in enumerate(folders):
        reply = replies[i]
        assert isinstance(reply, WarmReply) and reply.exitCode == 0, reply
        assert f"input of {folder.name}" in (folder / "t.ndjson").read_text()
    assert isinstance(replies[0], WarmReply) and isinstance(replies[1], WarmReply)
    first, second = (_turn_span(host, f, r.sessionId) for f, r in zip(folders, (replies[0], replies[1]), strict=True))
    assert first[1] <= second[0], (first, second)


def test_a_stub_module_of_the_same_name_in_two_folders_serves_each_its_own_session(
    pool: WarmPool, tmp_path: Path,
) -> None:
    # Two tests' own `doubles` modules, one host: each session runs its folder's file (and an edit).
    outputs, rows = [], _weather(dead_url())
    for folder, forecast in ((tmp_path / "a", "fog"), (tmp_path / "b", "hail"), (tmp_path / "a", "snow")):
        folder.mkdir(exist_ok=True)
        (folder / "doubles.py").write_text(
            "def serve(args):\n"
            f"    return {{'city': args['city'], 'forecast': {forecast!r}, 'temperatureC': 1}}\n")
        result = run('/mock run weather_lookup({"city": "Oslo"})', cwd=folder, rows=rows,
                     stubs={"weather_lookup": "doubles:serve"}, warm=pool)
        assert result.ok, result.explain()
        outputs.append(result.result("weather_lookup").output)
    assert outputs == ["Oslo: fog, 1C", "Oslo: hail, 1C", "Oslo: snow, 1C"]
    assert pool.boots == 1


def test_a_composition_that_cannot_boot_fails_each_run_as_a_cold_run_does(pool: WarmPool, tmp_path: Path) -> None:
    # The tree fails to load after the sidecar connected: each run's host dies under the run, which
    # fails with what the host printed, as a cold run fails; the next run boots a fresh host.
    rows = [ECHO, Row("missing", "dsh-no-such-plugin", {}, insert=True)]
    cold = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=rows)
    assert cold.exit_code != 0
    for _ in range(2):
        warm = run('/mock run echo({"text": "a"})', cwd=tmp_path, rows=rows, warm=pool)
        assert warm.exit_code == cold.exit_code == 1
        # What the host printed as it went down is the run's: the tree's load error names the row.
        assert "dsh-no-such-plugin; Cordis startup failed" in warm.stderr, warm.stderr
    assert pool.boots == 2


NOTES_SERVER = Path(__file__).with_name("mcp_notes_server.py")
NOTES_STEPS = [{"tool": "mcp__notes__read_note", "args": {"name": "todo"}},
               {"tool": "mcp__notes__note_stats", "args": {"name": "todo"}}]


def _notes(tmp_path: Path) -> tuple[Row, Path]:
    """A stdio row for a private copy of the FastMCP notes server, and that copy (unlink it: server gone)."""
    world = tmp_path / "world"
    world.mkdir()
    (world / "todo.txt").write_text("ship the release\nwrite the notes\n")
    script = tmp_path / "server" / NOTES_SERVER.name
    script.parent.mkdir()
    script.write_bytes(NOTES_SERVER.read_bytes())
    config = {"transport": "stdio", "serverName": "notes", "command": sys.executable,
              "args": [str(script), "--world", str(world), "--calls", str(tmp_path / "calls.log")]}
    return Row("mcp-notes", "@deepseek-ai/dsh-mcp-client", config, insert=True), script


def test_an_offline_mcp_replay_runs_warm_with_its_stand_ins_seen_by_its_own_session_only(
    pool: WarmPool, tmp_path: Path,
) -> None:
    row, script = _notes(tmp_path)
    cassette = ToolCassette(file="notes.ndjson", include=["mcp__notes__*"])
    script_json = {"type": "dsh-mock-script", "version": 1, "steps": NOTES_STEPS}
    recorded = run(script=script_json, cwd=tmp_path, rows=[row], tool_cassette=cassette, record_mode="once",
                   allow_live_tools=True)
    assert recorded.ok, recorded.explain()
    answers = [(r.tool, r.output) for r in recorded.tool_results]
    script.unlink()  # the server is gone: no plugin registers its tools any more
    replays = []
    for i in range(2):
        replayed = run(script=script_json, cwd=tmp_path, rows=[row], tool_cassette=cassette, warm=pool)
        assert replayed.ok, replayed.explain()
        assert [(r.tool, r.output) for r in replayed.tool_results] == answers
        assert replayed.tool_cassette is not None
        # Every tool the recording registered (the server advertises three) is stood up.
        assert replayed.tool_cassette.stood_up == ["mcp__notes__check_note", "mcp__notes__note_stats",
                                                   "mcp__notes__read_note"]
        replays.append(replayed)
        if i == 0:
            # Another session of the same host, without the cassette: the stand-in is not its tool.
            other = run('/mock run mcp__notes__read_note({"name": "todo"})', cwd=tmp_path / "world", rows=[row],
                        warm=pool, allow_live_tools=True)
            [result] = other.tool_results
            assert (result.error_code, result.output) == ("UNKNOWN_TOOL", 'Error: unknown tool "mcp__notes__read_note"')
    stats = pool.statistics()
    # One host served all three as sessions: none ran cold.
    assert (stats.boots, stats.sessions, stats.unsuited) == (1, 3, 0), stats


def _echo_row(url: str) -> list[Row]:
    # Two compositions that differ by a row's config only (the weather service is never called).
    return [Row("example-tools", "dsh-example-tools", {"weatherUrl": url})]


def _echo(pool: WarmPool, folder: Path, rows: list[Row], text: str) -> None:
    folder.mkdir(exist_ok=True)
    result = run(f'/mock run echo({{"text": "{text}"}})', cwd=folder, rows=rows, warm=pool)
    assert result.ok and [r.output for r in result.tool_results] == [f"echo:{text}"], result.explain()


def test_runs_alternating_two_compositions_keep_both_hosts(pool: WarmPool, tmp_path: Path) -> None:
    a, b = _echo_row("http://127.0.0.1:9/a"), _echo_row("http://127.0.0.1:9/b")
    _echo(pool, tmp_path / "a", a, "a0")
    _echo(pool, tmp_path / "b", b, "b0")
    pids = pool.pids()
    for i in range(1, 4):
        _echo(pool, tmp_path / "a", a, f"a{i}")
        _echo(pool, tmp_path / "b", b, f"b{i}")
    stats = pool.statistics()
    assert (stats.boots, stats.hosts, stats.evictions, stats.sessions) == (2, 2, 0, 8), stats
    assert len(pids) >= 4 and sorted(pool.pids()) == sorted(pids)  # two DSH processes and their sidecars


def test_a_full_pool_ends_its_least_recently_used_host(tmp_path: Path) -> None:
    a, b, c = (_echo_row(f"http://127.0.0.1:9/{n}") for n in "abc")
    with WarmPool(max_hosts=2) as pool:
        _echo(pool, tmp_path / "a", a, "a")
        only_a = set(pool.pids())
        _echo(pool, tmp_path / "b", b, "b")
        only_b = [pid for pid in pool.pids() if pid not in only_a]  # its DSH process first
        _echo(pool, tmp_path / "a", a, "a")  # a is now the more recently used
        _echo(pool, tmp_path / "c", c, "c")
        left = set(pool.pids())
        stats = pool.statistics()
    assert only_a <= left and not set(only_b) & left, (only_a, only_b, left)
    assert (stats.boots, stats.hosts, stats.evictions) == (3, 2, 1), stats
    assert stats.rss_bytes > 100 * 1024 * 1024  # two DSH processes and their sidecars
    assert not os.path.exists(f"/proc/{only_b[0]}")  # b's DSH process ended (and was waited for)
