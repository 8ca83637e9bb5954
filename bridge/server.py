"""The anyio session around ``RpcConnection``: one reader, one writer, a scope per request.

Incoming requests are dispatched through ``jsonrpcserver`` with a per-connection method
table. Two kinds of handler:

- async handlers (waits, slow work) run in the connection's task group, each under its own
  ``CancelScope``, so ``$/cancelRequest`` cancels exactly that request;
- inline handlers (the per-call hooks: plain, fast, never awaiting) run in the reader itself,
  in arrival order, with no task per call: that order is the call order the cassettes number.
"""

from __future__ import annotations

import inspect
import sys
import traceback
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from jsonrpcserver import Error, Result, Success
from jsonrpcserver.async_main import dispatch_to_response
from jsonrpcserver.main import dispatch_to_response as dispatch_inline
from oslash.either import Left  # type: ignore[import-untyped]

from bridge.connection import (
    INVALID_PARAMS,
    SERVER_ERROR,
    Cancel,
    Dispatch,
    Resolve,
    RpcConnection,
    Send,
)
from bridge.protocol import METHODS
from python_core.errors import SidecarError

__all__ = ["MAX_LINE", "Handler", "InlineHandler", "PeerError", "Server"]

MAX_LINE = 64 * 1024 * 1024

Handler = Callable[[Any], Awaitable[msgspec.Struct | None]]
InlineHandler = Callable[[Any], msgspec.Struct | None]


def _incident(exc: BaseException) -> tuple[int, str, dict[str, str]]:
    incident = uuid.uuid4().hex[:12]
    sys.stderr.write(f"dsh-sidecar: incident {incident}\n")
    traceback.print_exception(exc, file=sys.stderr)
    return SERVER_ERROR, f"INTERNAL: internal error, incident {incident} (traceback on stderr)", {
        "code": "INTERNAL",
        "incident": incident,
    }


def _failure(exc: Exception) -> Result:
    if isinstance(exc, SidecarError):
        return Error(SERVER_ERROR, str(exc), exc.to_wire())
    code, message, data = _incident(exc)
    return Error(code, message, data)


_F = TypeVar("_F", bound=Callable[..., Any])


def _with_signature(fn: _F) -> _F:
    # jsonrpcserver checks arguments with inspect.signature() on every call; a precomputed
    # __signature__ is returned as is (about 30 us saved per call).
    fn.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    return fn


def _wrap(method: str, handler: Handler) -> Callable[[Any, msgspec.Raw], Awaitable[Result]]:
    decoder = msgspec.json.Decoder(METHODS[method].params)

    async def run(_context: Any, raw: msgspec.Raw) -> Result:
        try:
            params = decoder.decode(raw)
        except msgspec.DecodeError as exc:
            return Error(INVALID_PARAMS, f"invalid params for {method}: {exc}")
        try:
            return Success(await handler(params))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            return _failure(exc)

    return _with_signature(run)


def _wrap_inline(method: str, handler: InlineHandler) -> Callable[[Any, msgspec.Raw], Result]:
    decoder = msgspec.json.Decoder(METHODS[method].params)

    def run(_context: Any, raw: msgspec.Raw) -> Result:
        try:
            params = decoder.decode(raw)
        except msgspec.DecodeError as exc:
            return Error(INVALID_PARAMS, f"invalid params for {method}: {exc}")
        try:
            return Success(handler(params))
        except Exception as exc:
            return _failure(exc)

    return _with_signature(run)


def _request(action: Dispatch) -> dict[str, Any]:
    # The envelope is already decoded: hand jsonrpcserver the request object, params as one
    # positional Raw argument (our handlers decode it with their Struct).
    request: dict[str, Any] = {"jsonrpc": "2.0", "method": action.method, "params": [action.params]}
    if action.id is not None:
        request["id"] = action.id
    return request


