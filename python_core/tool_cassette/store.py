"""Cassette files: the append-only recorder, create-only publishing, verify and load.

Rule (``python_core.cassette_io``): the formal file is never written in place and never
overwritten. Recording appends to ``<file>.partial`` (created with O_EXCL), fsyncs every
frame, then publishes with ``os.link`` (fails if the formal file exists) and unlinks the
partial. Verify and load run one scanner: a file is loaded only after every frame has been
checked, and a line that is not canonical JSON is rejected.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.canonical import DEPTH_REASON, digest_bytes, is_canonical, too_deep
from dsh_sidecar.python_core.cassette_io import (
    Chain,
    PartialFile,
    check_header_line,
    display_name,
    frame_hash,
    fsync_dir,
    reason_of,
    schema_location,
)
from dsh_sidecar.python_core.files import FileRefused, open_regular
from dsh_sidecar.python_core.tool_cassette.errors import CassetteExists, CassetteInvalid, CassetteIOError
from dsh_sidecar.python_core.tool_cassette.format import (
    GENESIS,
    PROTOCOL,
    READABLE_VERSIONS,
    VERSION,
    AnyFrame,
    Cancellation,
    DefinitionFrame,
    Frame,
    HeaderFrame,
    HostEvent,
    ResultFrame,
    StartFrame,
    decode_frame,
)

__all__ = [
    "Cassette",
    "RecordedCall",
    "Recorder",
    "VerifyReport",
    "check_lines",
    "load",
    "verify_file",
]

F = TypeVar("F", bound=Frame)


class Recorder(PartialFile):
    """``<file>.partial`` with a chain: ``append`` numbers, links, seals, writes and fsyncs."""

    exists = CassetteExists
    io_error = CassetteIOError

    def __init__(self, path: str, fd: int) -> None:
        super().__init__(path, fd)
        self.chain = Chain()

    @classmethod
    def create(cls, path: str) -> Recorder:
        """Create ``<path>.partial`` exclusively, making missing directories above it first.

        Raises:
            CassetteExists: the formal file or the partial already exists.
            CassetteIOError: a directory or the partial cannot be created.
        """
        try:
            _make_directories(path)
        except OSError as exc:
            raise CassetteIOError("create the directory of", display_name(path), reason_of(exc)) from None
        return cls(path, cls.open_partial(path))

    def append(self, frame: F) -> F:
        """Chain, seal, write and fsync one frame; return it as written.

        Raises:
            CassetteIOError: the write or fsync failed; the recorder is closed for good.
        """
        sealed, line = self.chain.link(frame)
        self.write_lines([line])
        return sealed


def _make_directories(path: str) -> None:
    """Make the missing directories above ``path``, private (cassettes hold secrets) and synced.

    A fresh project has no ``.dsh-cassettes/`` yet: recording into it makes it, as ``mkdir -p``.

    Raises:
        OSError: a part of the path is not a directory, or a directory cannot be made.
    """
    parent = os.path.dirname(path)
    missing: list[str] = []
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise NotADirectoryError(errno.ENOTDIR, "not a directory")
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if not os.path.isdir(directory):  # another process made something else meanwhile
                raise
        fsync_dir(directory)


class RecordedCall(msgspec.Struct, frozen=True, gc=False):
    """One call of a verified cassette, compacted for replay.

    Payloads are copied out of their file lines and the chain fields dropped, so a loaded
    cassette holds only what replay serves (``result.prev`` is empty, ``result.hash`` unset).
    """

    ordinal: int
    path: str
    tool: str
    args: msgspec.Raw
    result: ResultFrame


class Cassette(msgspec.Struct, frozen=True, gc=False):
    """A fully verified cassette, calls in ordinal order, tool definitions by name."""

    header: HeaderFrame
    calls: tuple[RecordedCall, ...]
    definitions: dict[str, DefinitionFrame] = msgspec.field(default_factory=dict)


class VerifyReport(msgspec.Struct, frozen=True):
    """Outcome of ``verify_file``; ``error`` is set iff ``valid`` is false."""

    valid: bool
    version: int | None
    frames: int
    calls: int
    tools: dict[str, int]
    error: CassetteInvalid | None = None
    definitions: int = 0


class _Scanner:
    """Checks frames one line at a time: schema, canonical form, chain, pairing, tail."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.header: HeaderFrame | None = None
        self.frames = 0
        self.prev = GENESIS
        self.complete = False
        self.tools: dict[str, int] = {}
        self.open_calls: dict[int, StartFrame | None] = {}
        self.started = 0
        self.starts: list[tuple[str, str, msgspec.Raw]] = []
        self.results: dict[int, ResultFrame] = {}
        self.definitions: dict[str, DefinitionFrame] = {}

    def feed(self, number: int, line: bytes) -> None:
        if not line.endswith(b"\n"):
            raise CassetteInvalid("truncated line (no newline)", line=number)
        body = line[:-1]
        if self.complete:
            raise CassetteInvalid("frame after the complete tail", line=number)
        if too_deep(body):
            raise CassetteInvalid(DEPTH_REASON, line=number)
        if number == 1:
            self._probe(body)
        try:
            frame = decode_frame(body)
        except msgspec.DecodeError as exc:
            reason = f"not a frame of this schema (at {schema_location(exc)})"
            raise CassetteInvalid(reason, line=number) from None
        kind = type(frame).__struct_config__.tag
        assert isinstance(kind, str)
        ordinal = getattr(frame, "ordinal", None)
        if not is_canonical(body):
            raise CassetteInvalid("not canonical JSON", line=number, kind=kind, ordinal=ordinal)
        if frame.seq != self.frames:
            reason = f"seq {frame.seq} where {self.frames} expected"
            raise CassetteInvalid(reason, line=number, kind=kind, ordinal=ordinal)
        if frame.prev != self.prev:
            reason = "prev does not match the previous frame's hash"
            raise CassetteInvalid(reason, line=number, kind=kind, ordinal=ordinal)
        if frame.hash is UNSET or frame.hash != frame_hash(frame):
            reason = "hash does not match the frame"
            raise CassetteInvalid(reason, line=number, kind=kind, ordinal=ordinal)
        try:
            self._check(frame)
        except ValueError as exc:
            raise CassetteInvalid(str(exc), line=number, kind=kind, ordinal=ordinal) from None
        self.frames += 1
        self.prev = frame.hash

    def _probe(self, body: bytes) -> None:
        check_header_line(body, protocol=PROTOCOL, readable=tuple(sorted(READABLE_VERSIONS)),
                          reads=f"1 to {VERSION}", invalid=CassetteInvalid)

    def _check(self, frame: AnyFrame) -> None:
        """Kind-specific rules; raises ValueError with a structural reason."""
        if isinstance(frame, HeaderFrame):
            if self.header is not None:
                raise ValueError("second header")
            self.header = frame
            return
        if self.header is None:
            raise ValueError("frame before the header")
        if isinstance(frame, StartFrame):
            if frame.ordinal != self.started:
                raise ValueError(f"ordinals not contiguous, {self.started} expected")
            if not frame.tool or not frame.path:
                raise ValueError("empty tool or path")
            if frame.argsDigest != digest_bytes(frame.args):
                raise ValueError("argsDigest does not match args")
            self.started += 1
            self.open_calls[frame.ordinal] = None
            self.tools[frame.tool] = self.tools.get(frame.tool, 0) + 1
            if self.keep:
                self.starts.append((sys.intern(frame.tool), frame.path, frame.args.copy()))
        elif isinstance(frame, ResultFrame):
            if frame.ordinal not in self.open_calls:
                started = 0 <= frame.ordinal < self.started
                raise ValueError("duplicate result" if started else "result without a start")
            _check_result(frame)
            if frame.host is not UNSET and self.header.version < 2:
                raise ValueError("host state in a version 1 file")
            if frame.content is not UNSET and not frame.isError and self.header.version < 3:
                raise ValueError(f"success with content or meta in a version {self.header.version} file")
            del self.open_calls[frame.ordinal]
            if self.keep:
                self.results[frame.ordinal] = _compact(frame)
        elif isinstance(frame, DefinitionFrame):
            if self.header.version < 3:
                raise ValueError(f"tool definition in a version {self.header.version} file")
            if not frame.tool:
                raise ValueError("empty tool")
            if frame.tool in self.definitions:
                raise ValueError("second definition of a tool")
            if not _is_object(frame.parameters) or not _is_object(frame.output):
                raise ValueError("parameters or output is not an object")
            if frame.presentationMeta is False:
                raise ValueError("presentationMeta false (left out when false)")
            if frame.timeoutMs is not UNSET and frame.timeoutMs <= 0:
                raise ValueError("timeoutMs is not positive")
            self.definitions[frame.tool] = _compact_definition(frame) if self.keep else frame
        else:
            if frame.calls != self.started:
                raise ValueError(f"tail counts {frame.calls} calls, {self.started} started")
            if self.open_calls:
                raise ValueError(f"ordinal {min(self.open_calls)} has no result")
            self.complete = True

    def finish(self) -> None:
        if self.frames == 0:
            raise CassetteInvalid("empty file")
        if not self.complete:
            raise CassetteInvalid(f"missing complete tail frame after line {self.frames}")


