"""The anyio session: framing, dispatch from the method table, lifecycle, cancellation, EOF.

A fake peer talks to ``Server.serve`` over in-memory byte streams; tests synchronise with
events and ``wait_all_tasks_blocked()``, never sleeps.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from dsh_sidecar.bridge.transport.connection import CANCELLED, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from dsh_sidecar.bridge.transport.later import Pending
from dsh_sidecar.bridge.transport.protocol import (
    ExecuteDecision,
    ExecuteParams,
    InitializeParams,
    InitializeResult,
    LlmResponse,
    LlmStreamParams,
    ShutdownParams,
    ShutdownResult,
)
from dsh_sidecar.bridge.transport.server import Server
from dsh_sidecar.python_core.errors import ConfigError, ProtocolError

pytestmark = pytest.mark.anyio


class _Receive(ByteReceiveStream):
    def __init__(self, stream: MemoryObjectReceiveStream[bytes]) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._stream.receive()

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Send(ByteSendStream):
    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self._stream = stream
        self.writes: list[bytes] = []  # each write the server made, as made

    async def send(self, item: bytes) -> None:
        self.writes.append(item)
        await self._stream.send(item)

    async def aclose(self) -> None:
        await self._stream.aclose()


class Target:
    """Handlers by method (``tools_execute`` serves ``tools/execute``); ``initialize`` enables ``hooks``."""

    def __init__(self, hooks: Sequence[str] = ("tools", "llm", "subagent"), **handlers: Any) -> None:
        self.hooks = list(hooks)
        stream = handlers.get("llm_stream")
        if stream is not None and inspect.iscoroutinefunction(stream):
            # As the mock driver does for a step with a wait: the answer comes from a task.
            handlers["llm_stream"] = lambda params: Pending(lambda: stream(params))
        self.handlers = {name.replace("_", "/", 1): handler for name, handler in handlers.items()}

    def handler_for(self, method: str) -> Any:
        if method == "initialize":
            return self.initialize
        return self.handlers.get(method)

    async def initialize(self, _params: InitializeParams) -> InitializeResult:
        return InitializeResult(protocolVersion=1, hooks=self.hooks, sidecarVersion="test")  # type: ignore[arg-type]


class Peer:
    """The shim's end: writes chunks to the server, reads its lines."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self._to_server, server_in = anyio.create_memory_object_stream[bytes](100)
        server_out, from_server = anyio.create_memory_object_stream[bytes](100)
        self.server_streams = (_Receive(server_in), _Send(server_out))
        self._lines = BufferedByteReceiveStream(_Receive(from_server))
        self._server_out = server_out
        self.served = anyio.Event()

    async def write(self, chunk: bytes) -> None:
        await self._to_server.send(chunk)

    async def send(self, **fields: Any) -> None:
        await self.write(msgspec.json.encode({"jsonrpc": "2.0", **fields}) + b"\n")

    async def close(self) -> None:
        await self._to_server.aclose()

    async def read(self) -> dict[str, Any]:
        with anyio.fail_after(5):
            message: dict[str, Any] = msgspec.json.decode(await self._lines.receive_until(b"\n", 1 << 20))
        return message

    async def initialize(self) -> dict[str, Any]:
        await self.send(id="init", method="initialize", params=INITIALIZE)
        return await self.read()

    async def run_server(self) -> None:
        await self.server.serve(*self.server_streams)
        await self._server_out.aclose()
        self.served.set()


INITIALIZE = {"protocolVersion": 1, "host": {}, "config": {}, "cwd": "/", "pid": 1}


@asynccontextmanager
async def serving(server: Server, *, initialize: bool = True) -> AsyncIterator[Peer]:
    """Run ``server`` against a fresh peer (initialized first); on exit, wait until ``serve`` returned."""
    peer = Peer(server)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run_server)
        if initialize:
            assert "result" in await peer.initialize()
        yield peer
        with anyio.fail_after(5):
            await peer.served.wait()


def execute(id_: int | str, tool: object = "a", **overrides: Any) -> dict[str, Any]:
    params = {"handle": f"h{id_}", "path": "root/0", "tool": tool, "callId": f"c{id_}", "args": "{}"}
    return {"id": id_, "method": "tools/execute", "params": {**params, **overrides}}


def stream(id_: int | str, session: str = "s") -> dict[str, Any]:
    params = {"sessionId": session, "purpose": None, "turn": 1, "step": 1, "results": [], "tools": []}
    return {"id": id_, "method": "llm/stream", "params": params}


