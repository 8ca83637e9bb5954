"""Model cassette frames: closed Structs, canonical lines, the hash chain.

Rule: a cassette is NDJSON; each line is the canonical JSON of one frame, except that from
version 2 a call's ``chunks`` member holds the chunk array exactly as the host serialized it
(its key order, so a replay hands the host the same bytes). ``hash`` is the ``sha256:`` digest
of the line without its ``hash`` member (canonical bytes, ``chunks`` verbatim); ``prev`` is the
previous frame's ``hash`` (``GENESIS`` for the header); ``seq`` counts lines from 0. Frames are
``header``, one ``call`` per completed ``stream()`` call (in completion order), then ``complete``.
Chunks and the full request view stay ``msgspec.Raw``; version 1 files (canonical chunks) are
still read.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from dsh_sidecar.python_core.canonical import MAX_SAFE_INTEGER, is_canonical
from dsh_sidecar.python_core.cassette_io import GENESIS, ChainFrame, line_hash, probe_header, seal
from dsh_sidecar.python_core.model_request import RequestParts

__all__ = [
    "ABANDONABLE",
    "GENESIS",
    "IMPORTED",
    "PROTOCOL",
    "READABLE",
    "VERSION",
    "AnyFrame",
    "CallFrame",
    "ChunkFacts",
    "CompleteFrame",
    "Frame",
    "HeaderFrame",
    "checked_chunks",
    "chunk_facts",
    "decode_frame",
    "encode",
    "line_hash",
    "probe_header",
    "seal",
]

PROTOCOL = "dsh-model-cassette"
VERSION = 2
READABLE = (1, 2)
"""Versions this build reads; it writes ``VERSION``."""
IMPORTED = "session-log"
"""The header's ``host`` of a cassette ``dsh-sidecar import`` rebuilt from a session log (the log
does not name the dsh-llm that streamed it); ``inspect`` and ``verify`` say so (docs/import.md)."""
ABANDONABLE = frozenset({"session-title"})
"""Lanes whose calls the host starts beside the turn and abandons at exit (rc.8 does not wait
for the session title): such a call is recorded if it settled, otherwise left out."""
RequestView = Literal["metadata", "full"]


class Frame(ChainFrame, frozen=True, kw_only=True):
    """A model cassette frame: ``seq``, ``prev`` and ``hash`` (``ChainFrame``), then its kind's fields."""


class HeaderFrame(Frame, tag="header", frozen=True, kw_only=True):
    """First frame: protocol, version, the request view kept and the recording host's dsh-llm.

    ``filters`` (optional, absent when none were declared) is the fingerprint of the filter
    rules the request views were filtered with, never the rules (a regex may spell a secret).
    """

    protocol: str
    version: int
    requestView: RequestView
    host: str
    filters: str | UnsetType = UNSET


class CallFrame(Frame, tag="call", frozen=True, kw_only=True):
    """One completed ``stream()`` call.

    ``ordinal`` counts call frames from 0 (completion order); ``lane`` is the request's
    ``purpose`` or ``model``; ``position`` is the call's arrival order within its lane, which
    replay matches. ``chunks`` is the exact chunk array the provider route yielded, ``atMs``
    each chunk's offset from the call's start. ``finish`` and ``toolCalls`` summarize ``chunks``.
    ``view`` (the normalized request) is present only with ``requestView: full``.
    """

    ordinal: int
    lane: str
    position: int
    fingerprint: str
    request: RequestParts
    view: Raw | UnsetType = UNSET
    chunks: Raw
    atMs: tuple[int, ...]
    finish: str
    toolCalls: int


class CompleteFrame(Frame, tag="complete", frozen=True, kw_only=True, omit_defaults=True):
    """Tail frame: the recording finished with ``calls`` call frames.

    ``leftOut`` (version 2, omitted when empty) names the ``lane#position`` of calls the host
    abandons at exit (the session title) that had not settled when the recording closed.
    """

    calls: int
    leftOut: tuple[str, ...] = ()


AnyFrame = HeaderFrame | CallFrame | CompleteFrame
F = TypeVar("F", bound=Frame)

_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER: msgspec.json.Decoder[AnyFrame] = msgspec.json.Decoder(AnyFrame)


class _Reason(msgspec.Struct, gc=False):
    kind: str = ""


class _Block(msgspec.Struct, gc=False):
    type: str = ""


class _Chunk(msgspec.Struct, gc=False):
    """The two chunk fields the summary reads; everything else is ignored here."""

    type: str
    reason: _Reason | None = None
    block: _Block | None = None


