"""Reseal a hand-edited model cassette: recompute what the format derives, vouch for the rest.

Rule (as ``tool_cassette.reseal``): every line must still decode as a frame of this schema; a
frame is re-encoded canonically (so its payloads must be canonical JSON already, which the
verifier checks); the derived fields (``seq``, ``prev``, ``hash``, a call's ``fingerprint``,
``finish`` and ``toolCalls``, and the ``complete`` tail) are recomputed, everything else is kept.
The new text must pass the verifier replay uses, or nothing is written. Resealing makes the
file yours: its integrity afterwards proves only that nothing changed since the reseal.
"""

from __future__ import annotations

import msgspec

from dsh_sidecar.python_core.cassette_io import decode_line
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteInvalid, ModelCassetteIOError
from dsh_sidecar.python_core.model_cassette.format import (
    GENESIS,
    CallFrame,
    CompleteFrame,
    Frame,
    HeaderFrame,
    chunk_facts,
    decode_frame,
)
from dsh_sidecar.python_core.model_cassette.store import check_lines
from dsh_sidecar.python_core.reseal_io import ResealReport, reseal_chain, reseal_path

__all__ = ["reseal_file", "reseal_lines"]


def _frame(number: int, body: bytes) -> Frame | None:
    """The frame of line ``number``, a call's summaries recomputed; ``None`` for the tail."""
    frame = decode_line(decode_frame, body, number, ModelCassetteInvalid)
    if isinstance(frame, CompleteFrame):
        return None
    if not isinstance(frame, CallFrame):
        return frame
    try:
        facts = chunk_facts(frame.chunks)
    except msgspec.DecodeError:
        raise ModelCassetteInvalid("chunks is not an array of chunk objects", line=number, kind="call",
                                   ordinal=frame.ordinal) from None
    return msgspec.structs.replace(frame, fingerprint=frame.request.fingerprint(), finish=facts.finish,
                                   toolCalls=facts.tool_calls)


def _tail(calls: int) -> CompleteFrame:
    return CompleteFrame(seq=0, prev=GENESIS, calls=calls)


def reseal_lines(lines: list[bytes]) -> tuple[list[bytes], ResealReport]:
    """Return the resealed lines of a model cassette and a report.

    Raises:
        ModelCassetteInvalid: a line is not a frame of this schema, or the resealed text fails
            verification (names the line and the reason; nothing is written).
    """
    return reseal_chain(lines, _frame, header=HeaderFrame, call=CallFrame, tail=_tail,
                        invalid=ModelCassetteInvalid, verify=check_lines)


def reseal_file(path: str) -> ResealReport:
    """Reseal the model cassette at ``path`` in place, atomically.

    Raises:
        ModelCassetteInvalid: see ``reseal_lines``; the file is left untouched.
        ModelCassetteIOError: the file cannot be read or the new one cannot be written.
    """
    return reseal_path(path, reseal_lines, ModelCassetteIOError)
