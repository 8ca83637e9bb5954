"""The sans-I/O JSON-RPC 2.0 endpoint: lines in, actions out.

``RpcConnection.feed(line)`` turns one received line into actions (``Dispatch``, ``Cancel``,
``Resolve``, ``Send``); ``respond``/``request`` build outgoing lines. One pending map per
direction; ids come from an injected counter. It never touches a pipe, so tests feed lines.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = [
    "CANCELLED",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "Action",
    "Cancel",
    "Dispatch",
    "Resolve",
    "RpcConnection",
    "Send",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
CANCELLED = -32800
SERVER_ERROR = -32000


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    jsonrpc: str
    id: int | str | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: dict[str, Any] | None = None


class _CancelParams(msgspec.Struct):
    id: int | str


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_CANCEL = msgspec.json.Decoder(_CancelParams)
_ENCODER = msgspec.json.Encoder()


@dataclass(frozen=True)
class Send:
    """Write these bytes (one ``\\n``-terminated line) to the peer."""

    data: bytes


@dataclass(frozen=True)
class Dispatch:
    """Run ``method``; ``id`` is ``None`` for a notification."""

    id: int | str | None
    method: str
    params: msgspec.Raw


@dataclass(frozen=True)
class Cancel:
    """Cancel the in-flight incoming request ``id``."""

    id: int | str


@dataclass(frozen=True)
class Resolve:
    """The answer to our own request ``id``: ``result`` raw JSON, or ``error``."""

    id: int | str
    result: msgspec.Raw | None
    error: dict[str, Any] | None


Action = Send | Dispatch | Cancel | Resolve


def _error_line(id_: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _ENCODER.encode({"jsonrpc": "2.0", "id": id_, "error": error}) + b"\n"


class RpcConnection:
    """Per-connection protocol state: in-flight incoming ids and our pending requests."""

    def __init__(self, ids: Iterator[int] | None = None) -> None:
        self._ids = ids if ids is not None else itertools.count(1)
        self.incoming: set[int | str] = set()
        self.outgoing: set[int | str] = set()
        self.cancelled: set[int | str] = set()

    def feed(self, line: bytes) -> list[Action]:
        """Interpret one received line (without its newline)."""
        try:
            envelope = _ENVELOPE.decode(line)
        except msgspec.DecodeError:
            try:
                value = msgspec.json.decode(line)
            except msgspec.DecodeError:
                return [Send(_error_line(None, PARSE_ERROR, "parse error: the line is not JSON"))]
            # Answer with the request's own id when it has one, so the peer's call settles.
            id_ = value.get("id") if isinstance(value, dict) else None
            if not isinstance(id_, int | str) or isinstance(id_, bool):
                id_ = None
            return [Send(_error_line(id_, INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message"))]
        if envelope.jsonrpc != "2.0":
            return [Send(_error_line(envelope.id, INVALID_REQUEST, "invalid request: jsonrpc must be \"2.0\""))]
        if envelope.method is None:
            if envelope.id is None or envelope.id not in self.outgoing:
                return []
            self.outgoing.discard(envelope.id)
            result = None if envelope.error is not None else envelope.result
            return [Resolve(envelope.id, result, envelope.error)]
        if envelope.method == "$/cancelRequest":
            try:
                target = _CANCEL.decode(envelope.params).id
            except msgspec.DecodeError:
                return []
            if target not in self.incoming:
                return []
            self.cancelled.add(target)
            return [Cancel(target)]
        if envelope.id is not None:
            if envelope.id in self.incoming:
                return [Send(_error_line(envelope.id, INVALID_REQUEST, "invalid request: id already in flight"))]
            self.incoming.add(envelope.id)
        return [Dispatch(envelope.id, envelope.method, envelope.params)]

    def respond(self, id_: int | str, result: Any) -> Send:
        """Answer incoming request ``id_`` with ``result`` (any msgspec-encodable value)."""
        self.incoming.discard(id_)
        if id_ in self.cancelled:
            self.cancelled.discard(id_)
            return Send(_error_line(id_, CANCELLED, "request cancelled"))
        return Send(_ENCODER.encode({"jsonrpc": "2.0", "id": id_, "result": result}) + b"\n")

    def respond_error(self, id_: int | str, code: int, message: str, data: Any = None) -> Send:
        """Answer incoming request ``id_`` with an error object."""
        self.incoming.discard(id_)
        if id_ in self.cancelled:
            self.cancelled.discard(id_)
            return Send(_error_line(id_, CANCELLED, "request cancelled"))
        return Send(_error_line(id_, code, message, data))

    def request(self, method: str, params: Any) -> tuple[int, Send]:
        """Start an outgoing request; the ``Resolve`` for its id comes from ``feed``."""
        id_ = next(self._ids)
        self.outgoing.add(id_)
        line = _ENCODER.encode({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        return id_, Send(line + b"\n")

    def notify(self, method: str, params: Any) -> Send:
        """Build an outgoing notification."""
        return Send(_ENCODER.encode({"jsonrpc": "2.0", "method": method, "params": params}) + b"\n")

    @staticmethod
    def protocol_error(message: str) -> Send:
        """A connection-level error the peer should see (e.g. an over-long line)."""
        return Send(_error_line(None, INVALID_REQUEST, message))
