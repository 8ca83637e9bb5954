"""The sans-I/O JSON-RPC 2.0 endpoint: lines in, actions out.

``RpcConnection.feed(line)`` turns one received line into actions (``Dispatch``, ``Cancel``,
``Send``); ``respond``/``respond_error`` build answer lines. Only the shim sends requests, so
there is one pending map, for the incoming direction. It never touches a pipe, so tests feed
lines.

Every request that carries an id gets an answer with that id, whatever is wrong with it, as long
as the id can be read: a lone surrogate escape or nesting beyond ``WIRE_MAX_DEPTH`` elsewhere in the
line does not cost the caller its answer.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

__all__ = [
    "CANCELLED",
    "CANCEL_MARK",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVER_ERROR",
    "WIRE_MAX_DEPTH",
    "Action",
    "Cancel",
    "Dispatch",
    "RpcConnection",
    "Send",
    "nesting_depth",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
CANCELLED = -32800
SERVER_ERROR = -32000

# Deepest array/object nesting a wire line may have. msgspec (like any recursive decoder) runs
# out of recursion budget near 1,000 levels; a fixed, lower limit makes the cut-off the same in
# every call stack and on every interpreter. It is above canonical.MAX_DEPTH (256, the limit of
# every value the features read) on purpose: a value at that limit still fits inside an envelope
# and its params, and is refused by the feature with the feature's own named error.
WIRE_MAX_DEPTH = 512

CANCEL_METHOD = "$/cancelRequest"


class _Envelope(msgspec.Struct, forbid_unknown_fields=True):
    jsonrpc: str
    id: int | str | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")
    # A response (to a request the sidecar never sends) is told apart by these members.
    result: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    error: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _CancelParams(msgspec.Struct):
    id: int | str


class _Peek(msgspec.Struct):
    """The members that decide whether a line may be served ahead of the lines before it."""

    id: int | str | None = None
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_CANCEL = msgspec.json.Decoder(_CancelParams)
_PEEK = msgspec.json.Decoder(_Peek)
# Present in every line that may be a cancel (a byte search, before anything is decoded).
CANCEL_MARK = b"$/cancelRequest"
_ID = msgspec.json.Decoder(int | str | None)
_ENCODER = msgspec.json.Encoder()

_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRINGS = re.compile(_STRING, re.S)
_NOT_BRACKETS = re.compile(rb"[^\[\]{}]+")
_DEPTH_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_TOKENS = re.compile(_STRING + rb"|[\[\]{}]+", re.S)
_ID_VALUE = re.compile(rb"\s*:\s*(-?[0-9]+|" + _STRING + rb"|null)\s*[,}]", re.S)
# A \uD800-\uDFFF escape, skipping escaped backslashes so that "\\ud800" (text) is left alone.
_SURROGATE_ESCAPES = re.compile(rb"\\\\|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# Recovering an id walks the line's tokens in Python; past this many the id counts as unknown.
_ID_SCAN_TOKENS = 1_000_000


def nesting_depth(line: bytes) -> int:
    """Return the deepest array/object nesting of a JSON text (brackets inside strings excluded)."""
    brackets = _NOT_BRACKETS.sub(b"", _STRINGS.sub(b"", line))
    if not brackets:
        return 0
    return max(itertools.accumulate(memoryview(brackets.translate(_DEPTH_STEPS)).cast("b")))


def _maybe_too_deep(line: bytes) -> bool:
    # C-speed upper bound: a line cannot nest deeper than it has opening brackets.
    return line.count(b"[") + line.count(b"{") > WIRE_MAX_DEPTH and nesting_depth(line) > WIRE_MAX_DEPTH


def _peek(line: bytes) -> _Peek | None:
    try:
        return None if _maybe_too_deep(line) else _PEEK.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None


def _cancel_target(line: bytes) -> int | str | None:
    """The id a ``$/cancelRequest`` line cancels; ``None`` for any other or a malformed line."""
    peek = _peek(line)
    if peek is None or peek.method != CANCEL_METHOD:
        return None
    try:
        return _CANCEL.decode(peek.params).id
    except (msgspec.DecodeError, RecursionError):
        return None


def _holds_request(lines: list[bytes], joined: bytes, end: int, jumped: list[int], id_: int | str) -> bool:
    """Whether a line that stays in place and starts before offset ``end`` carries ``id_`` as its id.

    Only lines that can hold the id are decoded: those with its digits or text, and for a
    string id every line when any holds a JSON escape, which could spell it differently.
    """
    if isinstance(id_, str) and b"\\" in joined[:end]:
        candidates: Iterable[int] = range(joined.count(b"\n", 0, end))
    else:
        candidates = (index for index, _ in _lines_holding(joined, str(id_).encode("utf-8", "surrogatepass"), end))
    for index in candidates:
        if index not in jumped:
            peek = _peek(lines[index])
            if peek is not None and type(peek.id) is type(id_) and peek.id == id_:
                return True
    return False


def _lines_holding(joined: bytes, needle: bytes, end: int) -> Iterator[tuple[int, int]]:
    """(index, offset) of each line (of lines joined by newlines) holding ``needle`` before ``end``."""
    position = joined.find(needle, 0, end)
    while position >= 0:
        start = joined.rfind(b"\n", 0, position) + 1
        yield joined.count(b"\n", 0, position), start
        next_line = joined.find(b"\n", position)
        if next_line < 0:
            return
        position = joined.find(needle, next_line + 1, end)


def _recover_id(line: bytes) -> int | str | None:
    """The top-level ``id`` of a line that the envelope decoder refused, or ``None``."""
    depth = 0
    for match in itertools.islice(_TOKENS.finditer(line), _ID_SCAN_TOKENS):
        token = match.group()
        if token[0] != 0x22:  # a run of brackets: one token however deep it goes
            if depth == 0 and token[0] != 0x7B:
                return None
            depth += token.count(b"[") + token.count(b"{") - token.count(b"]") - token.count(b"}")
            if depth <= 0:
                return None
        elif depth == 1 and token == b'"id"':
            value = _ID_VALUE.match(line, match.end())
            if value is None:
                continue
            try:
                id_: int | str | None = _ID.decode(value.group(1))
            except msgspec.DecodeError:
                return None
            return id_
    return None


def _without_surrogates(line: bytes) -> bytes:
    return _SURROGATE_ESCAPES.sub(lambda m: m.group() if m.group() == b"\\\\" else b"\\ufffd", line)


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


Action = Send | Dispatch | Cancel


def _error_line(id_: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    """One error answer line."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return _ENCODER.encode({"jsonrpc": "2.0", "id": id_, "error": error}) + b"\n"


