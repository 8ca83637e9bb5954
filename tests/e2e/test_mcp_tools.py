"""Real MCP servers through the tool cassette, end to end (issue 21).

Each case records with the real server, changes the world so a real call would answer
otherwise, replays with the server still up, and checks the recorded answer was served
(``serve`` in the sidecar trace) while the real server saw no ``tools/call``. The servers are
real: ``mcp_notes_server.py`` (the PyPI ``mcp`` SDK's FastMCP) over stdio and over streamable
HTTP on 127.0.0.1, and ``@modelcontextprotocol/server-filesystem`` (installed by bootstrap).
DSH connects to them through a new ``@deepseek-ai/dsh-mcp-client`` row (``Row(insert=True)``).

``record_then_replay(..., offline=True)`` replays with the provider gone instead (the stdio
script removed, the HTTP server stopped, the row's command pointing at a missing file), e.g.
``record_then_replay(dsh, notes, NOTES_STEPS, _edit_notes, offline=True)`` for both notes
transports and ``record_then_replay(dsh, filesystem, _fs_steps(filesystem.world), _edit_files,
offline=True)``.
"""

from __future__ import annotations

import json
import select
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from dshrun import HOST, trace_actions
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_notes_server import READY_LINE

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import RecordMode, Row, RunResult, ToolCassette, run

CASSETTE = "c.ndjson"
TRACE = "sidecar-trace.jsonl"
MCP_CLIENT = "@deepseek-ai/dsh-mcp-client"
NOTES_SERVER = Path(__file__).with_name("mcp_notes_server.py")
FS_SERVER = HOST / "mcp-server-filesystem/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
_READY_TIMEOUT_S = 30.0


@dataclass
class McpServer:
    """A real MCP server of one test: the row connecting DSH to it, its world, its call log."""

    name: str
    config: dict[str, Any]
    world: Path
    calls: Path | None  # None: the server cannot count its calls (server-filesystem)
    take_away: Callable[[McpServer], None]

    def row(self) -> Row:
        """The new profile row for this server (an MCP server is never a row the profile has)."""
        return Row(f"mcp-{self.name}", MCP_CLIENT, dict(self.config), insert=True)

    def real_calls(self) -> list[str]:
        """The raw tool names of the ``tools/call`` requests the server served, in order."""
        assert self.calls is not None, f"{self.name} cannot count its calls"
        return self.calls.read_text().split() if self.calls.exists() else []

    def go_away(self) -> None:
        """Take the server away, the way a user's would be gone at replay."""
        self.take_away(self)


def _notes_config(script: Path, world: Path, calls: Path) -> dict[str, Any]:
    return {
        "transport": "stdio", "serverName": "notes", "command": sys.executable,
        "args": [str(script), "--world", str(world), "--calls", str(calls)],
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_ready(proc: subprocess.Popen[str], log: Path) -> None:
    """Wait for the server's ready line, bounded; fail with its stderr if it exits first."""
    assert proc.stdout is not None
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([proc.stdout], [], [], left)
        if not readable:
            break
        line = proc.stdout.readline()
        if line.strip() == READY_LINE:
            return
        if not line:
            pytest.fail(f"the notes server exited {proc.wait()} before it was ready: {log.read_text()[-400:]}")
    pytest.fail(f"the notes server printed no ready line within {_READY_TIMEOUT_S:.0f}s")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _unlink_script(server: McpServer) -> None:
    Path(server.config["args"][0]).unlink()


@pytest.fixture(params=["stdio", "streamable-http"])
def notes(request: pytest.FixtureRequest, dsh: DshRunner) -> Iterator[McpServer]:
    """The notes server (PyPI ``mcp`` SDK), with ``todo.txt`` and ``todo.lock`` in its world."""
    world = dsh.cwd / "world"
    world.mkdir()
    (world / "todo.txt").write_text("ship the release\nwrite the notes\n")
    (world / "todo.lock").write_text("")
    calls = dsh.cwd / "notes-calls.log"
    if request.param == "stdio":
        # A private copy of the script, so the offline variant can remove it.
        script = dsh.cwd / "server" / NOTES_SERVER.name
        script.parent.mkdir()
        shutil.copy(NOTES_SERVER, script)
        yield McpServer("notes", _notes_config(script, world, calls), world, calls, _unlink_script)
        return
    port = _free_port()
    log = dsh.cwd / "notes-server.stderr"
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(NOTES_SERVER), "--world", str(world), "--calls", str(calls), "--port", str(port)],
            stdout=subprocess.PIPE, stderr=stderr, text=True,
        )
    try:
        _wait_ready(proc, log)
        config = {"transport": "streamable-http", "serverName": "notes", "url": f"http://127.0.0.1:{port}/mcp"}
        yield McpServer("notes", config, world, calls, lambda _server: _stop(proc))
    finally:
        _stop(proc)


