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

from dsh_sidecar.python_core.files import FileRefused, display_name, open_regular, reason_of
from dsh_sidecar.python_core.mock.convert import convert_session
from dsh_sidecar.python_core.mock.errors import InvalidScript, SourceUnreadable
from dsh_sidecar.python_core.mock.script import Script, decode_script
from dsh_sidecar.python_core.session_bytes import (
    MAX_DECODED_BYTES,
    ZSTD_MAGIC,
    LogBytesInvalid,
    is_session_jsonl,
    session_text,
)

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

# Keeps a hostile or mistaken source from exhausting memory (MAX_DECODED_BYTES caps its text).
MAX_SOURCE_BYTES: Final = 512 * 1024 * 1024


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
    return "dsh-jsonl" if is_session_jsonl(data) else "canonical-json"


def decode_source(data: bytes, *, source: str) -> tuple[SourceFormat, bytes]:
    """Return the detected format and the decompressed text of a source.

    Raises:
        InvalidScript: zstd content that is corrupt, truncated or not a session log.
    """
    kind = detect_format(data)
    try:
        _, text = session_text(data)
    except LogBytesInvalid as exc:
        raise InvalidScript(source, exc.reason, line=exc.line) from None
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