def line(**fields: Any) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", **fields}) + b"\n"


def pass_through(_params: ExecuteParams) -> ExecuteDecision:
    return ExecuteDecision(action="next")


async def test_a_request_split_across_chunks_is_answered() -> None:
    async with serving(Server(Target(tools_execute=pass_through))) as peer:
        data = line(**execute(1))
        for index in range(0, len(data), 7):
            await peer.write(data[index : index + 7])
        assert await peer.read() == {"jsonrpc": "2.0", "id": 1, "result": {"action": "next"}}
        await peer.close()


async def test_several_messages_in_one_chunk_are_each_answered() -> None:
    async with serving(Server(Target(tools_execute=pass_through))) as peer:
        await peer.write(line(**execute(1)) + line(**execute(2)) + b"\n  \n" + line(**execute(3))[:-1])
        assert {(await peer.read())["id"] for _ in range(2)} == {1, 2}
        await peer.write(b"\n")
        assert (await peer.read())["id"] == 3
        await peer.close()


async def test_unknown_method_answers_method_not_found() -> None:
    async with serving(Server(Target())) as peer:
        await peer.send(id=1, method="no/such", params={})
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": METHOD_NOT_FOUND, "message": "method not found: no/such"},
        }
        await peer.close()


async def test_a_table_method_the_target_lacks_answers_method_not_found() -> None:
    async with serving(Server(Target())) as peer:
        await peer.send(**execute(1))
        assert (await peer.read())["error"]["code"] == METHOD_NOT_FOUND
        await peer.close()


async def test_a_line_above_max_line_is_a_protocol_error_and_reading_stops() -> None:
    async with serving(Server(Target(tools_execute=pass_through), max_line=64), initialize=False) as peer:
        await peer.write(b'{"jsonrpc":"2.0","id":1,"method":"tools/execute","params":{"x":"' + b"x" * 100)
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": INVALID_REQUEST, "message": "line longer than 64 bytes"},
        }
        # serve returns without the peer closing its end: nothing more is read.
        with anyio.fail_after(5):
            await peer.served.wait()


@pytest.mark.parametrize("chunk", [1, 7, 1000])
async def test_a_line_of_exactly_max_line_bytes_is_served_however_it_is_chunked(chunk: int) -> None:
    # The cap counts the bytes before the newline: exactly max_line is accepted.
    data = line(id=1, method="no/such", params={"pad": ""})
    max_line = len(data) - 1
    async with serving(Server(Target(), max_line=max_line), initialize=False) as peer:
        for index in range(0, len(data), chunk):
            await peer.write(data[index : index + chunk])
        assert (await peer.read())["error"]["code"] == METHOD_NOT_FOUND
        too_long = line(id=2, method="no/such", params={"pad": "x"})
        for index in range(0, len(too_long), chunk):
            await peer.write(too_long[index : index + chunk])
        assert (await peer.read())["error"]["message"] == f"line longer than {max_line} bytes"


async def test_task_requests_are_answered_out_of_order() -> None:
    b_ran = anyio.Event()

    async def handler(params: LlmStreamParams) -> LlmResponse:
        if params.sessionId == "a":
            await b_ran.wait()
            return LlmResponse(kind="text", text="a")
        b_ran.set()
        return LlmResponse(kind="text", text="b")

    async with serving(Server(Target(llm_stream=handler))) as peer:
        await peer.write(line(**stream(1, "a")) + line(**stream(2, "b")))
        first, second = await peer.read(), await peer.read()
        assert (first["id"], first["result"]["text"]) == (2, "b")
        assert (second["id"], second["result"]["text"]) == (1, "a")
        await peer.close()


async def test_an_llm_stream_answer_with_no_wait_is_answered_in_arrival_order() -> None:
    def handler(params: LlmStreamParams) -> LlmResponse:
        return LlmResponse(kind="text", text=params.sessionId)

    async with serving(Server(Target(llm_stream=handler, tools_execute=pass_through))) as peer:
        await peer.write(line(**stream(1, "a")) + line(**execute(2)))
        # Inline, like the per-call hooks: no task, so it cannot fall behind the next line.
        assert [(await peer.read())["id"] for _ in range(2)] == [1, 2]
        assert any(b'"id":1' in w and b'"id":2' in w for w in peer.server_streams[1].writes)
        await peer.close()