def _point_at_missing_file(server: McpServer) -> None:
    server.config["args"] = [str(server.world.parent / "gone" / "index.js"), *server.config["args"][1:]]


@pytest.fixture
def filesystem(dsh: DshRunner) -> McpServer:
    """``@modelcontextprotocol/server-filesystem`` over stdio, allowed to read its world only."""
    world = dsh.cwd / "world"
    world.mkdir()
    (world / "todo.txt").write_text("ship the release\n")
    config = {
        "transport": "stdio", "serverName": "fs", "command": str(HOST / "bin" / "node"),
        "args": [str(FS_SERVER), str(world)],
    }
    return McpServer("fs", config, world, None, _point_at_missing_file)


def _run(dsh: DshRunner, server: McpServer, steps: Sequence[dict[str, Any]], record_mode: RecordMode) -> RunResult:
    script = {"type": "dsh-mock-script", "version": 1, "steps": list(steps)}
    result = run(
        None, script=script, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches, rows=[server.row()],
        tool_cassette=ToolCassette(file=CASSETTE, include=[f"mcp__{server.name}__*"]), record_mode=record_mode,
        hook_log=TRACE, allow_live_tools=record_mode != "none",
    )
    dsh.runs.append(result)
    return result


def _actions(cwd: Path) -> list[tuple[str, str]]:
    return trace_actions(cwd / TRACE)


def _answers(result: RunResult) -> list[tuple[str, bool, str, Any]]:
    return [(r.tool, r.is_error, r.output, r.value) for r in result.tool_results]


def record_then_replay(dsh: DshRunner, server: McpServer, steps: Sequence[dict[str, Any]],
                       change_world: Callable[[Path], None], *, offline: bool = False) -> tuple[RunResult, RunResult]:
    """Record ``steps`` with the real server, change its world, replay (``offline``: server gone).

    Checks what every case shares: the recording published every call, the replay served every
    call from it with the recorded answers and exit code, and the server saw no call at replay.
    """
    recorded = _run(dsh, server, steps, "once")
    assert recorded.tool_cassette is not None and recorded.tool_cassette.published, recorded.explain()
    assert recorded.tool_cassette.recorded == len(steps), recorded.explain()
    assert [r.tool for r in recorded.tool_results] == [s["tool"] for s in steps], recorded.explain()
    served_before = server.real_calls() if server.calls is not None else []
    change_world(server.world)
    if offline:
        server.go_away()
    replayed = _run(dsh, server, steps, "none")
    assert replayed.exit_code == recorded.exit_code, replayed.explain()
    assert _actions(dsh.cwd) == [(s["tool"], "serve") for s in steps], replayed.explain()
    assert _answers(replayed) == _answers(recorded)
    assert replayed.tool_cassette is not None
    assert (replayed.tool_cassette.consumed, replayed.tool_cassette.unconsumed) == (len(steps), 0)
    if server.calls is not None:
        assert server.real_calls() == served_before  # not one real tools/call at replay
    return recorded, replayed


NOTES_STEPS = [
    {"tool": "mcp__notes__read_note", "args": {"name": "todo"}},
    {"tool": "mcp__notes__note_stats", "args": {"name": "todo"}},
    # Last: a failed step stops the steps after it.
    {"tool": "mcp__notes__check_note", "args": {"name": "todo"}},
]


def _edit_notes(world: Path) -> None:
    # A real call would now answer otherwise: other text, other counts, and no lock.
    (world / "todo.txt").write_text("changed\n")
    (world / "todo.lock").unlink()


