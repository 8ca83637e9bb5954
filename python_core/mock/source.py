"""Reading a replay source and choosing its input adapter by content.

Rule: the format comes from the bytes, never from the file name. Zstd magic
(``28 b5 2f fd``) means a DSH ``session.jsonl.zstd`` (every concatenated frame is read, a
truncated last frame is an error); otherwise a first line that is a JSON object with
``"type":"session"`` means DSH JSONL; anything else is canonical-script JSON. The source file
is opened read-only and never written, copied or renamed; everything after ``read_source``
happens in memory.
"""

from __future__ import annotations

import os
import os.path
from typing import Final, Literal

import msgspec
import zstandard

from dsh_sidecar.python_core.canonical import too_deep
from dsh_sidecar.python_core.files import FileRefused, display_name, open_regular, reason_of
from dsh_sidecar.python_core.mock.convert import convert_session
from dsh_sidecar.python_core.mock.errors import InvalidScript, SourceUnreadable
from dsh_sidecar.python_core.mock.script import Script, decode_script

__all__ = [
    "MAX_DECODED_BYTES",
    "MAX_SOURCE_BYTES",
    "SourceFormat",
    "decode_source",
    "detect_format",
    "load_script",
    "load_source",
    "read_source",
    "source_name_for",
]

SourceFormat = Literal["canonical-json", "dsh-jsonl", "dsh-jsonl-zstd"]

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
# Caps keep a hostile or mistaken source from exhausting memory; real session logs are far
# smaller (a 200-step replay log is a few MB).
MAX_SOURCE_BYTES: Final = 512 * 1024 * 1024
MAX_DECODED_BYTES: Final = 2 * 1024 * 1024 * 1024
_FEED: Final = 1024 * 1024


class _Kind(msgspec.Struct):
    type: str | None = None


_KIND: Final = msgspec.json.Decoder(_Kind)


def source_name_for(path: str) -> str:
    """Return the name diagnostics use for ``path``: its base name, never a directory, escaped."""
    return display_name(path, "source")


def read_source(path: str, *, source: str, follow: bool = False) -> bytes:
    """Read a replay source read-only, refusing anything but a regular file.

    Args:
        path: the path the path policy returned (symlink-free), or a CLI argument.
        source: the name shown in diagnostics.
        follow: follow a final symlink (the CLIs); the replay path policy already resolved
            symlinks, so there a link swapped in afterwards is refused.

    Raises:
        SourceUnreadable: the file cannot be opened or read, is not regular, or is too big.
    """
    try:
        handle = open_regular(path, follow=follow)
    except FileRefused as refused:
        raise SourceUnreadable(source, refused.reason) from None
    try:
        with handle:
            if os.fstat(handle.fileno()).st_size > MAX_SOURCE_BYTES:
                raise SourceUnreadable(source, f"larger than {MAX_SOURCE_BYTES} bytes")
            return handle.read(MAX_SOURCE_BYTES + 1)
    except OSError as exc:
        raise SourceUnreadable(source, reason_of(exc)) from None


def detect_format(data: bytes) -> SourceFormat:
    """Tell which input adapter handles ``data`` (see the module rule)."""
    if data.startswith(ZSTD_MAGIC):
        return "dsh-jsonl-zstd"
    # Slice the first line only: splitting would copy the rest of a 50 MB log.
    end = data.find(b"\n")
    first = data if end < 0 else data[:end]
    if too_deep(first):
        return "canonical-json"  # the strict script decoder names the depth
    try:
        kind = _KIND.decode(first)
    except msgspec.DecodeError:
        return "canonical-json"
    return "dsh-jsonl" if kind.type == "session" else "canonical-json"


def _decompress(data: bytes, source: str) -> bytes:
    """Decode every concatenated zstd frame; fail on a truncated or corrupt stream."""
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
                raise InvalidScript(source, f"zstd content exceeds {MAX_DECODED_BYTES} bytes")
            out.append(piece)
            if obj.eof:
                # Each DSH append batch is its own frame; start a fresh decoder for the next.
                feed = obj.unused_data
                obj = dctx.decompressobj()
                in_frame = False
            else:
                feed = b""
    except zstandard.ZstdError:
        raise InvalidScript(source, "corrupt zstd stream") from None
    if in_frame:
        raise InvalidScript(source, "truncated zstd stream (the last frame is incomplete)")
    return b"".join(out)


def decode_source(data: bytes, *, source: str) -> tuple[SourceFormat, bytes]:
    """Return the detected format and the decompressed text of a source.

    Raises:
        InvalidScript: zstd content that is corrupt, truncated or not a session log.
    """
    kind = detect_format(data)
    if kind != "dsh-jsonl-zstd":
        return kind, data
    text = _decompress(data, source)
    if detect_format(text) != "dsh-jsonl":
        raise InvalidScript(source, "zstd content is not a DSH session log", line=1)
    return kind, text


def load_script(
    data: bytes, *, source_name: str, preserve_timing: bool, turn: int | None = None
) -> Script:
    """Turn source bytes (canonical JSON, DSH JSONL or zstd JSONL) into a validated script.

    Args:
        data: the source bytes as read.
        source_name: the name diagnostics use (never an absolute path).
        preserve_timing: for session logs, turn reliable model latencies into waits.
        turn: for session logs, convert only this turn.

    Raises:
        InvalidScript: the input or the converted script is invalid.
        ConversionMismatch: session records disagree.
    """
    return load_source(data, source_name=source_name, preserve_timing=preserve_timing, turn=turn)[1]


def load_source(
    data: bytes, *, source_name: str, preserve_timing: bool, turn: int | None = None
) -> tuple[SourceFormat, Script]:
    """Like ``load_script``, also returning the detected source format (for ``mock/status``)."""
    kind, text = decode_source(data, source=source_name)
    if kind == "canonical-json":
        if turn is not None:
            raise InvalidScript(source_name, "turn selection applies to session logs only")
        return kind, decode_script(text, source=source_name)
    return kind, convert_session(
        text, source=source_name, preserve_timing=preserve_timing, turn=turn
    )