async def test_cancel_request_cancels_the_handler_and_answers_cancelled() -> None:
    seen: list[str] = []

    async def handler(params: LlmStreamParams) -> LlmResponse:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append(f"cancelled {params.sessionId}")
            raise
        raise AssertionError("unreachable")

    async with serving(Server(Target(llm_stream=handler))) as peer:
        await peer.send(**stream(1, "s1"))
        await peer.send(**stream(2, "s2"))
        await anyio.wait_all_tasks_blocked()
        await peer.send(method="$/cancelRequest", params={"id": 1})
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": CANCELLED, "message": "request cancelled"},
        }
        assert seen == ["cancelled s1"]
        # The other request is still running; cancelling an unknown id changes nothing.
        await peer.send(method="$/cancelRequest", params={"id": 99})
        await anyio.wait_all_tasks_blocked()
        assert seen == ["cancelled s1"]
        # Sent as a request, $/cancelRequest is carried out and answered.
        await peer.send(id="c", method="$/cancelRequest", params={"id": 2})
        answers: dict[str, dict[str, Any]] = {}
        for _ in range(2):
            answer = await peer.read()
            answers[answer["id"]] = answer
        assert answers["c"] == {"jsonrpc": "2.0", "id": "c", "result": None}
        assert answers[2]["error"]["code"] == CANCELLED
        assert seen == ["cancelled s1", "cancelled s2"]
        await peer.close()


async def test_a_cancel_read_behind_other_requests_is_answered_before_them() -> None:
    async with serving(Server(Target(tools_execute=pass_through))) as peer:
        cancel = line(id="c", method="$/cancelRequest", params={"id": 99})
        await peer.write(line(**execute(10)) + line(**execute(11)) + cancel)
        assert [(await peer.read())["id"] for _ in range(3)] == ["c", 10, 11]
        # Cancelling a request read just before it keeps arrival order: it is in flight first.
        await peer.write(line(**execute(12)) + line(id="d", method="$/cancelRequest", params={"id": 12}))
        assert [(await peer.read())["id"] for _ in range(2)] == [12, "d"]
        await peer.close()


async def test_llm_stream_is_served_without_jsonrpcserver_and_shutdown_through_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import jsonrpcserver

    dispatched: list[str] = []
    real = jsonrpcserver.async_dispatch_to_serializable

    async def counting(request: str, methods: Any, **kwargs: Any) -> Any:
        dispatched.append(kwargs["deserializer"]("")["method"])
        return await real(request, methods, **kwargs)

    monkeypatch.setattr(jsonrpcserver, "async_dispatch_to_serializable", counting)

    async def llm_stream(params: LlmStreamParams) -> LlmResponse:
        return LlmResponse(kind="text", text=params.sessionId)

    async def shutdown(_params: ShutdownParams) -> ShutdownResult:
        return ShutdownResult(exitCode=0, errors=[])

    async with serving(Server(Target(llm_stream=llm_stream, shutdown=shutdown))) as peer:
        await peer.send(**stream(1, "s1"))
        assert (await peer.read())["result"]["text"] == "s1"
        await peer.send(id=2, method="shutdown", params={})
        assert (await peer.read())["result"]["exitCode"] == 0
        assert dispatched == ["shutdown"]
        await peer.close()


async def test_end_of_input_with_requests_in_flight_answers_them_then_returns() -> None:
    release = anyio.Event()

    async def handler(_params: LlmStreamParams) -> LlmResponse:
        await release.wait()
        return LlmResponse(kind="text")

    async with serving(Server(Target(llm_stream=handler))) as peer:
        await peer.send(**stream(1))
        await peer.send(**stream(2))
        await peer.close()
        await anyio.wait_all_tasks_blocked()
        assert not peer.served.is_set()
        release.set()
        assert {(await peer.read())["id"], (await peer.read())["id"]} == {1, 2}
        with anyio.fail_after(5):
            await peer.served.wait()


async def test_sidecar_error_travels_as_data_code() -> None:
    def handler(_params: ExecuteParams) -> ExecuteDecision:
        raise ProtocolError("refused on purpose")

    async with serving(Server(Target(tools_execute=handler))) as peer:
        await peer.send(**execute(1))
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32000,
                "message": "PROTOCOL_ERROR: refused on purpose",
                "data": {"code": "PROTOCOL_ERROR"},
            },
        }
        await peer.close()