def _copy(raw: msgspec.Raw | UnsetType) -> msgspec.Raw | UnsetType:
    return raw if raw is UNSET else raw.copy()


def _compact(frame: ResultFrame) -> ResultFrame:
    """Detach payloads from the file line and drop chain fields (replay keeps 100k calls)."""
    cancellation = frame.cancellation
    if cancellation is not UNSET:
        cancellation = Cancellation(error=cancellation.error, content=cancellation.content.copy())
    host = frame.host
    if host is not UNSET:
        host = msgspec.structs.replace(
            host, events=tuple(HostEvent(type=e.type, data=e.data.copy()) for e in host.events))
    return msgspec.structs.replace(
        frame, prev="", hash=UNSET, value=_copy(frame.value), content=_copy(frame.content),
        meta=_copy(frame.meta), additionalContexts=frame.additionalContexts.copy(),
        cancellation=cancellation, host=host,
    )


def _compact_definition(frame: DefinitionFrame) -> DefinitionFrame:
    """A definition detached from its file line, chain fields dropped."""
    return msgspec.structs.replace(
        frame, prev="", hash=UNSET, parameters=frame.parameters.copy(), output=frame.output.copy())


def _is_array(raw: msgspec.Raw) -> bool:
    return memoryview(raw)[:1].tobytes() == b"["


