"""The anyio session around ``RpcConnection``: one reader, one writer, a scope per task.

The method table (``bridge.transport.protocol.METHODS``) drives dispatch: each row names the handler
method of the target object, whether it runs inline and which hook group it belongs to.

- inline rows (the per-call hooks: plain, fast, never awaiting) run in the reader itself, in
  arrival order, with no task per call: that order is the call order the cassettes number.
  They are dispatched directly, not through ``jsonrpcserver`` (docs/protocol.md gives the
  measurement). A handler whose answer must wait for a recorded line to be durable returns a
  ``Later`` (``bridge/transport/later.py``): one task per line writer makes the queued lines durable and
  sends the answers of every ``Later`` in that batch in one write, and the reader reads on.
  ``llm/stream`` is inline as well: a mock step with no wait is answered at once; one with a
  wait returns a ``Pending``, completed in a task of its own under a ``CancelScope``.
  ``initialize`` is inline too: the reader awaits it, so nothing is read before
  the handshake is answered, and the answer does not wait for ``jsonrpcserver`` to import;
- task rows (``shutdown``) are dispatched through ``jsonrpcserver``'s public async API, each
  in its own task under its own ``CancelScope``, so ``$/cancelRequest`` cancels exactly that
  request. ``jsonrpcserver`` is imported in a worker thread right after the handshake, while
  the host finishes booting.

Answers produced while handling one received chunk leave in one write; the write goes straight
to the pipe when nothing is queued, else through the single writer task, in order. A chunk's
``$/cancelRequest`` lines are served first, in a write of their own, unless one cancels a
request received but not yet handled (``RpcConnection.cancels_first``). A long chunk is handled
``_SLICE`` lines at a time, and the input is polled between slices, so a cancel that arrives
meanwhile is served after at most one slice.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import traceback
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import msgspec
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from dsh_sidecar.bridge.transport.connection import (
    CANCEL_MARK,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_ERROR,
    Cancel,
    Dispatch,
    RpcConnection,
    Send,
)
from dsh_sidecar.bridge.transport.framing import LineFramer
from dsh_sidecar.bridge.transport.later import Later, Pending
from dsh_sidecar.bridge.transport.line_writer import LineWriter
from dsh_sidecar.bridge.transport.protocol import INITIALIZE, METHODS, Lifecycle
from dsh_sidecar.bridge.transport.stdio import FdSendStream, NowaitReceive
from dsh_sidecar.python_core.errors import SidecarError

if TYPE_CHECKING:
    from jsonrpcserver import Result

__all__ = ["MAX_LINE", "Server"]

# Longest line accepted, newline excluded: a line of exactly MAX_LINE bytes is served.
MAX_LINE = 64 * 1024 * 1024
# Lines handled between two looks at the input: about 150 us of recording work on these machines,
# so a cancel that arrives during a long chunk waits that long rather than for the whole chunk.
_SLICE = 8
# Polling stops while this many received lines wait: the pipe, not memory, holds what a peer
# sends ahead (backpressure, as when a read is handled whole), and a cancel's look over the
# waiting lines (cancels_first) stays short.
_POLL_BELOW = 64

_Task = Callable[[msgspec.Raw], Awaitable["Result"]]


def _import_jsonrpcserver() -> None:
    # Imported off the handshake's path (it costs about a third of the start-up: jsonschema,
    # oslash): a worker thread imports it while the host finishes booting.
    importlib.import_module("jsonrpcserver")


class _Failure:
    """An error answer: JSON-RPC ``code``, ``message`` and ``data``."""

    __slots__ = ("code", "data", "message")

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        self.code = code
        self.message = message
        self.data = data


def _incident(exc: BaseException) -> _Failure:
    incident = uuid.uuid4().hex[:12]
    sys.stderr.write(f"dsh-sidecar: incident {incident}\n")
    traceback.print_exception(exc, file=sys.stderr)
    return _Failure(
        SERVER_ERROR,
        f"INTERNAL: internal error, incident {incident} (traceback on stderr)",
        {"code": "INTERNAL", "incident": incident},
    )


# A task's result before its work answered: it stays so when the scope was cancelled, and
# jsonrpcserver's "nothing to answer" (a notification) maps to it.
_NO_ANSWER: Any = object()


def _failure(exc: Exception) -> _Failure:
    if isinstance(exc, SidecarError):
        return _Failure(SERVER_ERROR, str(exc), exc.to_wire())
    return _incident(exc)


def _invalid_params(method: str, exc: Exception) -> _Failure:
    if isinstance(exc, RecursionError):
        message = f"NESTING_TOO_DEEP: invalid params for {method}: nesting too deep"
        return _Failure(INVALID_PARAMS, message, {"code": "NESTING_TOO_DEEP"})
    return _Failure(INVALID_PARAMS, f"invalid params for {method}: {exc}")


def _inline(method: str, params: type[msgspec.Struct], handler: Callable[[Any], Any]) -> Callable[[msgspec.Raw], Any]:
    decoder = msgspec.json.Decoder(params)
    if inspect.iscoroutinefunction(handler):
        return _awaited(method, decoder, handler)

    def run(raw: msgspec.Raw) -> Any:
        try:
            decoded = decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            return _invalid_params(method, exc)
        try:
            return handler(decoded)
        except Exception as exc:
            return _failure(exc)

    return run


async def _settle(answer: Callable[[], Awaitable[Any]]) -> Any:
    """A ``Pending`` answer, or the error answer of what it raised."""
    try:
        return await answer()
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:
        return _failure(exc)


def _awaited(
    method: str, decoder: msgspec.json.Decoder[Any], handler: Callable[[Any], Awaitable[Any]]
) -> Callable[[msgspec.Raw], Awaitable[Any]]:
    """An inline row with a coroutine handler: the reader awaits it."""

    async def run(raw: msgspec.Raw) -> Any:
        try:
            decoded = decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            return _invalid_params(method, exc)
        try:
            return await handler(decoded)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            return _failure(exc)

    return run


def _task(method: str, params: type[msgspec.Struct], handler: Callable[[Any], Awaitable[Any]]) -> _Task:
    decoder = msgspec.json.Decoder(params)

    async def run(raw: msgspec.Raw) -> Result:
        from jsonrpcserver import Error, Success

        try:
            decoded = decoder.decode(raw)
        except (msgspec.DecodeError, RecursionError) as exc:
            failure = _invalid_params(method, exc)
            return Error(failure.code, failure.message, failure.data)
        try:
            return Success(await handler(decoded))
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            failure = _failure(exc)
            return Error(failure.code, failure.message, failure.data)

    return run


class Target(Protocol):
    """What a server serves: the handler of each method of the table it serves (``None``: not served)."""

    def handler_for(self, method: str) -> Callable[[Any], Any] | None: ...


class Server:
    """Serve one connection for ``target`` (which names a handler per method of the table) until
    end of input."""

    def __init__(self, target: Target, *, max_line: int = MAX_LINE) -> None:
        self.conn = RpcConnection()
        self.lifecycle = Lifecycle()
        self.max_line = max_line
        self._inline: dict[str, Callable[[msgspec.Raw], Any]] = {}
        # jsonrpcserver's method table, built per connection (no module-global registry).
        self._tasks: dict[str, _Task] = {}
        for name, row in METHODS.items():
            handler = target.handler_for(name)
            if handler is None:
                continue
            if row.inline:
                self._inline[name] = _inline(name, row.params, handler)
            else:
                self._tasks[name] = _task(name, row.params, handler)
        self._scopes: dict[int | str, anyio.CancelScope] = {}
        # Per line writer with a completing task: the Laters its next batch will answer.
        self._waiting: dict[LineWriter, list[tuple[Dispatch, Later]]] = {}
        self._outbox: MemoryObjectSendStream[bytes] | None = None
        self._direct: FdSendStream | None = None
        self._queued = 0
        self._broken = False

    async def serve(self, receive: ByteReceiveStream, send: ByteSendStream) -> None:
        """Read lines, dispatch, write answers; return on end of input once every task answered."""
        outbox, inbox = anyio.create_memory_object_stream[bytes](1024)
        self._outbox = outbox
        self._direct = send if isinstance(send, FdSendStream) else None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write_lines, inbox, send)
            async with outbox:
                async with anyio.create_task_group() as requests:
                    await self._read_lines(receive, requests)

    async def _emit(self, data: bytes) -> None:
        """Write answer bytes: straight to the pipe when nothing is queued, else via the writer."""
        if self._broken:
            return
        if self._queued == 0 and self._direct is not None:
            try:
                written = self._direct.send_nowait(data)
            except anyio.BrokenResourceError:
                self._broken = True
                return
            if written == len(data):
                return
            data = data[written:]
        assert self._outbox is not None
        self._queued += 1
        await self._outbox.send(data)

    async def _write_lines(self, inbox: MemoryObjectReceiveStream[bytes], send: ByteSendStream) -> None:
        # Lines queued while the previous write ran go out in one write. After the peer stops
        # reading, keep draining (and dropping) so that nobody blocks on the outbox.
        async with inbox:
            async for data in inbox:
                chunks = [data]
                while True:
                    try:
                        chunks.append(inbox.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                if not self._broken:
                    try:
                        await send.send(data if len(chunks) == 1 else b"".join(chunks))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        self._broken = True
                self._queued -= len(chunks)

    async def _read_lines(self, receive: ByteReceiveStream, tg: TaskGroup) -> None:
        framer = LineFramer(self.max_line)
        poll = receive.receive_nowait if isinstance(receive, NowaitReceive) else None
        backlog: deque[bytes] = deque()  # lines received and not handled yet, in order
        while True:
            try:
                chunk = await receive.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            answers: list[bytes] = []
            await self._admit(chunk, framer, backlog, tg)
            while backlog:
                for _ in range(min(_SLICE, len(backlog))):
                    await self._handle(backlog.popleft(), answers, tg)
                # A long chunk is handled a slice at a time; what arrived meanwhile is read
                # between slices, so a cancel in it waits for one slice, not the whole chunk.
                if poll is not None and 0 < len(backlog) < _POLL_BELOW and not framer.too_long and (data := poll()):
                    await self._admit(data, framer, backlog, tg)
                    # What is answered so far leaves now, as it would have before a new read.
                    if answers:
                        await self._emit(b"".join(answers))
                        answers = []
            if answers:
                await self._emit(b"".join(answers))
            if framer.too_long:
                await self._too_long()
                return

    async def _admit(self, data: bytes, framer: LineFramer, backlog: deque[bytes], tg: TaskGroup) -> None:
        """Frame ``data`` onto ``backlog``; serve its cancels first (``RpcConnection.cancels_first``)."""
        lines = framer.feed(data)
        if CANCEL_MARK not in data:
            backlog.extend(lines)
            return
        first, rest = self.conn.cancels_first([*backlog, *lines])
        backlog.clear()
        backlog.extend(rest)
        await self._serve(first, tg)

    async def _serve(self, lines: list[bytes], tg: TaskGroup) -> None:
        """Handle ``lines`` in order; their answers leave in one write."""
        answers: list[bytes] = []
        for line in lines:
            await self._handle(line, answers, tg)
        if answers:
            await self._emit(b"".join(answers))

    async def _too_long(self) -> None:
        # Reading stops: the rest of the line cannot be framed, and buffering it has no bound.
        await self._emit(self.conn.protocol_error(f"line longer than {self.max_line} bytes").data)

    async def _handle(self, line: bytes, answers: list[bytes], tg: TaskGroup) -> None:
        if not line or line.isspace():
            return
        for action in self.conn.feed(line):
            if isinstance(action, Send):
                answers.append(action.data)
            elif isinstance(action, Cancel):
                scope = self._scopes.get(action.id)
                if scope is not None:
                    scope.cancel()
            else:
                answer = self._dispatch(action, tg)
                if isinstance(answer, bytes):
                    answers.append(answer)
                elif answer is not None:
                    awaited = await answer
                    if awaited is not None:
                        answers.append(awaited)

    def _dispatch(self, action: Dispatch, tg: TaskGroup) -> bytes | Awaitable[bytes | None] | None:
        """Run an inline method, or start a task; return the answer line known now, if any.

        An inline coroutine handler (``initialize``) comes back as an awaitable of its answer.
        """
        method = action.method
        if method == INITIALIZE and action.id is None:
            return None  # a notification could not tell the shim which hooks to install
        if method in METHODS:
            try:
                self.lifecycle.admit(method)
            except SidecarError as exc:
                return self._refuse(action, INVALID_REQUEST, str(exc), exc.to_wire())
        inline = self._inline.get(method)
        if inline is None and method not in self._tasks:
            return self._refuse(action, METHOD_NOT_FOUND, f"method not found: {method[:100]}")
        if inline is None:
            self._start(action, lambda: self._dispatched(action), tg)
            return None
        result = inline(action.params)
        if isinstance(result, Later):
            self._defer(action, result, tg)
            return None
        if isinstance(result, Pending):
            self._start(action, functools.partial(_settle, result.answer), tg)
            return None
        if inspect.isawaitable(result):
            return self._awaited(action, result, tg)
        return self._answer(action, result)

    def _defer(self, action: Dispatch, later: Later, tg: TaskGroup) -> None:
        waiting = self._waiting.get(later.writer)
        if waiting is not None:
            waiting.append((action, later))
            return
        self._waiting[later.writer] = [(action, later)]
        tg.start_soon(self._complete, later.writer)

    async def _complete(self, writer: LineWriter) -> None:
        """Make ``writer``'s queued lines durable, answer the Laters they held, until none wait."""
        while batch := self._waiting[writer]:
            # Laters deferred during the flush submitted their lines after it took its batch.
            self._waiting[writer] = []
            await writer.flush()
            answers = []
            for action, later in batch:
                try:
                    result = later.finish(later.ticket.failure)
                except Exception as exc:
                    result = _failure(exc)
                answer = self._answer(action, result)
                if answer is not None:
                    answers.append(answer)
            if answers:
                await self._emit(b"".join(answers))
        del self._waiting[writer]

    def _answer(self, action: Dispatch, result: Any) -> bytes | None:
        if action.id is None:
            return None
        if isinstance(result, _Failure):
            return self.conn.respond_error(action.id, result.code, result.message, result.data).data
        return self.conn.respond(action.id, result).data

    async def _awaited(self, action: Dispatch, pending: Awaitable[Any], tg: TaskGroup) -> bytes | None:
        result = await pending
        if action.method == INITIALIZE:
            self.lifecycle.initialized(None if isinstance(result, _Failure) else result)
            tg.start_soon(anyio.to_thread.run_sync, _import_jsonrpcserver)
        return self._answer(action, result)

    def _refuse(self, action: Dispatch, code: int, message: str, data: Any = None) -> bytes | None:
        if action.id is None:
            return None
        return self.conn.respond_error(action.id, code, message, data).data

    def _start(self, action: Dispatch, work: Callable[[], Awaitable[Any]], tg: TaskGroup) -> None:
        """Run ``work`` for ``action`` in a task whose scope ``$/cancelRequest`` cancels."""
        scope = anyio.CancelScope()
        if action.id is not None:
            self._scopes[action.id] = scope
        tg.start_soon(self._run, action, scope, work)

    async def _run(self, action: Dispatch, scope: anyio.CancelScope, work: Callable[[], Awaitable[Any]]) -> None:
        result: Any = _NO_ANSWER
        with scope:
            result = await work()
        if action.id is None:
            return
        self._scopes.pop(action.id, None)
        if scope.cancelled_caught or result is _NO_ANSWER:
            await self._emit(self.conn.respond_error(action.id, SERVER_ERROR, "cancelled").data)
            return
        answer = self._answer(action, result)
        if answer is not None:
            await self._emit(answer)

    async def _dispatched(self, action: Dispatch) -> Any:
        """Serve a task row through ``jsonrpcserver``; its result, or a ``_Failure``."""
        request: dict[str, Any] = {"jsonrpc": "2.0", "method": action.method, "params": [action.params]}
        if action.id is not None:
            request["id"] = action.id
        from jsonrpcserver import async_dispatch_to_serializable

        # The envelope is decoded and checked already: jsonrpcserver gets the request object
        # (its deserializer and validator hooks), params as one positional Raw argument.
        response: Any = await async_dispatch_to_serializable(
            "", self._tasks, deserializer=lambda _: request, validator=lambda r: r
        )
        if response is None:
            return _NO_ANSWER
        if "error" in response:
            error = response["error"]
            data = error.get("data")
            return _Failure(error["code"], error["message"], data if isinstance(data, dict) else None)
        return response["result"]