class Server:
    """Serve one connection until the peer closes its end."""

    def __init__(
        self,
        handlers: dict[str, Handler],
        *,
        inline: dict[str, InlineHandler] | None = None,
        max_line: int = MAX_LINE,
    ) -> None:
        self.conn = RpcConnection()
        self.max_line = max_line
        self._methods = {name: _wrap(name, fn) for name, fn in handlers.items()}
        self._inline = {name: _wrap_inline(name, fn) for name, fn in (inline or {}).items()}
        self._scopes: dict[int | str, anyio.CancelScope] = {}
        self._pending: dict[int | str, _Waiter] = {}
        self._outbox: MemoryObjectSendStream[bytes] | None = None
        self._reading = True

    async def call(self, method: str, params: Any) -> msgspec.Raw:
        """Send a request to the peer and wait for its answer.

        Raises:
            PeerError: the peer answered with an error object, or closed its end first.
        """
        if self._outbox is None:
            raise anyio.ClosedResourceError
        if not self._reading:
            raise PeerError(_closed_before(method))
        id_, send = self.conn.request(method, params)
        waiter = _Waiter(method)
        self._pending[id_] = waiter
        try:
            await self._outbox.send(send.data)
            await waiter.done.wait()
        finally:
            self._pending.pop(id_, None)
        if waiter.error is not None:
            raise PeerError(str(waiter.error.get("message", "peer error")))
        return waiter.result

    async def serve(self, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        """Read lines, dispatch, write answers; return on end of input."""
        outbox, inbox = anyio.create_memory_object_stream[bytes](1024)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write_lines, inbox, send)
            # Each request task holds its own clone of the outbox: the writer drains until the
            # reader and every in-flight request have closed theirs (EOF waits for answers).
            self._outbox = outbox
            async with outbox:
                await self._read_lines(BufferedByteReceiveStream(receive), outbox, tg)
                # No answer can arrive any more: fail our pending calls instead of hanging the
                # handlers that wait on them (and, through their outbox clones, serve itself).
                self._reading = False
                for waiter in self._pending.values():
                    waiter.error = {"code": SERVER_ERROR, "message": _closed_before(waiter.method)}
                    waiter.done.set()

    async def _write_lines(
        self, inbox: MemoryObjectReceiveStream[bytes], send: ByteSendStream
    ) -> None:
        # Lines queued while the previous write ran go out in one write: under concurrent load
        # that halves the syscalls per answer. After the peer stops reading, keep draining (and
        # dropping) so that the reader and the handlers never block or crash on the outbox.
        broken = False
        async with inbox:
            async for data in inbox:
                chunks = [data]
                while True:
                    try:
                        chunks.append(inbox.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                if broken:
                    continue
                try:
                    await send.send(data if len(chunks) == 1 else b"".join(chunks))
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    broken = True

    async def _read_lines(
        self, stream: BufferedByteReceiveStream, outbox: MemoryObjectSendStream[bytes], tg: TaskGroup
    ) -> None:
        while True:
            try:
                line = await stream.receive_until(b"\n", self.max_line)
            except anyio.IncompleteRead:
                return
            except anyio.EndOfStream:
                return
            except anyio.DelimiterNotFound:
                await outbox.send(
                    self.conn.protocol_error(f"line longer than {self.max_line} bytes").data
                )
                return
            if not line.strip():
                continue
            for action in self.conn.feed(line):
                if isinstance(action, Send):
                    await outbox.send(action.data)
                elif isinstance(action, Dispatch) and action.method in self._inline:
                    answer = self._run_inline(action)
                    if answer is not None:
                        await outbox.send(answer)
                elif isinstance(action, Dispatch):
                    scope = anyio.CancelScope()
                    if action.id is not None:
                        self._scopes[action.id] = scope
                    tg.start_soon(self._run, action, scope, outbox.clone())
                elif isinstance(action, Cancel):
                    target = self._scopes.get(action.id)
                    if target is not None:
                        target.cancel()
                elif isinstance(action, Resolve):
                    waiter = self._pending.get(action.id)
                    if waiter is not None:
                        waiter.result = action.result or msgspec.Raw(b"null")
                        waiter.error = action.error
                        waiter.done.set()

    async def _run(
        self, action: Dispatch, scope: anyio.CancelScope, outbox: MemoryObjectSendStream[bytes]
    ) -> None:
        request = _request(action)
        async with outbox:
            response: Any = None
            with scope:
                response = await dispatch_to_response(
                    "", self._methods, context=None, deserializer=lambda _: request, validator=lambda r: r
                )
            if action.id is None:
                return
            self._scopes.pop(action.id, None)
            if scope.cancelled_caught:
                response = None
            await outbox.send(self._answer(action.id, response))

    def _run_inline(self, action: Dispatch) -> bytes | None:
        """Run an inline handler to completion; return its answer line (none for notifications)."""
        request = _request(action)
        response = dispatch_inline(
            "", self._inline, context=None, deserializer=lambda _: request, validator=lambda r: r
        )
        return None if action.id is None else self._answer(action.id, response)

    def _answer(self, id_: int | str, response: Any) -> bytes:
        """The answer line for jsonrpcserver's ``response`` (``None``: the request was cancelled)."""
        if response is None:
            return self.conn.respond_error(id_, SERVER_ERROR, "cancelled").data
        if isinstance(response, Left):
            error = response._error
            return self.conn.respond_error(id_, error.code, error.message, _data(error.data)).data
        return self.conn.respond(id_, response._value.result).data


class PeerError(SidecarError):
    """The shim answered one of our requests with an error."""

    code = "PEER_ERROR"


class _Waiter:
    def __init__(self, method: str) -> None:
        self.method = method
        self.done = anyio.Event()
        self.result: msgspec.Raw = msgspec.Raw(b"null")
        self.error: dict[str, Any] | None = None


def _closed_before(method: str) -> str:
    return f"the peer closed its end before answering {method}"


def _data(data: Any) -> Any:
    # jsonrpcserver uses a NODATA sentinel; only real dicts travel.
    return data if isinstance(data, dict) else None