@pytest.mark.parametrize("method", ["tools/execute", "llm/stream"])
async def test_unexpected_exception_is_internal_with_an_incident_and_no_traceback(
    capsys: pytest.CaptureFixture[str], method: str
) -> None:
    def boom(_params: object) -> ExecuteDecision:
        raise KeyError("secret-argument-value")

    async def async_boom(_params: object) -> LlmResponse:
        raise KeyError("secret-argument-value")

    async with serving(Server(Target(tools_execute=boom, llm_stream=async_boom))) as peer:
        await peer.send(**(execute(1) if method == "tools/execute" else stream(1)))
        error = (await peer.read())["error"]
        await peer.close()
    incident = error["data"]["incident"]
    assert len(incident) == 12
    assert error == {
        "code": -32000,
        "message": f"INTERNAL: internal error, incident {incident} (traceback on stderr)",
        "data": {"code": "INTERNAL", "incident": incident},
    }
    stderr = capsys.readouterr().err
    assert f"dsh-sidecar: incident {incident}" in stderr
    assert "Traceback" in stderr
    assert "secret-argument-value" in stderr


async def test_invalid_params_answer_invalid_params_naming_the_field() -> None:
    async def text(_params: LlmStreamParams) -> LlmResponse:
        return LlmResponse(kind="text")

    async with serving(Server(Target(tools_execute=pass_through, llm_stream=text))) as peer:
        await peer.send(**execute(1, tool=7))
        error = (await peer.read())["error"]
        assert error["code"] == INVALID_PARAMS
        assert error["message"] == "invalid params for tools/execute: Expected `str`, got `int` - at `$.tool`"
        await peer.send(**execute(2, extra=1))
        error = (await peer.read())["error"]
        assert error["message"] == "invalid params for tools/execute: Object contains unknown field `extra`"
        await peer.send(**{**stream(3), "params": {"sessionId": 1}})
        assert (await peer.read())["error"]["code"] == INVALID_PARAMS
        await peer.close()


async def test_notification_runs_the_handler_and_is_not_answered() -> None:
    ran = anyio.Event()

    async def handler(_params: ShutdownParams) -> ShutdownResult:
        ran.set()
        return ShutdownResult(exitCode=0, errors=[])

    async with serving(Server(Target(shutdown=handler, tools_execute=pass_through))) as peer:
        await peer.send(method="shutdown", params={})
        await ran.wait()
        await peer.send(**execute(1))
        assert (await peer.read())["id"] == 1
        await peer.close()


async def test_a_peer_that_stops_reading_does_not_crash_the_server() -> None:
    class _Broken(ByteSendStream):
        async def send(self, item: bytes) -> None:
            raise anyio.BrokenResourceError

        async def aclose(self) -> None:
            pass

    class _AfterInitialize(ByteReceiveStream):
        """Hands out the initialize line, then the rest once initialize has run."""

        def __init__(self, first: bytes, rest: bytes, ready: anyio.Event) -> None:
            self.chunks = [first, rest]
            self.ready = ready

        async def receive(self, max_bytes: int = 65536) -> bytes:
            if not self.chunks:
                raise anyio.EndOfStream
            if len(self.chunks) == 1:
                await self.ready.wait()
                await anyio.wait_all_tasks_blocked()
            return self.chunks.pop(0)

        async def aclose(self) -> None:
            pass

    handled: list[str] = []
    initialized = anyio.Event()

    class Recording(Target):
        async def initialize(self, params: InitializeParams) -> InitializeResult:
            initialized.set()
            return await super().initialize(params)

    def handler(params: ExecuteParams) -> ExecuteDecision:
        handled.append(params.handle)
        return ExecuteDecision(action="next")

    rest = b"".join(line(**execute(id_)) for id_ in range(1, 4)) + b"not json\n"
    receive = _AfterInitialize(line(id=0, method="initialize", params=INITIALIZE), rest, initialized)
    with anyio.fail_after(5):
        await Server(Recording(tools_execute=handler)).serve(receive, _Broken())
    assert handled == ["h1", "h2", "h3"]