def test_the_notes_server_replays_text_structured_output_and_a_raised_error_with_no_real_call(
    dsh: DshRunner, notes: McpServer,
) -> None:
    recorded, replayed = record_then_replay(dsh, notes, NOTES_STEPS, _edit_notes)
    assert notes.real_calls() == ["read_note", "note_stats", "check_note"]  # all at record time
    assert recorded.exit_code == 1 and "dsh: TOOL_FAILED: mcp__notes__check_note" in recorded.stderr
    text, stats, check = replayed.tool_results
    assert (text.is_error, text.output) == (False, "ship the release\nwrite the notes\n")
    # FastMCP wraps a str return as {"result": ...}: its output schema says so.
    assert text.value["structuredContent"] == {"result": "ship the release\nwrite the notes\n"}
    assert stats.is_error is False
    assert stats.value["structuredContent"] == {"name": "todo", "lines": 2, "words": 6}
    assert json.loads(stats.output) == {"name": "todo", "lines": 2, "words": 6}
    # The recorded failure replays as a failure, although the note is no longer locked.
    assert (check.is_error, check.output) == (True, "Error: Error executing tool check_note: note todo is locked")
    assert "changed" not in replayed.stdout + "".join(r.output for r in replayed.tool_results)


def _stood_up(result: RunResult) -> list[str]:
    """The tools the replay stood up from the cassette, as its close note names them."""
    marker = "stood up from the cassette (no plugin registered them): "
    [line] = [line for line in result.stderr.splitlines() if marker in line]
    return line.split(marker, 1)[1].split(", ")


def test_the_notes_server_replays_with_the_server_gone(dsh: DshRunner, notes: McpServer) -> None:
    # stdio: the server script is deleted; HTTP: the server is stopped. Nothing else changes.
    _, replayed = record_then_replay(dsh, notes, NOTES_STEPS, _edit_notes, offline=True)
    assert _stood_up(replayed) == ["mcp__notes__check_note", "mcp__notes__note_stats", "mcp__notes__read_note"]
    text, stats, check = replayed.tool_results
    assert (text.is_error, text.output) == (False, "ship the release\nwrite the notes\n")
    assert json.loads(stats.output) == {"name": "todo", "lines": 2, "words": 6}
    assert (check.is_error, check.output) == (True, "Error: Error executing tool check_note: note todo is locked")
    assert "CASSETTE_" not in replayed.stderr.replace("stood up from the cassette", "")


def _fs_steps(world: Path) -> list[dict[str, Any]]:
    # server-filesystem wants paths inside its allowed folder; absolute ones are unambiguous.
    names = ("todo.txt", "later.txt")  # later.txt does not exist at record time
    return [{"tool": "mcp__fs__read_text_file", "args": {"path": str(world / name)}} for name in names]


def _edit_files(world: Path) -> None:
    (world / "todo.txt").write_text("changed\n")
    (world / "later.txt").write_text("now it exists\n")


def test_server_filesystem_replays_the_recorded_text_while_the_file_says_otherwise(
    dsh: DshRunner, filesystem: McpServer,
) -> None:
    recorded, replayed = record_then_replay(dsh, filesystem, _fs_steps(filesystem.world), _edit_files)
    read, missing = replayed.tool_results
    assert (read.is_error, read.output) == (False, "ship the release\n")
    assert read.value["structuredContent"] == {"content": "ship the release\n"}
    assert (filesystem.world / "todo.txt").read_text() == "changed\n"  # a real read would say so
    # The recorded failure (no such file then) replays as a failure though the file exists now.
    assert missing.is_error is True and "ENOENT" in missing.output
    assert (filesystem.world / "later.txt").exists()
    assert recorded.exit_code == 1


def test_server_filesystem_replays_with_the_server_uninstalled(dsh: DshRunner, filesystem: McpServer) -> None:
    # The row's command now points at a file that does not exist, as after an uninstall.
    listed = anyio.run(_list_tools, filesystem.config["command"], list(filesystem.config["args"]))
    _, replayed = record_then_replay(dsh, filesystem, _fs_steps(filesystem.world), _edit_files, offline=True)
    # Every tool the server listed is stood up, called or not: the model is offered the same tools.
    assert _stood_up(replayed) == sorted(f"mcp__fs__{name}" for name in listed)
    read, missing = replayed.tool_results
    assert (read.is_error, read.output) == (False, "ship the release\n")
    assert missing.is_error is True and "ENOENT" in missing.output


