"""Model cassette files: the append-only recorder, create-only publishing, verify and load.

Rule (``python_core.cassette_io``): the formal file is never written in place and never
overwritten. Recording appends to
``<file>.partial`` (created with O_EXCL), fsyncs every call frame, then publishes with
``os.link`` (fails if the formal file exists) and unlinks the partial. Verify and load run one
scanner: a file is loaded only after every frame has been checked.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from dsh_sidecar.python_core.canonical import is_canonical
from dsh_sidecar.python_core.cassette_io import FrameScanner, PartialFile
from dsh_sidecar.python_core.model_cassette.errors import (
    ModelCassetteExists,
    ModelCassetteInvalid,
    ModelCassetteIOError,
)
from dsh_sidecar.python_core.model_cassette.format import (
    ABANDONABLE,
    IMPORTED,
    PROTOCOL,
    READABLE,
    AnyFrame,
    CallFrame,
    ChunkFacts,
    CompleteFrame,
    HeaderFrame,
    checked_chunks,
    chunk_facts,
    decode_frame,
    encode,
    line_hash,
)
from dsh_sidecar.python_core.model_request import checked_parts, lane_of

__all__ = ["Cassette", "Recorder", "VerifyReport", "check_lines", "load", "verify_file"]


class Recorder(PartialFile):
    """The model cassette's ``<file>.partial``, chained and published create-only."""

    exists = ModelCassetteExists
    io_error = ModelCassetteIOError


class Cassette(msgspec.Struct, frozen=True, gc=False):
    """A fully verified cassette: its header, its calls in file order, the calls left out."""

    header: HeaderFrame
    calls: tuple[CallFrame, ...]
    left_out: tuple[str, ...] = ()


class VerifyReport(msgspec.Struct, frozen=True):
    """Outcome of ``verify_file``; ``error`` is set iff ``valid`` is false."""

    valid: bool
    version: int | None
    frames: int
    calls: int
    lanes: dict[str, int]
    error: ModelCassetteInvalid | None = None
    imported: bool = False
    """The header says ``dsh-sidecar import`` rebuilt the file from a session log."""


class _Scanner(FrameScanner[AnyFrame]):
    """The model cassette's rules over the shared chain checks: chunks, summaries, lanes, tail."""

    invalid = ModelCassetteInvalid
    io_error = ModelCassetteIOError
    protocol = PROTOCOL
    readable = READABLE
    reads = " and ".join(str(v) for v in READABLE)

    def __init__(self, keep: bool) -> None:
        super().__init__()
        self.keep = keep
        self.header: HeaderFrame | None = None
        self.calls: list[CallFrame] = []
        self.count = 0
        self.positions: dict[str, set[int]] = {}
        self.left_out: tuple[str, ...] = ()
        self.facts: ChunkFacts | None = None
        """What the chunks of the call frame being checked say (set by ``canonical``)."""

    def decode(self, body: bytes) -> AnyFrame:
        return decode_frame(body)

    def canonical(self, frame: AnyFrame, body: bytes) -> bool:
        # Re-encoding the decoded frame reproduces a canonical line byte for byte (a duplicate
        # key, an unsorted key, whitespace or a float all change it); the Raw payloads inside are
        # checked on their own, so the frame's many hex digests never force the slow path.
        self.facts = None
        if encode(frame) != body:
            return False
        if not isinstance(frame, CallFrame):
            return True
        try:
            self.facts, canonical = self._chunks(bytes(frame.chunks))
        except msgspec.DecodeError:
            raise ValueError("chunks is not an array of chunk objects") from None
        return canonical

    def hash_of(self, frame: AnyFrame, body: bytes) -> str:
        return line_hash(frame, body)

    def _chunks(self, chunks: bytes) -> tuple[ChunkFacts, bool]:
        """Version 1: canonical chunks. Version 2: the host's own serialization, kept verbatim.

        Version 2 chunks were checked strictly when recorded (``engine.recorded``) and are
        covered by the hash as bytes, so verify only decodes them (C speed).
        """
        if self.header is None or self.header.version == 1:
            return checked_chunks(chunks)
        return chunk_facts(chunks), True

    def check(self, frame: AnyFrame) -> None:
        """Kind-specific rules; raises ValueError with a structural reason."""
        if isinstance(frame, HeaderFrame):
            if self.header is not None:
                raise ValueError("second header")
            self.header = frame
            return
        if self.header is None:
            raise ValueError("frame before the header")
        if isinstance(frame, CallFrame):
            assert self.facts is not None
            _check_call(frame, self.facts, self.count, self.header)
            seen = self.positions.setdefault(frame.lane, set())
            if frame.position in seen:
                raise ValueError(f"position {frame.position} of lane {frame.lane} recorded twice")
            seen.add(frame.position)
            self.count += 1
            if self.keep:
                self.calls.append(msgspec.structs.replace(
                    frame, prev="", hash=UNSET, chunks=frame.chunks.copy(),
                    view=frame.view if frame.view is UNSET else frame.view.copy(),
                ))
            return
        if frame.calls != self.count:
            raise ValueError(f"tail counts {frame.calls} calls, {self.count} recorded")
        self._left_out(frame)
        for lane, seen in sorted(self.positions.items()):
            if seen != set(range(len(seen))):
                raise ValueError(f"lane {lane} positions are not 0..{len(seen) - 1}")
        self.complete = True

    def _left_out(self, frame: CompleteFrame) -> None:
        """Left-out calls take their positions (so lanes stay contiguous) and never collide."""
        if frame.leftOut and self.header is not None and self.header.version == 1:
            raise ValueError("leftOut in a version 1 file")
        for name in frame.leftOut:
            lane, _, number = name.rpartition("#")
            if lane not in ABANDONABLE or not number.isdigit() or str(int(number)) != number:
                raise ValueError("leftOut names a call that cannot be left out")
            seen = self.positions.setdefault(lane, set())
            if int(number) in seen:
                raise ValueError(f"leftOut {name} is also recorded or listed twice")
            seen.add(int(number))
        self.left_out = frame.leftOut