async def test_answers_ready_together_leave_in_one_write() -> None:
    class _Recording(ByteSendStream):
        def __init__(self) -> None:
            self.writes: list[bytes] = []

        async def send(self, item: bytes) -> None:
            self.writes.append(item)

        async def aclose(self) -> None:
            pass

    to_server, server_in = anyio.create_memory_object_stream[bytes](10)
    out = _Recording()
    async with to_server:
        await to_server.send(b"".join(line(id=n, method="no/such") for n in range(1, 5)))
    await Server(Target()).serve(_Receive(server_in), out)
    answers = [msgspec.json.decode(raw) for raw in b"".join(out.writes).splitlines()]
    assert sorted(answer["id"] for answer in answers) == [1, 2, 3, 4]
    assert len(out.writes) == 1


async def test_inline_handlers_answer_in_arrival_order_without_a_task_each() -> None:
    seen: list[str] = []

    def record(params: ExecuteParams) -> ExecuteDecision:
        seen.append(params.handle)
        return ExecuteDecision(action="next")

    async with serving(Server(Target(tools_execute=record))) as peer:
        await peer.write(b"".join(line(**execute(n)) for n in range(1, 6)))
        assert [(await peer.read())["id"] for _ in range(5)] == [1, 2, 3, 4, 5]
        await peer.close()

    assert seen == ["h1", "h2", "h3", "h4", "h5"]


async def test_an_inline_handler_failure_is_a_named_error_and_serving_goes_on() -> None:
    def refuse(params: ExecuteParams) -> ExecuteDecision:
        if params.handle == "h1":
            raise ProtocolError("refused on purpose")
        return ExecuteDecision(action="next")

    async with serving(Server(Target(tools_execute=refuse))) as peer:
        await peer.write(line(**execute(1)) + line(**execute(2)))
        first, second = await peer.read(), await peer.read()
        await peer.close()

    assert first["error"]["data"] == {"code": "PROTOCOL_ERROR"}
    assert second["result"] == {"action": "next"}


async def test_a_hook_before_initialize_is_not_initialized() -> None:
    async with serving(Server(Target(tools_execute=pass_through)), initialize=False) as peer:
        await peer.send(**execute(1))
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": INVALID_REQUEST,
                "message": "NOT_INITIALIZED: tools/execute arrived before initialize succeeded; send initialize first",
                "data": {"code": "NOT_INITIALIZED"},
            },
        }
        await peer.close()


async def test_a_second_initialize_is_refused_and_changes_nothing() -> None:
    calls: list[str] = []

    class Counting(Target):
        async def initialize(self, params: InitializeParams) -> InitializeResult:
            calls.append(params.cwd)
            return await super().initialize(params)

    async with serving(Server(Counting(hooks=["tools"], tools_execute=pass_through))) as peer:
        await peer.send(id=2, method="initialize", params={**INITIALIZE, "cwd": "/other"})
        error = (await peer.read())["error"]
        assert error["data"] == {"code": "ALREADY_INITIALIZED"}
        assert error["message"].startswith("ALREADY_INITIALIZED: initialize was already sent on this connection")
        await peer.send(**execute(3))
        assert (await peer.read())["result"] == {"action": "next"}
        await peer.close()
    assert calls == ["/"]


async def test_a_hook_of_a_group_initialize_did_not_enable_is_named() -> None:
    async with serving(Server(Target(hooks=["tools"], tools_execute=pass_through))) as peer:
        await peer.send(**stream(1))
        error = (await peer.read())["error"]
        assert error == {
            "code": INVALID_REQUEST,
            "message": "HOOK_NOT_ENABLED: llm/stream belongs to the llm hooks, which initialize did not enable "
            "(enabled: tools); install only the hooks the initialize reply names",
            "data": {"code": "HOOK_NOT_ENABLED"},
        }
        await peer.send(**execute(2))
        assert (await peer.read())["result"] == {"action": "next"}
        await peer.close()


async def test_after_a_failed_initialize_hooks_stay_refused_and_shutdown_works() -> None:
    class Failing(Target):
        async def initialize(self, params: InitializeParams) -> InitializeResult:
            raise ConfigError("toolCassette.mode", "must be record or replay")

    async def shutdown(_params: ShutdownParams) -> ShutdownResult:
        return ShutdownResult(exitCode=0, errors=[])

    async with serving(Server(Failing(tools_execute=pass_through, shutdown=shutdown)), initialize=False) as peer:
        assert (await peer.initialize())["error"]["data"]["code"] == "INVALID_CONFIG"
        await peer.send(**execute(1))
        assert (await peer.read())["error"]["data"] == {"code": "NOT_INITIALIZED"}
        await peer.send(id=2, method="shutdown", params={})
        assert (await peer.read())["result"] == {"exitCode": 0, "errors": []}
        await peer.close()


