"""Cassette files: the append-only recorder, create-only publishing, verify and load.

Rule (``python_core.cassette_io``): the formal file is never written in place and never
overwritten. Recording appends to ``<file>.partial`` (created with O_EXCL), fsyncs every
frame, then publishes with ``os.link`` (fails if the formal file exists) and unlinks the
partial. Verify and load run one scanner: a file is loaded only after every frame has been
checked, and a line that is not canonical JSON (a version 4 outcome's payloads aside: the host's
strict JSON text) is rejected.
"""

from __future__ import annotations

import sys

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.canonical import digest_bytes
from dsh_sidecar.python_core.cassette_io import FrameScanner, PartialFile, frame_hash
from dsh_sidecar.python_core.tool_cassette.errors import CassetteExists, CassetteInvalid, CassetteIOError
from dsh_sidecar.python_core.tool_cassette.format import (
    OBSERVED_VERSION,
    PROTOCOL,
    READABLE_VERSIONS,
    VERSION,
    AnyFrame,
    Cancellation,
    DefinitionFrame,
    HeaderFrame,
    HostEvent,
    ObservedResult,
    ObservedStep,
    ResultFrame,
    StartFrame,
    decode_frame,
    is_well_formed,
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

class Recorder(PartialFile):
    """The tool cassette's ``<file>.partial``: a fresh project has no ``.dsh-cassettes/`` yet, so
    recording into it makes the directory, as ``mkdir -p``."""

    exists = CassetteExists
    io_error = CassetteIOError
    make_parents = True


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
    observed_results: tuple[ObservedResult, ...] = ()
    """Version 5: the unselected calls' outcome digests, in file order."""
    observed_steps: tuple[ObservedStep, ...] = ()
    """Version 5: each model step's system prompt and tool digests, in file order."""


class VerifyReport(msgspec.Struct, frozen=True):
    """Outcome of ``verify_file``; ``error`` is set iff ``valid`` is false."""

    valid: bool
    version: int | None
    frames: int
    calls: int
    tools: dict[str, int]
    error: CassetteInvalid | None = None
    definitions: int = 0
    # Where the calls come from when not recorded: ``session-log`` (docs/import.md).
    source: str = ""


class _Scanner(FrameScanner[AnyFrame]):
    """The tool cassette's rules over the shared chain checks: pairing, definitions, the tail."""

    invalid = CassetteInvalid
    io_error = CassetteIOError
    protocol = PROTOCOL
    readable = tuple(sorted(READABLE_VERSIONS))
    reads = f"1 to {VERSION}"

    def __init__(self, keep: bool) -> None:
        super().__init__()
        self.keep = keep
        self.header: HeaderFrame | None = None
        self.tools: dict[str, int] = {}
        self.open_calls: dict[int, StartFrame | None] = {}
        self.started = 0
        self.starts: list[tuple[str, str, msgspec.Raw]] = []
        self.results: dict[int, ResultFrame] = {}
        self.definitions: dict[str, DefinitionFrame] = {}
        self.observed_results: list[ObservedResult] = []
        self.observed_steps: list[ObservedStep] = []

    def decode(self, body: bytes) -> AnyFrame:
        return decode_frame(body)

    def canonical(self, frame: AnyFrame, body: bytes) -> bool:
        return is_well_formed(body, frame, None if self.header is None else self.header.version)

    def hash_of(self, frame: AnyFrame, body: bytes) -> str:
        return frame_hash(frame)

    def check(self, frame: AnyFrame) -> None:
        """Kind-specific rules; raises ValueError with a structural reason."""
        if isinstance(frame, HeaderFrame):
            if self.header is not None:
                raise ValueError("second header")
            if frame.source is not UNSET and frame.version < OBSERVED_VERSION:
                raise ValueError(f"source in a version {frame.version} file")
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
            if self.header.source is not UNSET and not frame.isError and frame.content is UNSET:
                raise ValueError("imported success without the content it showed")
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
        elif isinstance(frame, ObservedResult | ObservedStep):
            if self.header.version < OBSERVED_VERSION:
                raise ValueError(f"observed frame in a version {self.header.version} file")
            if isinstance(frame, ObservedResult):
                if not frame.tool or not frame.path:
                    raise ValueError("empty tool or path")
                if self.keep:
                    self.observed_results.append(msgspec.structs.replace(frame, prev="", hash=UNSET))
            else:
                if frame.session < 0 or frame.turn < 0 or frame.step < 0:
                    raise ValueError("negative session, turn or step")
                if self.keep:
                    self.observed_steps.append(msgspec.structs.replace(frame, prev="", hash=UNSET))
        else:
            if frame.calls != self.started:
                raise ValueError(f"tail counts {frame.calls} calls, {self.started} started")
            if self.open_calls:
                raise ValueError(f"ordinal {min(self.open_calls)} has no result")
            self.complete = True


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


def check_lines(lines: list[bytes]) -> None:
    """Check in-memory cassette lines (each with its newline) as ``verify_file`` checks a file.

    Raises:
        CassetteInvalid: the first structural failure.
    """
    _Scanner(keep=False).scan_lines(lines)


def verify_file(path: str) -> VerifyReport:
    """Check every frame of the cassette at ``path``.

    Returns:
        A report; ``valid`` is false and ``error`` names the first structural failure.
    Raises:
        CassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=False)
    try:
        scanner.scan_path(path)
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
        source="" if scanner.header is None or scanner.header.source is UNSET else scanner.header.source,
    )


def load(path: str) -> Cassette:
    """Verify the cassette at ``path`` completely, then return its calls.

    Raises:
        CassetteInvalid: the first structural failure.
        CassetteIOError: the file cannot be read.
    """
    scanner = _Scanner(keep=True)
    scanner.scan_path(path)
    assert scanner.header is not None
    calls = tuple(
        RecordedCall(
            ordinal=ordinal, path=path, tool=tool, args=args, result=scanner.results[ordinal]
        )
        for ordinal, (tool, path, args) in enumerate(scanner.starts)
    )
    return Cassette(header=scanner.header, calls=calls, definitions=scanner.definitions,
                    observed_results=tuple(scanner.observed_results), observed_steps=tuple(scanner.observed_steps))

