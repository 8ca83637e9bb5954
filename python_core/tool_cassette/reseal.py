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
from dsh_sidecar.python_core.cassette_io import Chain, schema_location
from dsh_sidecar.python_core.reseal_io import ResealReport, changed_lines, reseal_path
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid, CassetteIOError
from dsh_sidecar.python_core.tool_cassette.format import (
    GENESIS,
    AnyFrame,
    CompleteFrame,
    HeaderFrame,
    StartFrame,
    decode_frame,
    is_well_formed,
)
from dsh_sidecar.python_core.tool_cassette.store import check_lines

__all__ = ["reseal_file", "reseal_lines"]


def _frame(number: int, body: bytes, version: int | None) -> AnyFrame:
    if too_deep(body):
        raise CassetteInvalid(DEPTH_REASON, line=number)
    try:
        frame = decode_frame(body)
    except msgspec.DecodeError as exc:
        raise CassetteInvalid(f"not a frame of this schema (at {schema_location(exc)})", line=number) from None
    if not is_well_formed(body, frame, version):
        raise CassetteInvalid("not canonical JSON; reseal keeps content as written, so write it "
                              "canonical (sorted keys, no spaces)", line=number)
    return frame


def reseal_lines(lines: list[bytes]) -> tuple[list[bytes], ResealReport]:
    """Return the resealed lines of a cassette (each with its newline) and a report.

    Raises:
        CassetteInvalid: a line is not a canonical frame, or the resealed text fails
            verification (names the line and the reason; nothing is written).
    """
    frames: list[AnyFrame] = []
    version: int | None = None
    for number, line in enumerate(lines, start=1):
        body = line[:-1] if line.endswith(b"\n") else line
        frame = _frame(number, body, version)
        if isinstance(frame, HeaderFrame) and version is None:
            version = frame.version
        if isinstance(frame, CompleteFrame):
            if number != len(lines):
                raise CassetteInvalid("complete tail before the last line", line=number)
            continue  # recomputed below
        frames.append(frame)
    if not frames or not isinstance(frames[0], HeaderFrame):
        raise CassetteInvalid("first frame is not a header", line=1)
    chain = Chain()
    out: list[bytes] = []
    calls = 0
    for frame in frames:
        if isinstance(frame, StartFrame):
            calls += 1
            frame = msgspec.structs.replace(frame, argsDigest=digest_bytes(frame.args))
        out.append(chain.link(frame)[1])
    out.append(chain.link(CompleteFrame(seq=0, prev=GENESIS, calls=calls))[1])
    check_lines(out)
    return out, ResealReport(frames=len(out), calls=calls, changed=changed_lines(lines, out))


def reseal_file(path: str) -> ResealReport:
    """Reseal the cassette at ``path`` in place, atomically.

    Raises:
        CassetteInvalid: see ``reseal_lines``; the file is left untouched.
        CassetteIOError: the file cannot be read or the new one cannot be written.
    """
    return reseal_path(path, reseal_lines, CassetteIOError)