async def test_params_nested_beyond_the_decoder_are_a_named_error() -> None:
    deep = b"[" * 5000 + b"]" * 5000
    async with serving(Server(Target(tools_execute=pass_through))) as peer:
        await peer.write(b'{"jsonrpc":"2.0","id":1,"method":"tools/execute","params":' + deep + b"}\n")
        assert (await peer.read())["error"]["data"] == {"code": "NESTING_TOO_DEEP"}
        await peer.send(**execute(2))
        assert (await peer.read())["result"] == {"action": "next"}
        await peer.close()


class _Polled(_Receive):
    """A receive stream the server may also poll between slices of a long chunk, as it polls stdin."""

    def receive_nowait(self) -> bytes:
        try:
            return self._stream.receive_nowait()
        except (anyio.WouldBlock, anyio.EndOfStream):
            return b""


async def _serve_one_chunk(requests: int, arrives_during: int, cancel_target: int) -> list[list[Any]]:
    """Serve initialize and ``requests`` executes in one chunk; a cancel arrives while the
    ``arrives_during``-th is handled. Returns the ids of each write the server made."""
    to_server, server_in = anyio.create_memory_object_stream[bytes](10)
    server_out, from_server = anyio.create_memory_object_stream[bytes](100)
    out = _Send(server_out)

    def execute_(params: ExecuteParams) -> ExecuteDecision:
        if params.handle == f"h{arrives_during}":
            to_server.send_nowait(line(id="c", method="$/cancelRequest", params={"id": cancel_target}))
            to_server.close()
        return ExecuteDecision(action="next")

    chunk = line(id="init", method="initialize", params=INITIALIZE)
    chunk += b"".join(line(**execute(n)) for n in range(1, requests + 1))
    to_server.send_nowait(chunk)
    async with from_server:
        with anyio.fail_after(5):
            await Server(Target(tools_execute=execute_)).serve(_Polled(server_in), out)
    return [[msgspec.json.decode(raw)["id"] for raw in write.splitlines()] for write in out.writes]


async def test_a_cancel_arriving_during_a_long_chunk_is_answered_before_the_rest_of_it() -> None:
    writes = await _serve_one_chunk(40, arrives_during=3, cancel_target=999)
    # Read between two slices of the chunk and answered at once, in a write of its own, ahead
    # of the chunk's answers (before, it was read only once the whole chunk was handled).
    assert writes[0] == ["c"]
    assert [i for write in writes[1:] for i in write] == ["init", *range(1, 41)]


async def test_a_cancel_arriving_during_a_chunk_waits_for_its_target_still_unhandled() -> None:
    writes = await _serve_one_chunk(40, arrives_during=3, cancel_target=30)
    ids = [i for write in writes for i in write]
    assert ids.index(30) < ids.index("c")
    assert sorted(map(str, ids)) == sorted(map(str, ["init", "c", *range(1, 41)]))


async def test_polling_adds_to_a_short_backlog_only_so_a_flooding_peer_meets_backpressure() -> None:
    # Input that always has 64 more requests ready: read between slices without a bound, the
    # waiting lines grew by 56 per slice (the fuzz found a sidecar stuck re-scanning them).
    produced = handled = most_waiting = 0
    total = 64 * 200

    class _Flood(_Receive):
        def receive_nowait(self) -> bytes:
            nonlocal produced
            if produced >= total:
                return b""
            chunk = b"".join(line(**execute(produced + k)) for k in range(64))
            produced += 64
            return chunk

    def execute_(_params: ExecuteParams) -> ExecuteDecision:
        nonlocal handled, most_waiting
        handled += 1
        most_waiting = max(most_waiting, produced + 64 - handled)
        return ExecuteDecision(action="next")

    to_server, server_in = anyio.create_memory_object_stream[bytes](10)
    server_out, from_server = anyio.create_memory_object_stream[bytes](100_000)
    to_server.send_nowait(line(id="init", method="initialize", params=INITIALIZE)
                          + b"".join(line(**execute(f"first{k}")) for k in range(64)))
    to_server.close()
    async with from_server:
        with anyio.fail_after(10):
            await Server(Target(tools_execute=execute_)).serve(_Flood(server_in), _Send(server_out))
    assert handled == 64 + total
    assert most_waiting <= 2 * 64
