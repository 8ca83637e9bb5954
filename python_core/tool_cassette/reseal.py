"""Reseal a hand-edited tool cassette: recompute what the format derives, vouch for the rest.

Rule: every line must still decode as a frame of this schema and be canonical JSON; the
derived fields (``seq``, ``prev``, ``hash``, ``argsDigest`` and the ``complete`` tail) are
recomputed, everything else is kept byte for byte. The new text must then pass the same
verifier replay uses, or nothing is written. The file is replaced atomically
(``python_core.reseal_io``). Resealing makes the file yours: its
integrity afterwards proves only that nothing changed since the reseal.
"""

from __future__ import annotations

import msgspec

from dsh_sidecar.python_core.canonical import DEPTH_REASON, digest_bytes, too_deep
from dsh_sidecar.python_core.cassette_io import decode_line
from dsh_sidecar.python_core.reseal_io import ResealReport, reseal_chain, reseal_path
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid, CassetteIOError
from dsh_sidecar.python_core.tool_cassette.format import (
    GENESIS,
    CompleteFrame,
    Frame,
    HeaderFrame,
    StartFrame,
    decode_frame,
    is_well_formed,
)
from dsh_sidecar.python_core.tool_cassette.store import check_lines

__all__ = ["reseal_file", "reseal_lines"]


def _frame(number: int, body: bytes, version: int | None) -> Frame | None:
    """The frame of line ``number``, ``argsDigest`` recomputed; ``None`` for the tail.

    ``version``: the file's header version (``None`` while reading the header): a version 4
    outcome's payloads are kept as the host's strict JSON text, the rest must be canonical.
    """
    if too_deep(body):
        raise CassetteInvalid(DEPTH_REASON, line=number)
    frame = decode_line(decode_frame, body, number, CassetteInvalid)
    if not is_well_formed(body, frame, version):
        raise CassetteInvalid("not canonical JSON; reseal keeps content as written, so write it "
                              "canonical (sorted keys, no spaces)", line=number)
    if isinstance(frame, CompleteFrame):
        return None
    if isinstance(frame, StartFrame):
        return msgspec.structs.replace(frame, argsDigest=digest_bytes(frame.args))
    return frame


def _tail(calls: int) -> CompleteFrame:
    return CompleteFrame(seq=0, prev=GENESIS, calls=calls)


def reseal_lines(lines: list[bytes]) -> tuple[list[bytes], ResealReport]:
    """Return the resealed lines of a cassette (each with its newline) and a report.

    Raises:
        CassetteInvalid: a line is not a canonical frame, or the resealed text fails
            verification (names the line and the reason; nothing is written).
    """
    versions: list[int] = []  # the header's, once its line is read

    def frame_of(number: int, body: bytes) -> Frame | None:
        frame = _frame(number, body, versions[0] if versions else None)
        if isinstance(frame, HeaderFrame) and not versions:
            versions.append(frame.version)
        return frame

    return reseal_chain(lines, frame_of, header=HeaderFrame, call=StartFrame, tail=_tail,
                        invalid=CassetteInvalid, verify=check_lines)


def reseal_file(path: str) -> ResealReport:
    """Reseal the cassette at ``path`` in place, atomically.

    Raises:
        CassetteInvalid: see ``reseal_lines``; the file is left untouched.
        CassetteIOError: the file cannot be read or the new one cannot be written.
    """
    return reseal_path(path, reseal_lines, CassetteIOError)
