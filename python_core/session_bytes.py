"""A DSH session log's bytes: plain JSONL, or concatenated zstd frames (``session.jsonl.zstd``).

Rule: the format comes from the bytes, never from the file name. Zstd magic (``28 b5 2f fd``)
means concatenated frames, every one of them read (each DSH append batch is its own frame; a
truncated last frame is an error); a first line that is a JSON object with ``"type":"session"``
is a session log. Shared by the session log reader and the mock's replay sources, which name
what goes wrong in their own errors.
"""

from __future__ import annotations

from typing import Final

import msgspec
import zstandard

from dsh_sidecar.python_core.canonical import too_deep

__all__ = [
    "MAX_DECODED_BYTES",
    "ZSTD_MAGIC",
    "LogBytesInvalid",
    "decompress_frames",
    "is_session_jsonl",
    "session_text",
]

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
# Keeps a hostile or mistaken file from exhausting memory; real session logs are far smaller (a
# 200-step replay log is a few MB).
MAX_DECODED_BYTES: Final = 2 * 1024 * 1024 * 1024
_FEED: Final = 1024 * 1024


class LogBytesInvalid(Exception):
    """The bytes are not a session log: ``reason`` (structural), ``line`` when it has one."""

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


class _Kind(msgspec.Struct):
    type: str | None = None


_KIND: Final = msgspec.json.Decoder(_Kind)


def is_session_jsonl(data: bytes) -> bool:
    """Whether the first line of ``data`` is a session header (``{"type": "session", ...}``)."""
    # Slice the first line only: splitting would copy the rest of a 50 MB log.
    end = data.find(b"\n")
    first = data if end < 0 else data[:end]
    if too_deep(first):
        return False
    try:
        return _KIND.decode(first).type == "session"
    except msgspec.DecodeError:
        return False


def decompress_frames(data: bytes) -> bytes:
    """Decode every concatenated zstd frame.

    Raises:
        LogBytesInvalid: a corrupt or truncated stream, or more than ``MAX_DECODED_BYTES``.
    """
    dctx = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    total = 0
    pos = 0
    feed = b""
    in_frame = False
    obj = dctx.decompressobj()
    try:
        while feed or pos < len(data):
            if not feed:
                feed = data[pos : pos + _FEED]
                pos += len(feed)
            piece = obj.decompress(feed)
            in_frame = True
            total += len(piece)
            if total > MAX_DECODED_BYTES:
                raise LogBytesInvalid(f"zstd content exceeds {MAX_DECODED_BYTES} bytes")
            out.append(piece)
            if obj.eof:
                # Each DSH append batch is its own frame; start a fresh decoder for the next.
                feed = obj.unused_data
                obj = dctx.decompressobj()
                in_frame = False
            else:
                feed = b""
    except zstandard.ZstdError:
        raise LogBytesInvalid("corrupt zstd stream") from None
    if in_frame:
        raise LogBytesInvalid("truncated zstd stream (the last frame is incomplete)")
    return b"".join(out)


def session_text(data: bytes) -> tuple[bool, bytes]:
    """Whether ``data`` was compressed, and its text (decompressed zstd content must be a log).

    Raises:
        LogBytesInvalid: see ``decompress_frames``; zstd content that is not a session log.
    """
    if not data.startswith(ZSTD_MAGIC):
        return False, data
    text = decompress_frames(data)
    if not is_session_jsonl(text):
        raise LogBytesInvalid("zstd content is not a DSH session log", line=1)
    return True, text