def _reseal_with_structured(cassette: Path, ordinal: int, structured: Any) -> None:
    """Hand-edit the recorded ``structuredContent`` of call ``ordinal`` and reseal the file."""
    frames = [json.loads(line) for line in cassette.read_text().splitlines()]
    for frame in frames:
        if frame["kind"] == "call/result" and frame["ordinal"] == ordinal:
            frame["value"]["structuredContent"] = structured
    cassette.write_text("".join(
        json.dumps(f, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n" for f in frames))
    resealed = subprocess.run([str(Path(sys.executable).with_name("dsh-tool-cassette")), "reseal", str(cassette)],
                              capture_output=True, text=True)
    assert resealed.returncode == 0, resealed.stderr


def test_a_replayed_structured_value_is_checked_against_the_output_schema_the_server_advertised(
    dsh: DshRunner, notes: McpServer,
) -> None:
    # dsh-mcp-client registers FastMCP's outputSchema; DSH revalidates a served value against it.
    steps = NOTES_STEPS[1:2]
    recorded = _run(dsh, notes, steps, "once")
    assert recorded.ok, recorded.explain()
    _reseal_with_structured(dsh.cwd / CASSETTE, 0, {"name": "todo", "lines": "two", "words": 6})
    replayed = _run(dsh, notes, steps, "none")
    assert replayed.exit_code == 1
    assert replayed.result("mcp__notes__note_stats").error_code == "INVALID_TOOL_OUTPUT"
    assert ("CASSETTE_VALUE_REJECTED: mcp__notes__note_stats at root/0, ordinal 0: replayed value rejected with "
            "INVALID_TOOL_OUTPUT") in replayed.stderr
    assert notes.real_calls() == ["note_stats"]


def test_offline_the_recorded_output_schema_still_checks_a_replayed_value(dsh: DshRunner, notes: McpServer) -> None:
    # The stand-in carries the schema dsh-mcp-client registered at record time: DSH's own
    # revalidation runs against it with the server gone.
    steps = NOTES_STEPS[1:2]
    recorded = _run(dsh, notes, steps, "once")
    assert recorded.ok, recorded.explain()
    _reseal_with_structured(dsh.cwd / CASSETTE, 0, {"name": "todo", "lines": "two", "words": 6})
    notes.go_away()
    replayed = _run(dsh, notes, steps, "none")
    assert replayed.exit_code == 1
    assert replayed.result("mcp__notes__note_stats").error_code == "INVALID_TOOL_OUTPUT"
    assert ("CASSETTE_VALUE_REJECTED: mcp__notes__note_stats at root/0, ordinal 0: replayed value rejected with "
            "INVALID_TOOL_OUTPUT") in replayed.stderr


def test_server_filesystems_output_schema_is_not_registered_so_any_structured_value_replays(
    dsh: DshRunner, filesystem: McpServer,
) -> None:
    # server-filesystem advertises draft-07 schemas with a `$schema` keyword, outside the subset
    # DSH rc.8 enforces: dsh-mcp-client drops that outputSchema and registers structuredContent
    # unconstrained, so a value its schema forbids still replays. A stand-in must do the same.
    steps = _fs_steps(filesystem.world)[:1]
    recorded = _run(dsh, filesystem, steps, "once")
    assert recorded.ok, recorded.explain()
    _reseal_with_structured(dsh.cwd / CASSETTE, 0, {"content": 5})
    replayed = _run(dsh, filesystem, steps, "none")
    assert replayed.ok, replayed.explain()
    served = replayed.result("mcp__fs__read_text_file")
    assert (served.is_error, served.output, served.value["structuredContent"]) == (False, "ship the release\n",
                                                                                  {"content": 5})


async def _list_tools(command: str, args: list[str]) -> dict[str, dict[str, Any]]:
    async with stdio_client(StdioServerParameters(command=command, args=args)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            return {t.name: t.model_dump(exclude_none=True) for t in listed.tools}


def test_the_real_servers_advertise_the_output_schemas_the_cases_rely_on(tmp_path: Path) -> None:
    # What dsh-mcp-client registers comes from tools/list: pin the contract the cases replay against.
    calls = tmp_path / "calls.log"
    notes = anyio.run(_list_tools, sys.executable, [str(NOTES_SERVER), "--world", str(tmp_path), "--calls", str(calls)])
    assert sorted(notes) == ["check_note", "note_stats", "read_note"]
    assert notes["note_stats"]["outputSchema"]["required"] == ["name", "lines", "words"]
    assert notes["read_note"]["outputSchema"]["properties"] == {"result": {"title": "Result", "type": "string"}}
    assert not calls.exists()  # tools/list is not a tools/call
    fs = anyio.run(_list_tools, str(HOST / "bin" / "node"), [str(FS_SERVER), str(tmp_path)])
    assert fs["read_text_file"]["inputSchema"]["required"] == ["path"]
    assert fs["read_text_file"]["outputSchema"] == {
        "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
        "properties": {"content": {"type": "string"}}, "required": ["content"], "additionalProperties": False,
    }
