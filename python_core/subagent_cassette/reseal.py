"""Reseal a hand-edited subagent cassette: recompute the hash chain, vouch for the rest.

Rule (as ``tool_cassette.reseal``): every non-blank line must still be canonical JSON (the
edit is kept byte for byte, so it must be written canonical); the derived fields, each
record's ``hash`` and each interaction's ``previousHash``, are recomputed and everything else
is kept. Identity fields (``requestFingerprint``, ``parentContextFingerprint``, ``callKey``)
are kept as written: they digest the live, unredacted request and parent, which the file does
not hold. The new text must then pass the same parser replay uses, or nothing is written;
blank lines, which the format ignores, are dropped. The file is replaced atomically
(``python_core.reseal_io``) while this process holds the cassette's writer lock, so a reseal
never races a recording. Resealing makes the file yours: its integrity afterwards proves only
that nothing changed since the reseal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_sidecar.python_core.canonical import DEPTH_REASON, NOT_CANONICAL, decode_canonical, loads_strict, too_deep
from dsh_sidecar.python_core.cassette_io import display_name, seal_mapping
from dsh_sidecar.python_core.errors import CanonicalJsonError, SidecarError
from dsh_sidecar.python_core.reseal_io import ResealReport, changed_lines, reseal_path
from dsh_sidecar.python_core.subagent_cassette.errors import (
    CassetteFormatError,
    CassetteIOError,
    CassetteNotFound,
)
from dsh_sidecar.python_core.subagent_cassette.format import CassetteParser
from dsh_sidecar.python_core.subagent_cassette.store import WriterLock

__all__ = ["reseal_file", "reseal_lines"]

_EDIT_CANONICAL = ("not canonical JSON; reseal keeps content as written, so write it canonical "
                   "(sorted keys, no spaces)")


def _record(name: str, number: int, body: bytes) -> dict[str, Any]:
    """The JSON object of one canonical line (``number`` counts from 1)."""
    if too_deep(body):
        raise CassetteFormatError(name, number, DEPTH_REASON)
    value = decode_canonical(body)
    if value is NOT_CANONICAL:
        try:
            loads_strict(body)
        except CanonicalJsonError as exc:
            raise CassetteFormatError(name, number, exc.message) from None
        raise CassetteFormatError(name, number, _EDIT_CANONICAL)
    if not isinstance(value, dict):
        raise CassetteFormatError(name, number, "record is not a JSON object")
    return value


def _verify(name: str, out: list[bytes], numbers: list[int]) -> None:
    """Parse the resealed lines as replay does; a failure names the line as read."""
    parser = CassetteParser(name)
    try:
        for index, line in enumerate(out):
            parser.feed(line, index + 1)
        parser.finish()
    except CassetteFormatError as exc:
        number = numbers[exc.line - 1] if 0 < exc.line <= len(numbers) else 1
        raise type(exc)(name, number, exc.reason) from None


def reseal_lines(lines: list[bytes], name: str = "cassette") -> tuple[list[bytes], ResealReport]:
    """Return the resealed lines of a subagent cassette called ``name`` and a report.

    Raises:
        CassetteFormatError: a line is not a canonical record, or the resealed text fails the
            parser (names the line as read and the reason; nothing is written).
        TargetMismatch: the header targets a DSH subagent version this build does not support.
    """
    out: list[bytes] = []
    numbers: list[int] = []
    previous: str | None = None
    for number, line in enumerate(lines, start=1):
        body = line.rstrip(b"\r\n")
        if not body.strip():
            continue
        record = {key: item for key, item in _record(name, number, body).items() if key != "hash"}
        if previous is not None:
            record["previousHash"] = previous
        try:
            previous, sealed = seal_mapping(record)
        except CanonicalJsonError as exc:
            raise CassetteFormatError(name, number, exc.message) from None
        out.append(sealed)
        numbers.append(number)
    _verify(name, out, numbers)
    return out, ResealReport(frames=len(out), calls=max(0, len(out) - 1), changed=changed_lines(lines, out))


def _io_error(operation: str, name: str, reason: str) -> SidecarError:
    if operation == "read" and reason == "no such file":
        return CassetteNotFound(name)
    return CassetteIOError(name, f"cannot {operation}: {reason}")


def reseal_file(path: str, *, owner: str) -> ResealReport:
    """Reseal the subagent cassette at ``path`` in place, atomically, under its writer lock.

    ``owner`` names this process's lock marker (a random id).

    Raises:
        CassetteLocked: a writer is recording the cassette (or a crashed one left its lock).
        CassetteFormatError, TargetMismatch: see ``reseal_lines``; the file is left untouched.
        CassetteNotFound, CassetteIOError: the file cannot be read or the new one written.
    """
    name = display_name(path)
    lock = WriterLock(Path(path), owner)
    lock.acquire()
    try:
        return reseal_path(path, lambda lines: reseal_lines(lines, name), _io_error)
    finally:
        lock.release()