def _is_object(raw: msgspec.Raw) -> bool:
    return memoryview(raw)[:1].tobytes() == b"{"


def _check_result(frame: ResultFrame) -> None:
    if not _is_array(frame.additionalContexts):
        raise ValueError("additionalContexts is not an array")
    if frame.isError:
        if frame.value is not UNSET or frame.cancellation is not UNSET:
            raise ValueError("failure with a value or a cancellation")
        if frame.error is UNSET or frame.content is UNSET or not _is_array(frame.content):
            raise ValueError("failure without error or content array")
    else:
        if frame.value is UNSET:
            raise ValueError("success without a value")
        if frame.error is not UNSET:
            raise ValueError("success with an error")
        if frame.content is UNSET and frame.meta is not UNSET:
            raise ValueError("success with meta but no content")
        if frame.content is not UNSET and not _is_array(frame.content):
            raise ValueError("content is not an array")
        if frame.cancellation is not UNSET and not _is_array(frame.cancellation.content):
            raise ValueError("cancellation content is not an array")


def _scan(path: str, scanner: _Scanner) -> None:
    try:
        with open_regular(path) as handle:
            for number, line in enumerate(handle, start=1):
                scanner.feed(number, line)
    except FileRefused as refused:
        raise CassetteIOError("read", display_name(path), refused.reason) from None
    except OSError as exc:
        raise CassetteIOError("read", display_name(path), reason_of(exc)) from None
    scanner.finish()


def check_lines(lines: list[bytes]) -> None:
    """Check in-memory cassette lines (each with its newline) as ``verify_file`` checks a file.

    Raises:
        CassetteInvalid: the first structural failure.
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
        CassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=False)
    try:
        _scan(path, scanner)
    except CassetteInvalid as error:
        return _report(scanner, error)
    return _report(scanner, None)


def _report(scanner: _Scanner, error: CassetteInvalid | None) -> VerifyReport:
    version = scanner.header.version if scanner.header is not None else None
    return VerifyReport(
        valid=error is None,
        version=version,
        frames=scanner.frames,
        calls=scanner.started,
        tools=dict(sorted(scanner.tools.items())),
        error=error,
        definitions=len(scanner.definitions),
    )


def load(path: str) -> Cassette:
    """Verify the cassette at ``path`` completely, then return its calls.

    Raises:
        CassetteInvalid: the first structural failure.
        CassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=True)
    _scan(path, scanner)
    assert scanner.header is not None
    calls = tuple(
        RecordedCall(
            ordinal=ordinal, path=path, tool=tool, args=args, result=scanner.results[ordinal]
        )
        for ordinal, (tool, path, args) in enumerate(scanner.starts)
    )
    return Cassette(header=scanner.header, calls=calls, definitions=scanner.definitions)

