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

from dsh_sidecar.python_core.canonical import DEPTH_REASON, is_canonical, too_deep
from dsh_sidecar.python_core.cassette_io import (
    Chain,
    PartialFile,
    check_header_line,
    display_name,
    reason_of,
    schema_location,
)
from dsh_sidecar.python_core.files import FileRefused, open_regular
from dsh_sidecar.python_core.model_cassette.errors import (
    ModelCassetteExists,
    ModelCassetteInvalid,
    ModelCassetteIOError,
)
from dsh_sidecar.python_core.model_cassette.format import (
    ABANDONABLE,
    GENESIS,
    PROTOCOL,
    READABLE,
    AnyFrame,
    CallFrame,
    ChunkFacts,
    CompleteFrame,
    Frame,
    HeaderFrame,
    checked_chunks,
    chunk_facts,
    decode_frame,
    encode,
    line_hash,
)
from dsh_sidecar.python_core.model_cassette.request import checked_parts, lane_of

__all__ = ["Cassette", "Recorder", "VerifyReport", "check_lines", "load", "verify_file"]


class Recorder(PartialFile):
    """``<file>.partial`` with a chain: ``append`` numbers, links, seals, writes and fsyncs."""

    exists = ModelCassetteExists
    io_error = ModelCassetteIOError

    def __init__(self, path: str, fd: int) -> None:
        super().__init__(path, fd)
        self.chain = Chain()

    @classmethod
    def create(cls, path: str) -> Recorder:
        """Create ``<path>.partial`` exclusively.

        Raises:
            ModelCassetteExists: the formal file or the partial already exists.
            ModelCassetteIOError: the partial cannot be created.
        """
        return cls(path, cls.open_partial(path))

    def append(self, frame: Frame) -> None:
        """Chain, seal, write and fsync one frame.

        Raises:
            ModelCassetteIOError: the write or fsync failed; the recorder is closed for good.
        """
        self.write_lines([self.chain.link(frame)[1]])


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


class _Scanner:
    """Checks frames one line at a time: schema, canonical form, chain, summaries, lanes, tail."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.header: HeaderFrame | None = None
        self.frames = 0
        self.prev = GENESIS
        self.complete = False
        self.calls: list[CallFrame] = []
        self.count = 0
        self.positions: dict[str, set[int]] = {}
        self.left_out: tuple[str, ...] = ()

    def feed(self, number: int, line: bytes) -> None:
        if not line.endswith(b"\n"):
            raise ModelCassetteInvalid("truncated line (no newline)", line=number)
        body = line[:-1]
        if self.complete:
            raise ModelCassetteInvalid("frame after the complete tail", line=number)
        if too_deep(body):
            raise ModelCassetteInvalid(DEPTH_REASON, line=number)
        if number == 1:
            self._probe(body)
        try:
            frame = decode_frame(body)
        except msgspec.DecodeError as exc:
            raise ModelCassetteInvalid(f"not a frame of this schema (at {schema_location(exc)})",
                                       line=number) from None
        kind = type(frame).__struct_config__.tag
        assert isinstance(kind, str)
        ordinal = frame.ordinal if isinstance(frame, CallFrame) else None
        # Re-encoding the decoded frame reproduces a canonical line byte for byte (a duplicate
        # key, an unsorted key, whitespace or a float all change it); the Raw payloads inside are
        # checked on their own, so the frame's many hex digests never force the slow path.
        facts: ChunkFacts | None = None
        canonical = encode(frame) == body
        if canonical and isinstance(frame, CallFrame):
            try:
                facts, canonical = self._chunks(bytes(frame.chunks))
            except msgspec.DecodeError:
                raise ModelCassetteInvalid("chunks is not an array of chunk objects", line=number, kind=kind,
                                           ordinal=ordinal) from None
        if not canonical:
            raise ModelCassetteInvalid("not canonical JSON", line=number, kind=kind, ordinal=ordinal)
        if frame.seq != self.frames:
            raise ModelCassetteInvalid(f"seq {frame.seq} where {self.frames} expected", line=number, kind=kind,
                                       ordinal=ordinal)
        if frame.prev != self.prev:
            raise ModelCassetteInvalid("prev does not match the previous frame's hash", line=number, kind=kind,
                                       ordinal=ordinal)
        if frame.hash is UNSET or frame.hash != line_hash(frame, body):
            raise ModelCassetteInvalid("hash does not match the frame", line=number, kind=kind, ordinal=ordinal)
        try:
            self._check(frame, facts)
        except ValueError as exc:
            raise ModelCassetteInvalid(str(exc), line=number, kind=kind, ordinal=ordinal) from None
        self.frames += 1
        self.prev = frame.hash

    def _chunks(self, chunks: bytes) -> tuple[ChunkFacts, bool]:
        """Version 1: canonical chunks. Version 2: the host's own serialization, kept verbatim.

        Version 2 chunks were checked strictly when recorded (``engine.recorded``) and are
        covered by the hash as bytes, so verify only decodes them (C speed).
        """
        if self.header is None or self.header.version == 1:
            return checked_chunks(chunks)
        return chunk_facts(chunks), True

    def _probe(self, body: bytes) -> None:
        check_header_line(body, protocol=PROTOCOL, readable=READABLE,
                          reads=" and ".join(str(v) for v in READABLE), invalid=ModelCassetteInvalid)

    def _check(self, frame: AnyFrame, facts: ChunkFacts | None) -> None:
        """Kind-specific rules; raises ValueError with a structural reason."""
        if isinstance(frame, HeaderFrame):
            if self.header is not None:
                raise ValueError("second header")
            self.header = frame
            return
        if self.header is None:
            raise ValueError("frame before the header")
        if isinstance(frame, CallFrame):
            assert facts is not None
            _check_call(frame, facts, self.count, self.header)
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

    def finish(self) -> None:
        if self.frames == 0:
            raise ModelCassetteInvalid("empty file")
        if not self.complete:
            raise ModelCassetteInvalid(f"missing complete tail frame after line {self.frames}")


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


def _scan(path: str, scanner: _Scanner) -> None:
    try:
        with open_regular(path) as handle:
            for number, line in enumerate(handle, start=1):
                scanner.feed(number, line)
    except FileRefused as refused:
        raise ModelCassetteIOError("read", display_name(path), refused.reason) from None
    except OSError as exc:
        raise ModelCassetteIOError("read", display_name(path), reason_of(exc)) from None
    scanner.finish()


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
    scanner = _Scanner(keep=False)
    for number, line in enumerate(lines, start=1):
        scanner.feed(number, line)
    scanner.finish()


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
        _scan(path, scanner)
    except ModelCassetteInvalid as exc:
        error = exc
    return VerifyReport(
        valid=error is None, version=scanner.header.version if scanner.header is not None else None,
        frames=scanner.frames, calls=scanner.count, lanes=_recorded_lanes(scanner), error=error,
    )


def load(path: str) -> Cassette:
    """Verify the cassette at ``path`` completely, then return its calls.

    Raises:
        ModelCassetteInvalid: the first structural failure.
        ModelCassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=True)
    _scan(path, scanner)
    assert scanner.header is not None
    return Cassette(header=scanner.header, calls=tuple(scanner.calls), left_out=scanner.left_out)
