"""The warm host's sidecar side over a real Unix socket: sessions opened from control lines,
hooks routed by session, a run's reply, refusals by name, and a seeded fuzz of the control lines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_sidecar.bridge.session.sidecar import Sidecar
from dsh_sidecar.bridge.session.warm import WarmSessionUnknown
from dsh_sidecar.bridge.transport.control import WarmReply, WarmRun
from dsh_sidecar.bridge.transport.later import Pending
from dsh_sidecar.bridge.transport.protocol import (
    PROTOCOL_VERSION,
    ExecuteParams,
    InitializeParams,
    ModelRecordedParams,
    PostExecuteParams,
    RegistryParams,
    ShutdownParams,
    TurnParams,
    WarmDoneParams,
    WarmJob,
    WarmNextParams,
)
from dsh_sidecar.python_core.errors import ProtocolError

pytestmark = pytest.mark.anyio


class Control:
    """The run API's end of the control socket."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.receive = BufferedByteReceiveStream(stream)

    async def send(self, run: WarmRun | bytes) -> None:
        await self.stream.send(run if isinstance(run, bytes) else msgspec.json.encode(run) + b"\n")

    async def reply(self) -> WarmReply:
        return msgspec.json.decode(await self.receive.receive_until(b"\n", 1 << 20), type=WarmReply)


async def _connected(tmp_path: Path, name: str) -> tuple[Sidecar, SocketStream]:
    """A warm sidecar initialized against a control socket of the test's, and that socket's run API end."""
    path = str(tmp_path / name)
    listener = await anyio.create_unix_listener(path)
    sidecar = Sidecar()
    async with listener:
        result = await sidecar.initialize(InitializeParams(
            protocolVersion=PROTOCOL_VERSION, host={}, config={"warm": path}, cwd=str(tmp_path), pid=1))
        stream = await listener.accept()
    assert result.warm and "warm" in result.hooks and result.registry == "contracts" and result.standIns == []
    return sidecar, stream


@pytest.fixture
async def warm(tmp_path: Path) -> AsyncIterator[tuple[Sidecar, Control]]:
    sidecar, stream = await _connected(tmp_path, "control.sock")
    async with stream:
        yield sidecar, Control(stream)


async def _next(sidecar: Sidecar) -> WarmJob:
    pending = sidecar.warm_next(WarmNextParams())
    assert isinstance(pending, Pending)
    job = await pending.answer()
    assert isinstance(job, WarmJob)
    return job


def _call(session: str | None, n: int = 0) -> ExecuteParams:
    return ExecuteParams(handle=f"h{n}", path="root/0", tool="echo", callId=f"c{n}", args='{"text":"x"}',
                         sessionId=session)


def _run(tmp_path: Path, id: int, config: dict[str, Any], task: str = "hi") -> WarmRun:
    return WarmRun(id=id, cwd=str(tmp_path), task=task, config=config)


async def test_a_run_becomes_a_session_whose_hooks_route_to_its_own_state(
    warm: tuple[Sidecar, Control], tmp_path: Path,
) -> None:
    sidecar, control = warm
    sidecar.tools_registry(RegistryParams(tools=[]))
    await control.send(_run(tmp_path, 1, {"trace": "t1.jsonl"}))
    await control.send(_run(tmp_path, 2, {"trace": "t2.jsonl", "liveTools": []}))
    first, second = await _next(sidecar), await _next(sidecar)
    assert (first.cwd, first.task) == (str(tmp_path), "hi") and first.sessionId != second.sessionId
    # Each session decides with its own config: the second blocks live tools, the first does not.
    assert sidecar.route("tools/execute", _call(first.sessionId, 1)).action == "next"  # type: ignore[union-attr]
    refused = sidecar.route("tools/execute", _call(second.sessionId, 2))
    assert refused.action == "refuse" and refused.code == "LIVE_TOOL_BLOCKED"  # type: ignore[union-attr]
    with pytest.raises(WarmSessionUnknown, match="names no session"):
        sidecar.route("tools/execute", _call(None))
    with pytest.raises(WarmSessionUnknown, match="not open"):
        sidecar.route("session/turn", TurnParams(sessionId="session-other", turn=1, phase="start"))
    done = sidecar.warm_done(WarmDoneParams(sessionId=second.sessionId, text="ok", reason="completed"))
    await done.answer()
    reply = await control.reply()
    assert (reply.id, reply.sessionId, reply.exitCode, reply.stdout) == (2, second.sessionId, 1, "ok\n")
    assert reply.stderr.splitlines()[0].startswith("dsh-sidecar: LIVE_TOOL_BLOCKED: tool echo (call root/0)")
    # The first session lives on; a closed one is unknown from now on.
    assert sidecar.route("tools/execute", _call(first.sessionId, 3)).action == "next"  # type: ignore[union-attr]
    with pytest.raises(WarmSessionUnknown):
        sidecar.route("tools/execute", _call(second.sessionId, 4))
    await sidecar.warm_done(WarmDoneParams(sessionId=first.sessionId, reason="error", code="X", message="m")).answer()
    reply = await control.reply()
    assert (reply.id, reply.exitCode, reply.stderr) == (1, 1, "dsh: X: m\n")