def _check_call(frame: CallFrame, facts: ChunkFacts, expected: int, header: HeaderFrame) -> None:
    if frame.ordinal != expected:
        raise ValueError(f"ordinals not contiguous, {expected} expected")
    if frame.lane != lane_of(frame.request.purpose) or frame.position < 0:
        raise ValueError("lane does not match the request purpose")
    if frame.fingerprint != frame.request.fingerprint():
        raise ValueError("fingerprint does not match the request parts")
    if (frame.view is UNSET) != (header.requestView == "metadata"):
        raise ValueError(f"request view presence contradicts requestView {header.requestView}")
    if frame.view is not UNSET:
        view = bytes(frame.view)
        try:
            parts, glued = checked_parts(view)
        except msgspec.DecodeError:
            raise ValueError("request view is not a request view") from None
        if parts != frame.request:
            raise ValueError("request parts do not match the request view")
        if not glued and not is_canonical(view):
            raise ValueError("request view is not canonical JSON")
    if facts.count != len(frame.atMs) or facts.count == 0:
        raise ValueError("chunk count and atMs count differ, or no chunks")
    if frame.atMs[0] < 0 or list(frame.atMs) != sorted(frame.atMs):
        raise ValueError("atMs is not non-decreasing from 0")
    if (facts.finish, facts.tool_calls) != (frame.finish, frame.toolCalls):
        raise ValueError("finish or toolCalls does not match the chunks")


def _recorded_lanes(scanner: _Scanner) -> dict[str, int]:
    left = {name.rpartition("#")[0] for name in scanner.left_out}
    counts = {k: len(v) - sum(1 for n in scanner.left_out if n.rpartition("#")[0] == k)
              for k, v in sorted(scanner.positions.items())}
    return {k: n for k, n in counts.items() if n or k not in left}


def check_lines(lines: list[bytes]) -> None:
    """Check in-memory cassette lines (each with its newline) as ``verify_file`` checks a file.

    Raises:
        ModelCassetteInvalid: the first structural failure.
    """
    _Scanner(keep=False).scan_lines(lines)


def verify_file(path: str) -> VerifyReport:
    """Check every frame of the cassette at ``path``.

    Returns:
        A report; ``valid`` is false and ``error`` names the first structural failure.
    Raises:
        ModelCassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=False)
    error: ModelCassetteInvalid | None = None
    try:
        scanner.scan_path(path)
    except ModelCassetteInvalid as exc:
        error = exc
    return VerifyReport(
        valid=error is None, version=scanner.header.version if scanner.header is not None else None,
        frames=scanner.frames, calls=scanner.count, lanes=_recorded_lanes(scanner), error=error,
        imported=scanner.header is not None and scanner.header.host == IMPORTED,
    )


def load(path: str) -> Cassette:
    """Verify the cassette at ``path`` completely, then return its calls.

    Raises:
        ModelCassetteInvalid: the first structural failure.
        ModelCassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=True)
    scanner.scan_path(path)
    assert scanner.header is not None
    return Cassette(header=scanner.header, calls=tuple(scanner.calls), left_out=scanner.left_out)
