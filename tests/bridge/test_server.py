"""The anyio session: framing, concurrency, cancellation, EOF and error mapping.

A fake peer talks to ``Server.serve`` over in-memory byte streams; tests synchronise with
events and ``wait_all_tasks_blocked()``, never sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from bridge.connection import CANCELLED, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from bridge.protocol import ExecuteDecision, ExecuteParams, ShutdownParams, ShutdownResult
from bridge.server import PeerError, Server
from python_core.errors import ProtocolError

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

    async def send(self, item: bytes) -> None:
        await self._stream.send(item)

    async def aclose(self) -> None:
        await self._stream.aclose()


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
            message: dict[str, Any] = msgspec.json.decode(
                await self._lines.receive_until(b"\n", 1 << 20)
            )
        return message

    async def run_server(self) -> None:
        await self.server.serve(*self.server_streams)
        await self._server_out.aclose()
        self.served.set()


@asynccontextmanager
async def serving(server: Server) -> AsyncIterator[Peer]:
    """Run ``server`` against a fresh peer; on exit, wait until ``serve`` has returned."""
    peer = Peer(server)
    async with anyio.create_task_group() as tg:
        tg.start_soon(peer.run_server)
        yield peer
        with anyio.fail_after(5):
            await peer.served.wait()


def execute(id_: int | str, tool: object = "a", **overrides: Any) -> dict[str, Any]:
    params = {
        "handle": f"h{id_}",
        "path": "root/0",
        "tool": tool,
        "callId": f"c{id_}",
        "args": "{}",
    }
    return {"id": id_, "method": "tools/execute", "params": {**params, **overrides}}


def line(**fields: Any) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", **fields}) + b"\n"


async def pass_through(_params: ExecuteParams) -> ExecuteDecision:
    return ExecuteDecision(action="next")


async def test_a_request_split_across_chunks_is_answered() -> None:
    async with serving(Server({"tools/execute": pass_through})) as peer:
        data = line(**execute(1))
        for index in range(0, len(data), 7):
            await peer.write(data[index : index + 7])
        assert await peer.read() == {"jsonrpc": "2.0", "id": 1, "result": {"action": "next"}}
        await peer.close()


async def test_several_messages_in_one_chunk_are_each_answered() -> None:
    async with serving(Server({"tools/execute": pass_through})) as peer:
        await peer.write(line(**execute(1)) + line(**execute(2)) + b"\n" + line(**execute(3))[:-1])
        assert {(await peer.read())["id"] for _ in range(2)} == {1, 2}
        await peer.write(b"\n")
        assert (await peer.read())["id"] == 3
        await peer.close()


async def test_unknown_method_answers_method_not_found() -> None:
    async with serving(Server({})) as peer:
        await peer.send(id=1, method="no/such", params={})
        answer = await peer.read()
        assert answer["id"] == 1
        assert answer["error"]["code"] == METHOD_NOT_FOUND
        await peer.close()


async def test_a_line_above_max_line_is_a_protocol_error_and_reading_stops() -> None:
    async with serving(Server({"tools/execute": pass_through}, max_line=64)) as peer:
        await peer.write(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/execute","params":{"x":"' + b"x" * 100
        )
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": INVALID_REQUEST, "message": "line longer than 64 bytes"},
        }
        # serve returns without the peer closing its end: nothing more is read.
        with anyio.fail_after(5):
            await peer.served.wait()


async def test_concurrent_requests_are_answered_out_of_order() -> None:
    b_ran = anyio.Event()

    async def handler(params: ExecuteParams) -> ExecuteDecision:
        if params.tool == "a":
            await b_ran.wait()
            return ExecuteDecision(action="next")
        b_ran.set()
        return ExecuteDecision(action="refuse", code="B", message="b")

    async with serving(Server({"tools/execute": handler})) as peer:
        await peer.write(line(**execute(1, "a")) + line(**execute(2, "b")))
        first, second = await peer.read(), await peer.read()
        assert (first["id"], first["result"]["action"]) == (2, "refuse")
        assert (second["id"], second["result"]["action"]) == (1, "next")
        await peer.close()


async def test_cancel_request_cancels_the_handler_and_answers_cancelled() -> None:
    seen: list[str] = []

    async def handler(params: ExecuteParams) -> ExecuteDecision:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            seen.append(f"cancelled {params.handle}")
            raise
        raise AssertionError("unreachable")

    async with serving(
        Server({"tools/execute": handler, "tools/post-execute": pass_through})
    ) as peer:
        await peer.send(**execute(1))
        await peer.send(**execute(2))
        await anyio.wait_all_tasks_blocked()
        await peer.send(method="$/cancelRequest", params={"id": 1})
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": CANCELLED, "message": "request cancelled"},
        }
        assert seen == ["cancelled h1"]
        # The other request is still running; cancelling an unknown id changes nothing.
        await peer.send(method="$/cancelRequest", params={"id": 99})
        await anyio.wait_all_tasks_blocked()
        assert seen == ["cancelled h1"]
        await peer.send(method="$/cancelRequest", params={"id": 2})
        assert (await peer.read())["error"]["code"] == CANCELLED
        assert seen == ["cancelled h1", "cancelled h2"]
        await peer.close()


async def test_end_of_input_with_requests_in_flight_answers_them_then_returns() -> None:
    release = anyio.Event()

    async def handler(_params: ExecuteParams) -> ExecuteDecision:
        await release.wait()
        return ExecuteDecision(action="next")

    async with serving(Server({"tools/execute": handler})) as peer:
        await peer.send(**execute(1))
        await peer.send(**execute(2))
        await peer.close()
        await anyio.wait_all_tasks_blocked()
        assert not peer.served.is_set()
        release.set()
        assert {(await peer.read())["id"], (await peer.read())["id"]} == {1, 2}
        with anyio.fail_after(5):
            await peer.served.wait()


async def test_sidecar_error_travels_as_data_code() -> None:
    async def handler(_params: ExecuteParams) -> ExecuteDecision:
        raise ProtocolError("a hook arrived before initialize")

    async with serving(Server({"tools/execute": handler})) as peer:
        await peer.send(**execute(1))
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32000,
                "message": "PROTOCOL_ERROR: a hook arrived before initialize",
                "data": {"code": "PROTOCOL_ERROR"},
            },
        }
        await peer.close()


async def test_unexpected_exception_is_internal_with_an_incident_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def handler(_params: ExecuteParams) -> ExecuteDecision:
        raise KeyError("secret-argument-value")

    async with serving(Server({"tools/execute": handler})) as peer:
        await peer.send(**execute(1))
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
    async with serving(Server({"tools/execute": pass_through})) as peer:
        await peer.send(**execute(1, tool=7))
        error = (await peer.read())["error"]
        assert error["code"] == INVALID_PARAMS
        assert (
            error["message"]
            == "invalid params for tools/execute: Expected `str`, got `int` - at `$.tool`"
        )
        await peer.send(**execute(2, extra=1))
        error = (await peer.read())["error"]
        assert (
            error["message"]
            == "invalid params for tools/execute: Object contains unknown field `extra`"
        )
        await peer.close()


async def test_notification_runs_the_handler_and_is_not_answered() -> None:
    ran = anyio.Event()

    async def handler(_params: ShutdownParams) -> None:
        ran.set()

    async with serving(Server({"shutdown": handler, "tools/execute": pass_through})) as peer:
        await peer.send(method="shutdown", params={})
        await ran.wait()
        await peer.send(**execute(1))
        assert (await peer.read())["id"] == 1
        await peer.close()


async def test_call_round_trips_a_request_to_the_peer() -> None:
    results: list[bytes] = []

    async def handler(_params: ShutdownParams) -> ShutdownResult:
        answer = await server.call("host/echo", {"n": 1})
        results.append(bytes(answer))
        return ShutdownResult(exitCode=0, errors=[])

    server = Server({"shutdown": handler})
    async with serving(server) as peer:
        await peer.send(id="s", method="shutdown", params={})
        request = await peer.read()
        assert request == {"jsonrpc": "2.0", "id": 1, "method": "host/echo", "params": {"n": 1}}
        await peer.send(id=1, result={"n": 2})
        assert await peer.read() == {
            "jsonrpc": "2.0",
            "id": "s",
            "result": {"exitCode": 0, "errors": []},
        }
        assert results == [b'{"n":2}']
        await peer.close()


async def test_call_answered_with_an_error_raises_peer_error() -> None:
    failures: list[str] = []

    async def handler(_params: ShutdownParams) -> ShutdownResult:
        try:
            await server.call("host/echo", {})
        except PeerError as exc:
            failures.append(str(exc))
        return ShutdownResult(exitCode=1, errors=[])

    server = Server({"shutdown": handler})
    async with serving(server) as peer:
        await peer.send(id="s", method="shutdown", params={})
        request = await peer.read()
        await peer.send(
            id=request["id"], error={"code": -32000, "message": "unknown method host/echo"}
        )
        assert (await peer.read())["result"]["exitCode"] == 1
        assert failures == ["PEER_ERROR: unknown method host/echo"]
        await peer.close()


async def test_end_of_input_fails_our_pending_calls_and_serve_returns() -> None:
    failures: list[str] = []

    async def handler(_params: ShutdownParams) -> ShutdownResult:
        try:
            await server.call("host/echo", {})
        except PeerError as exc:
            failures.append(str(exc))
        return ShutdownResult(exitCode=1, errors=[])

    server = Server({"shutdown": handler})
    async with serving(server) as peer:
        await peer.send(id="s", method="shutdown", params={})
        await peer.read()
        await peer.close()
        assert (await peer.read())["result"]["exitCode"] == 1
    assert failures == ["PEER_ERROR: the peer closed its end before answering host/echo"]


async def test_call_before_serve_raises_closed() -> None:
    with pytest.raises(anyio.ClosedResourceError):
        await Server({}).call("host/echo", {})


async def test_a_peer_that_stops_reading_does_not_crash_the_server() -> None:
    class _Broken(ByteSendStream):
        async def send(self, item: bytes) -> None:
            raise anyio.BrokenResourceError

        async def aclose(self) -> None:
            pass

    handled: list[str] = []

    async def handler(params: ExecuteParams) -> ExecuteDecision:
        handled.append(params.handle)
        return ExecuteDecision(action="next")

    to_server, server_in = anyio.create_memory_object_stream[bytes](10)
    async with to_server:
        for id_ in range(1, 4):
            await to_server.send(line(**execute(id_)))
        await to_server.send(b"not json\n")
    with anyio.fail_after(5):
        await Server({"tools/execute": handler}).serve(_Receive(server_in), _Broken())
    assert handled == ["h1", "h2", "h3"]


async def test_call_after_the_peer_closed_raises_peer_error() -> None:
    to_server, server_in = anyio.create_memory_object_stream[bytes](1)
    sink, _ = anyio.create_memory_object_stream[bytes](1)
    server = Server({})
    await to_server.aclose()
    await server.serve(_Receive(server_in), _Send(sink))
    with pytest.raises(PeerError, match="closed its end before answering host/echo"):
        await server.call("host/echo", {})


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
        await to_server.send(b"".join(line(**execute(id_)) for id_ in range(1, 5)))
    await Server({"tools/execute": pass_through}).serve(_Receive(server_in), out)
    answers = [msgspec.json.decode(raw) for raw in b"".join(out.writes).splitlines()]
    assert sorted(answer["id"] for answer in answers) == [1, 2, 3, 4]
    assert len(out.writes) < 4


async def test_inline_handlers_answer_in_arrival_order_without_a_task_each() -> None:
    seen: list[str] = []

    def record(params: ExecuteParams) -> ExecuteDecision:
        seen.append(params.handle)
        return ExecuteDecision(action="next")

    async with serving(Server({}, inline={"tools/execute": record})) as peer:
        await peer.write(b"".join(line(**execute(n)) for n in range(1, 6)))
        assert [(await peer.read())["id"] for _ in range(5)] == [1, 2, 3, 4, 5]
        await peer.close()

    assert seen == ["h1", "h2", "h3", "h4", "h5"]


async def test_an_inline_handler_failure_is_a_named_error_and_serving_goes_on() -> None:
    def refuse(params: ExecuteParams) -> ExecuteDecision:
        if params.handle == "h1":
            raise ProtocolError("refused on purpose")
        return ExecuteDecision(action="next")

    async with serving(Server({}, inline={"tools/execute": refuse})) as peer:
        await peer.write(line(**execute(1)) + line(**execute(2)))
        first, second = await peer.read(), await peer.read()
        await peer.close()

    assert first["error"]["data"] == {"code": "PROTOCOL_ERROR"}
    assert second["result"] == {"action": "next"}