_CHUNKS_DECODER = msgspec.json.Decoder(list[_Chunk])


class ChunkFacts(msgspec.Struct, frozen=True):
    """What a chunk array says: its length, finish kind and tool-call blocks."""

    count: int
    finish: str
    tool_calls: int


def chunk_facts(chunks: Raw | bytes) -> ChunkFacts:
    """Summarize a chunk array: ``finish`` is the last finish chunk's kind (``none`` if absent).

    Raises:
        msgspec.DecodeError: not an array of chunk objects with a ``type``.
    """
    decoded = _CHUNKS_DECODER.decode(chunks)
    finish = "none"
    calls = 0
    for chunk in decoded:
        if chunk.type == "finish" and chunk.reason is not None:
            finish = chunk.reason.kind
        elif chunk.type == "block-end" and chunk.block is not None and chunk.block.type == "tool-call":
            calls += 1
    return ChunkFacts(len(decoded), finish, calls)


def encode(frame: Frame) -> bytes:
    """Return the canonical JSON of ``frame`` as written (no newline)."""
    return _ENCODER.encode(frame)


_SafeInt = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]


class _Known(msgspec.Struct, tag_field="type", omit_defaults=True, forbid_unknown_fields=True, gc=False):
    """The chunk shapes rc.8 adapters emit, closed: anything else takes the generic check."""


class _TextBlock(_Known, tag="text"):
    text: str


class _ReasoningBlock(_Known, tag="reasoning"):
    text: str


class _ToolCallBlock(_Known, tag="tool-call"):
    id: str
    name: str
    arguments: str


class _BlockStart(_Known, tag="block-start"):
    index: _SafeInt
    blockType: str


class _TextDelta(_Known, tag="text-delta"):
    index: _SafeInt
    text: str


class _ReasoningDelta(_Known, tag="reasoning-delta"):
    index: _SafeInt
    text: str


class _ToolCallDelta(_Known, tag="tool-call-delta"):
    index: _SafeInt
    id: str
    argumentsDelta: str
    name: str | UnsetType = UNSET


class _BlockEnd(_Known, tag="block-end"):
    index: _SafeInt
    block: _TextBlock | _ReasoningBlock | _ToolCallBlock


class _Tokens(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    inputTokens: _SafeInt
    outputTokens: _SafeInt
    cacheReadTokens: _SafeInt | UnsetType = UNSET
    cacheWriteTokens: _SafeInt | UnsetType = UNSET
    reasoningTokens: _SafeInt | UnsetType = UNSET


class _Usage(_Known, tag="usage"):
    usage: _Tokens


class _Failure(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    message: str
    code: str
    status: _SafeInt | UnsetType = UNSET
    providerRetryAfterMs: _SafeInt | UnsetType = UNSET
    requestId: str | UnsetType = UNSET


class _FinishReason(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=True, gc=False):
    kind: str
    failure: _Failure | UnsetType = UNSET


class _Finish(_Known, tag="finish"):
    reason: _FinishReason


_KNOWN_DECODER = msgspec.json.Decoder(
    list[_BlockStart | _TextDelta | _ReasoningDelta | _ToolCallDelta | _BlockEnd | _Usage | _Finish]
)


def checked_chunks(chunks: bytes) -> tuple[ChunkFacts, bool]:
    """Summarize a chunk array and tell whether it is canonical JSON.

    Arrays of the known chunk shapes (closed Structs: no floats, safe integers, fixed ASCII
    keys) are canonical exactly when msgspec's sorted re-encoding reproduces them, a C-speed
    check; anything else (``replayState``, images, a new field) takes the generic check.

    Raises:
        msgspec.DecodeError: not an array of chunk objects with a ``type``.
    """
    try:
        known = _KNOWN_DECODER.decode(chunks)
    except msgspec.DecodeError:
        known = None
    if known is not None and _ENCODER.encode(known) == chunks:
        finish = "none"
        calls = 0
        for chunk in known:
            if isinstance(chunk, _Finish):
                finish = chunk.reason.kind
            elif isinstance(chunk, _BlockEnd) and isinstance(chunk.block, _ToolCallBlock):
                calls += 1
        return ChunkFacts(len(known), finish, calls), True
    return chunk_facts(chunks), is_canonical(chunks)


def decode_frame(line: bytes) -> AnyFrame:
    """Decode one line (without newline) into a frame.

    Raises:
        msgspec.DecodeError: the line is not JSON or not a frame of this schema.
    """
    return _DECODER.decode(line)
