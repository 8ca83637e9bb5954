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

from dsh_sidecar.python_core.cassette_io import Chain, schema_location
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteInvalid, ModelCassetteIOError
from dsh_sidecar.python_core.model_cassette.format import (
    GENESIS,
    AnyFrame,
    CallFrame,
    CompleteFrame,
    HeaderFrame,
    chunk_facts,
    decode_frame,
)
from dsh_sidecar.python_core.model_cassette.store import check_lines
from dsh_sidecar.python_core.reseal_io import ResealReport, changed_lines, reseal_path

__all__ = ["reseal_file", "reseal_lines"]


def _derived(number: int, frame: CallFrame) -> CallFrame:
    try:
        facts = chunk_facts(frame.chunks)
    except msgspec.DecodeError:
        raise ModelCassetteInvalid("chunks is not an array of chunk objects", line=number, kind="call",
                                   ordinal=frame.ordinal) from None
    return msgspec.structs.replace(frame, fingerprint=frame.request.fingerprint(), finish=facts.finish,
                                   toolCalls=facts.tool_calls)


def reseal_lines(lines: list[bytes]) -> tuple[list[bytes], ResealReport]:
    """Return the resealed lines of a model cassette and a report.

    Raises:
        ModelCassetteInvalid: a line is not a frame of this schema, or the resealed text fails
            verification (names the line and the reason; nothing is written).
    """
    frames: list[AnyFrame] = []
    for number, line in enumerate(lines, start=1):
        body = line[:-1] if line.endswith(b"\n") else line
        try:
            frame = decode_frame(body)
        except msgspec.DecodeError as exc:
            raise ModelCassetteInvalid(f"not a frame of this schema (at {schema_location(exc)})",
                                       line=number) from None
        if isinstance(frame, CompleteFrame):
            if number != len(lines):
                raise ModelCassetteInvalid("complete tail before the last line", line=number)
            continue
        frames.append(_derived(number, frame) if isinstance(frame, CallFrame) else frame)
    if not frames or not isinstance(frames[0], HeaderFrame):
        raise ModelCassetteInvalid("first frame is not a header", line=1)
    chain = Chain()
    out = [chain.link(frame)[1] for frame in frames]
    calls = sum(1 for frame in frames if isinstance(frame, CallFrame))
    out.append(chain.link(CompleteFrame(seq=0, prev=GENESIS, calls=calls))[1])
    check_lines(out)
    return out, ResealReport(frames=len(out), calls=calls, changed=changed_lines(lines, out))


def reseal_file(path: str) -> ResealReport:
    """Reseal the model cassette at ``path`` in place, atomically.

    Raises:
        ModelCassetteInvalid: see ``reseal_lines``; the file is left untouched.
        ModelCassetteIOError: the file cannot be read or the new one cannot be written.
    """
    return reseal_path(path, reseal_lines, ModelCassetteIOError)