async def test_a_refused_config_and_an_unsuited_run_are_answered_without_a_session(
    warm: tuple[Sidecar, Control], tmp_path: Path,
) -> None:
    sidecar, control = warm
    await control.send(_run(tmp_path, 1, {"toolCassette": {"mode": "replay", "file": "missing.ndjson",
                                                           "include": ["echo"]}}))
    await control.send(_run(tmp_path, 2, {"subagentCassette": {"mode": "record", "file": "a.jsonl"}}))
    await control.send(_run(tmp_path, 3, {"unknown": 1}))
    await control.send(_run(tmp_path, 4, {}))
    job = await _next(sidecar)  # the three before it were answered on the socket
    missing, unsuited, unknown = await control.reply(), await control.reply(), await control.reply()
    assert missing.exitCode == 1 and str(tmp_path) not in missing.stderr
    assert missing.stderr.splitlines() == [
        "dsh-sidecar: INVALID_CONFIG: toolCassette.file: missing.ndjson does not exist (replay reads it)",
        "dsh-sidecar: fix: record it first: run the same task once with toolCassette.mode: record, then replay; "
        "or fix the path",
    ]
    assert unsuited.unsuited.startswith("a subagent cassette") and unsuited.exitCode == 0
    assert unknown.stderr.startswith("dsh-sidecar: INVALID_CONFIG: unknown: unknown key")
    assert unknown.stderr.splitlines()[1].startswith("dsh-sidecar: fix: ")
    assert job.sessionId.startswith("session-")


async def test_the_socket_closing_stops_the_runner_and_shutdown_fails_open_sessions(
    warm: tuple[Sidecar, Control], tmp_path: Path,
) -> None:
    sidecar, control = warm
    await control.send(_run(tmp_path, 7, {}))
    job = await _next(sidecar)
    result = await sidecar.shutdown(ShutdownParams())
    assert result.exitCode == 0
    reply = await control.reply()
    assert (reply.id, reply.sessionId, reply.exitCode) == (7, job.sessionId, 1)
    assert "dsh: the warm host exited during the run" in reply.stderr


async def test_end_of_the_control_socket_is_stop(tmp_path: Path) -> None:
    sidecar, stream = await _connected(tmp_path, "c.sock")
    await stream.aclose()
    assert (await _next(sidecar)).stop


async def test_a_warm_row_with_other_keys_or_no_socket_is_refused_by_name(tmp_path: Path) -> None:
    for config, field in (({"warm": str(tmp_path / "s"), "trace": "t"}, "trace"), ({"warm": ""}, "warm")):
        with pytest.raises(Exception, match=f"INVALID_CONFIG: {field}: "):
            await Sidecar().initialize(InitializeParams(
                protocolVersion=PROTOCOL_VERSION, host={}, config=config, cwd=str(tmp_path), pid=1))
    with pytest.raises(ProtocolError, match="cannot connect to the run API's control socket"):
        await Sidecar().initialize(InitializeParams(
            protocolVersion=PROTOCOL_VERSION, host={}, config={"warm": str(tmp_path / "none")},
            cwd=str(tmp_path), pid=1))


async def test_a_closed_session_leaves_nothing_behind(warm: tuple[Sidecar, Control], tmp_path: Path) -> None:
    # 200 sessions opened and closed, each with a call whose result never came: each one's state is
    # freed (memory stays flat over a long host; the call's handle kept every state alive before).
    import gc
    import weakref

    sidecar, control = warm
    assert sidecar.warm is not None
    refs = []
    for i in range(200):
        await control.send(_run(tmp_path, i, {"liveTools": ["echo"]}))
        job = await _next(sidecar)
        refs.append(weakref.ref(sidecar.warm.state(job.sessionId, "test")))
        sidecar.route("tools/execute", _call(job.sessionId, i))
        await sidecar.warm_done(WarmDoneParams(sessionId=job.sessionId, reason="completed")).answer()
        assert (await control.reply()).exitCode == 0
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert not sidecar.warm.is_open(job.sessionId)


async def test_a_handle_no_open_session_gave_out_is_warm_session_unknown(
    warm: tuple[Sidecar, Control], tmp_path: Path,
) -> None:
    # Fuzz finding (issue 28): both answered NOT_INITIALIZED "arrived before initialize succeeded"
    # although initialize had succeeded.
    sidecar, _control = warm
    with pytest.raises(WarmSessionUnknown, match="a call handle no open session gave out") as post:
        unknown = b'{"handle":"h-unknown","path":"root/0","tool":"echo","result":{"content":[],"isError":false}}'
        sidecar.route("tools/post-execute", msgspec.json.decode(unknown, type=PostExecuteParams))
    with pytest.raises(WarmSessionUnknown, match="a call handle no open session gave out") as recorded:
        recorded_params = ModelRecordedParams(handle=99, chunks=msgspec.Raw(b"[]"), atMs=[], complete=True)
        sidecar.route("model/recorded", recorded_params)
    assert post.value.code == recorded.value.code == "WARM_SESSION_UNKNOWN"