def _named(id_: int | str | None, code: str, message: str) -> Send:
    return Send(_error_line(id_, INVALID_REQUEST, f"{code}: {message}", {"code": code}))


class RpcConnection:
    """Per-connection protocol state: the incoming requests in flight and the cancelled ones."""

    def __init__(self) -> None:
        self.incoming: set[int | str] = set()
        self.cancelled: set[int | str] = set()

    def feed(self, line: bytes) -> list[Action]:
        """Interpret one received line (without its newline)."""
        if _maybe_too_deep(line):
            return [
                _named(
                    _recover_id(line),
                    "NESTING_TOO_DEEP",
                    f"the message nests arrays/objects deeper than {WIRE_MAX_DEPTH} levels; send a flatter value",
                )
            ]
        try:
            envelope = _ENVELOPE.decode(line)
        except (msgspec.DecodeError, RecursionError):
            return [self._malformed(line)]
        if envelope.jsonrpc != "2.0":
            return [Send(_error_line(envelope.id, INVALID_REQUEST, 'invalid request: jsonrpc must be "2.0"'))]
        if envelope.method is None:
            if envelope.result is not msgspec.UNSET or envelope.error is not msgspec.UNSET:
                # A response: the sidecar sends no requests, and responses are never answered.
                return []
            return [Send(_error_line(envelope.id, INVALID_REQUEST, "invalid request: method must be a string"))]
        if envelope.method == CANCEL_METHOD:
            return self._cancel(envelope)
        if envelope.id is not None:
            if envelope.id in self.incoming:
                return [Send(_error_line(envelope.id, INVALID_REQUEST, "invalid request: id already in flight"))]
            self.incoming.add(envelope.id)
        return [Dispatch(envelope.id, envelope.method, envelope.params)]

    @staticmethod
    def cancels_first(lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
        """Split received lines into cancels that may be served first and the rest, in order.

        A cancel jumps the lines before it unless one of them is the request it cancels (that
        request must be in flight when the cancel is fed, as in arrival order). Nothing else
        depends on a cancel, so serving it first changes no answer, only how soon it leaves.
        """
        # Byte searches over the lines joined find the candidates; only they are decoded.
        joined = b"\n".join(lines)
        jumped: list[int] = []
        for index, start in _lines_holding(joined, CANCEL_MARK, len(joined)):
            target = _cancel_target(lines[index])
            if target is not None and not _holds_request(lines, joined, start, jumped, target):
                jumped.append(index)
        rest = list(lines)
        for index in reversed(jumped):
            del rest[index]
        return [lines[index] for index in jumped], rest

    def _cancel(self, envelope: _Envelope) -> list[Action]:
        # Normally a notification; sent as a request it is carried out and answered null.
        actions: list[Action] = []
        try:
            target: int | str | None = _CANCEL.decode(envelope.params).id
        except msgspec.DecodeError as exc:
            if envelope.id is not None:
                return [Send(_error_line(envelope.id, INVALID_PARAMS, f"invalid params for {CANCEL_METHOD}: {exc}"))]
            target = None
        if target is not None and target in self.incoming:
            self.cancelled.add(target)
            actions.append(Cancel(target))
        if envelope.id is not None:
            actions.append(Send(_ENCODER.encode({"jsonrpc": "2.0", "id": envelope.id, "result": None}) + b"\n"))
        return actions

    def _malformed(self, line: bytes) -> Send:
        try:
            value = msgspec.json.decode(line)
        except RecursionError:
            return _named(_recover_id(line), "NESTING_TOO_DEEP",
                          f"the message nests deeper than {WIRE_MAX_DEPTH} levels")
        except msgspec.DecodeError:
            if _SURROGATE_ESCAPES.search(line) is not None:
                try:
                    msgspec.json.decode(_without_surrogates(line))
                except msgspec.DecodeError:
                    pass
                else:
                    return _named(
                        _recover_id(line),
                        "LONE_SURROGATE",
                        "a string has a \\uD800-\\uDFFF escape that is not half of a pair; send valid Unicode",
                    )
            return Send(_error_line(None, PARSE_ERROR, "parse error: the line is not JSON"))
        # Answer with the request's own id when it has one, so the peer's call settles.
        id_ = value.get("id") if isinstance(value, dict) else None
        if not isinstance(id_, int | str) or isinstance(id_, bool):
            id_ = None
        return Send(_error_line(id_, INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message"))

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

    @staticmethod
    def protocol_error(message: str) -> Send:
        """A connection-level error the peer should see (e.g. an over-long line)."""
        return Send(_error_line(None, INVALID_REQUEST, message))
