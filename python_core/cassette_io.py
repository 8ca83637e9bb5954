"""Cassette file I/O shared by the tool, subagent and model cassettes: one rule per concern.

- Names: messages show ``display_name`` (the base name, control characters escaped), never a
  directory, so an absolute path cannot leak through any cassette error.
- OS failures: ``reason_of`` turns an ``OSError`` into one path-free phrase (``no such file``,
  ``permission denied``, else the errno name such as ``ENOSPC``).
- Durability: a line is on disk once ``write_lines`` returned (written, then one ``fsync`` for
  the batch); a new or removed directory entry is durable after ``fsync_dir``.
- Hash chain: every record's hash is ``sha256:`` of the canonical JSON of the record without
  ``hash``; ``seal`` computes it for Struct frames, ``seal_mapping``/``mapping_hash`` for the
  dict-shaped records of the subagent format, ``Chain`` numbers and links Struct frames.
- Canonical lines: every line a writer emits is canonical JSON. A reader of a format version
  this product defines rejects any other line (``not canonical JSON``), so what it hashes is
  the bytes it read; only the read-only subagent version 1 (rc.7) re-canonicalises.
- Publishing (tool and model cassettes): ``PartialFile`` appends to ``<file>.partial``
  (created ``O_EXCL``, mode 0600) and publishes with ``os.link``, which never overwrites. The
  subagent cassette writes its file in place under a writer lock instead (its format has no
  completeness mark to publish against; docs/subagent-cassette-format.md says why).
- Schema errors: ``schema_location`` extracts the JSON path a msgspec error points at.
- Line 1: ``probe_header`` reads a would-be header leniently and ``check_header_line`` refuses
  another protocol or an unreadable version by name (whatever JSON ``version`` holds), before
  the strict decode would only say "not a frame of this schema".
- Reading: ``scan_file`` feeds a cassette's lines to its parser and names an unreadable file
  with the format's own error; ``FrameScanner`` is the line-by-line verifier of the chained
  formats (tool, model): the checks they share, in one order, with hooks for their own rules.
"""

from __future__ import annotations

import errno
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.canonical import DEPTH_REASON, canonical_bytes, digest, digest_bytes, too_deep
from dsh_sidecar.python_core.errors import CanonicalJsonError, SidecarError
from dsh_sidecar.python_core.files import FileRefused, display_name, open_regular, reason_of

__all__ = [
    "GENESIS",
    "Chain",
    "ChainFrame",
    "FrameScanner",
    "Invalid",
    "LineSink",
    "PartialFile",
    "check_header_line",
    "decode_line",
    "display_name",
    "frame_hash",
    "fsync_dir",
    "line_hash",
    "make_directories",
    "mapping_hash",
    "partial_path",
    "probe_header",
    "reason_of",
    "scan_file",
    "schema_location",
    "seal",
    "seal_mapping",
]

GENESIS = "sha256:" + "0" * 64

F = TypeVar("F", bound=msgspec.Struct)
T = TypeVar("T")

_ENCODER = msgspec.json.Encoder(order="sorted")
_HASH_MEMBER = b'"hash":'


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """Make the directory entry of ``path`` durable (creation, link or unlink).

    Raises:
        OSError: the directory cannot be opened or synced.
    """
    fd = os.open(os.path.dirname(os.fspath(path)) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def partial_path(path: str) -> str:
    """Return the in-progress recording path for the formal cassette ``path``."""
    return path + ".partial"


def schema_location(exc: msgspec.DecodeError | msgspec.ValidationError) -> str:
    """Return the JSON path (``$.a[0]``) a msgspec error points at, ``$`` when it names none."""
    text = str(exc)
    _, found, location = text.rpartition(" - at `")
    return location.rstrip("`") if found else "$"


class ChainFrame(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind", kw_only=True,
                 gc=False):
    """Fields every frame of a chained cassette carries; ``hash`` is unset only while it is sealed."""

    seq: int
    prev: str
    hash: str | UnsetType = UNSET


C = TypeVar("C", bound=ChainFrame)


def frame_hash(frame: msgspec.Struct) -> str:
    """Return the digest of a Struct frame's canonical JSON without its ``hash`` field."""
    return digest_bytes(_ENCODER.encode(msgspec.structs.replace(frame, hash=UNSET)))


def line_hash(frame: msgspec.Struct, line: bytes) -> str:
    """The digest of ``frame`` without ``hash``, from its canonical ``line`` (keys sorted).

    ``hash`` is never the last key of a frame, so dropping its member from the line gives
    exactly the bytes ``frame_hash`` would encode, without encoding again.
    """
    # getattr: frames of every format share ``hash`` by convention, not by a common base.
    member = _HASH_MEMBER + _ENCODER.encode(getattr(frame, "hash")) + b","  # noqa: B009
    return digest_bytes(line.replace(member, b"", 1))


def seal(frame: F) -> tuple[F, bytes]:
    """Return ``frame`` with its ``hash`` set and its canonical NDJSON line."""
    sealed = msgspec.structs.replace(frame, hash=frame_hash(frame))
    return sealed, _ENCODER.encode(sealed) + b"\n"


def seal_mapping(body: dict[str, Any]) -> tuple[str, bytes]:
    """Return the digest of a dict record ``body`` and its canonical line with ``hash`` added.

    Raises:
        CanonicalJsonError: the record holds a value with no canonical form.
    """
    try:
        record_hash = digest(body)
        return record_hash, canonical_bytes({**body, "hash": record_hash}) + b"\n"
    except UnicodeError:
        raise CanonicalJsonError("/", "lone surrogate in a string") from None
    except RecursionError:
        raise CanonicalJsonError("/", "nesting too deep") from None


def mapping_hash(value: dict[str, Any], canonical_line: bytes | None) -> str:
    """Digest of a dict record without ``hash``: a byte splice when its line is canonical."""
    if canonical_line is not None and isinstance(value.get("hash"), str):
        member = _HASH_MEMBER + canonical_bytes(value["hash"])
        start = canonical_line.find(member)
        # Top-level keys sorted before "hash" hold plain strings, whose quotes are escaped,
        # so the first occurrence is the top-level member and a comma precedes it.
        if start > 0 and canonical_line[start - 1 : start] == b",":
            body = canonical_line[: start - 1] + canonical_line[start + len(member) :]
            return digest_bytes(body)
    return digest({key: item for key, item in value.items() if key != "hash"})


class Invalid(Protocol):
    """A format's invalid-file error: the reason, located by line, frame kind and ordinal."""

    def __call__(self, reason: str, /, *, line: int | None = None, kind: str | None = None,
                 ordinal: int | None = None) -> SidecarError: ...


class _Probe(msgspec.Struct, gc=False):
    """Lenient view of line 1, read before the strict decode so a newer version is named."""

    kind: Any = None
    protocol: Any = None
    version: Any = None


_PROBE_DECODER = msgspec.json.Decoder(_Probe)


def probe_header(line: bytes) -> tuple[object, object, object]:
    """Return ``(kind, protocol, version)`` of a would-be header line, unknown fields ignored.

    Raises:
        msgspec.DecodeError: the line is not a JSON object.
    """
    probe = _PROBE_DECODER.decode(line)
    return probe.kind, probe.protocol, probe.version


def check_header_line(body: bytes, *, protocol: str, readable: tuple[int, ...], reads: str,
                      invalid: Invalid) -> None:
    """Refuse line 1 unless it is a header of ``protocol`` at a version in ``readable``.

    ``reads`` is how the refusal names the readable versions (``1 to 3``).

    Raises:
        the ``invalid`` error at line 1: not a JSON object, not a header, another protocol, or
            a version that is not one of ``readable`` (any JSON value, an object included).
    """
    try:
        kind, found, version = probe_header(body)
    except msgspec.DecodeError:
        raise invalid("not a JSON object", line=1) from None
    if kind != "header":
        raise invalid("first frame is not a header", line=1)
    if found != protocol:
        raise invalid(f"not a {protocol} file", line=1, kind="header")
    # A tuple compares by equality, so an object or array ``version`` (unhashable) is simply not
    # in it; ``True == 1``, hence the bool test.
    if isinstance(version, bool) or version not in readable:
        shown = version if isinstance(version, int) and not isinstance(version, bool) else "?"
        raise invalid(f"unsupported protocol version {shown} (this build reads {reads})", line=1, kind="header")


class LineSink(Protocol):
    """Where an engine's sealed lines go at once when no store layer queues them."""

    def write_lines(self, lines: Sequence[bytes], /) -> None:
        """Append ``lines`` durably, in order (raises the cassette's named I/O error)."""


class _Exists(Protocol):
    def __call__(self, name: str, /) -> SidecarError: ...


class _IoError(Protocol):
    def __call__(self, operation: str, name: str, reason: str, /) -> SidecarError: ...


class Chain:
    """Numbers (``seq`` from 0) and links (``prev``) Struct frames, then seals them."""

    def __init__(self) -> None:
        self.seq = 0
        self.prev = GENESIS

    def link(self, frame: C) -> tuple[C, bytes]:
        """Return ``frame`` chained after the previous one and sealed, with its line."""
        sealed, line = seal(msgspec.structs.replace(frame, seq=self.seq, prev=self.prev))
        assert isinstance(sealed.hash, str)
        self.seq += 1
        self.prev = sealed.hash
        return sealed, line


def make_directories(path: str) -> None:
    """Make the missing directories above ``path``, private (cassettes hold secrets) and synced.

    Raises:
        OSError: a part of the path is not a directory, or a directory cannot be made.
    """
    # Absolute first: the parent of a bare relative name is "", which never exists.
    parent = os.path.dirname(os.path.abspath(path))
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


class PartialFile:
    """``<file>.partial`` with a chain: created exclusively, each frame numbered, linked, sealed,
    appended and fsync-ed, then published create-only.

    Subclasses name their errors: ``exists(name)`` and ``io_error(operation, name, reason)``;
    ``make_parents`` makes the missing directories above the file first (``mkdir -p``).
    """

    exists: ClassVar[_Exists]
    io_error: ClassVar[_IoError]
    make_parents: ClassVar[bool] = False

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.partial = partial_path(path)
        self.chain = Chain()
        self._fd: int | None = fd

    @classmethod
    def create(cls, path: str) -> Self:
        """Create ``<path>.partial`` exclusively (after its directories, with ``make_parents``).

        Raises:
            the ``exists`` error: the formal file or the partial already exists.
            the ``io_error`` error: a directory or the partial cannot be created.
        """
        if cls.make_parents:
            try:
                make_directories(path)
            except OSError as exc:
                raise cls.io_error("create the directory of", display_name(path), reason_of(exc)) from None
        return cls(path, cls.open_partial(path))

    def append(self, frame: C) -> C:
        """Chain, seal, write and fsync one frame; return it as written.

        Raises:
            the ``io_error`` error: the write or fsync failed; the file is closed for good.
        """
        sealed, line = self.chain.link(frame)
        self.write_lines([line])
        return sealed

    def _failed(self, operation: str, path: str, exc: OSError) -> SidecarError:
        return type(self).io_error(operation, display_name(path), reason_of(exc))

    @classmethod
    def open_partial(cls, path: str) -> int:
        """Create ``<path>.partial`` exclusively (directory entry synced) and return its fd.

        Raises:
            the ``exists`` error: the formal file or the partial already exists.
            the ``io_error`` error: the partial cannot be created.
        """
        partial = partial_path(path)
        if os.path.lexists(path):
            raise cls.exists(display_name(path))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        try:
            fd = os.open(partial, flags, 0o600)
        except FileExistsError:
            raise cls.exists(display_name(partial)) from None
        except OSError as exc:
            raise cls.io_error("create", display_name(partial), reason_of(exc)) from None
        try:
            fsync_dir(partial)
        except OSError as exc:
            os.close(fd)
            raise cls.io_error("sync directory of", display_name(partial), reason_of(exc)) from None
        return fd

    def write_lines(self, lines: Sequence[bytes]) -> None:
        """Append ``lines`` in order and fsync once: all of them are durable on return.

        Raises:
            the ``io_error`` error: the write or fsync failed; the file is closed for good.
        """
        if self._fd is None:
            raise type(self).io_error("append to", display_name(self.partial), "EBADF")
        try:
            view = memoryview(lines[0] if len(lines) == 1 else b"".join(lines))
            while view:
                view = view[os.write(self._fd, view) :]
            os.fsync(self._fd)
        except OSError as exc:
            self.abandon()
            raise self._failed("write", self.partial, exc) from None

    def publish(self) -> None:
        """Close the partial, link it create-only to the formal path, then unlink it.

        Raises:
            the ``exists`` error: the formal file appeared meanwhile; the partial is kept.
            the ``io_error`` error: linking or unlinking failed.
        """
        self.abandon()
        try:
            os.link(self.partial, self.path)
        except FileExistsError:
            raise type(self).exists(display_name(self.path)) from None
        except OSError as exc:
            raise self._failed("publish", self.path, exc) from None
        try:
            os.unlink(self.partial)
            fsync_dir(self.path)
        except OSError as exc:
            raise self._failed("remove", self.partial, exc) from None

    def abandon(self) -> None:
        """Close the partial and leave it on disk as evidence."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def discard(self) -> None:
        """Close the partial and remove it: it holds nothing worth keeping (the header only)."""
        self.abandon()
        try:
            os.unlink(self.partial)
            fsync_dir(self.partial)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise self._failed("remove", self.partial, exc) from None


def scan_file(path: str | os.PathLike[str], feed: Callable[[int, bytes], None], io_error: _IoError) -> None:
    """Feed each line of the cassette at ``path`` (numbered from 1, newline kept) to ``feed``.

    Raises:
        whatever ``feed`` raises.
        the ``io_error("read", name, reason)`` error: the file cannot be opened or read.
    """
    try:
        with open_regular(path) as handle:
            for number, line in enumerate(handle, start=1):
                feed(number, line)
    except FileRefused as refused:
        raise io_error("read", display_name(path), refused.reason) from None
    except OSError as exc:
        raise io_error("read", display_name(path), reason_of(exc)) from None


def decode_line(decode: Callable[[bytes], T], body: bytes, number: int, invalid: Invalid) -> T:
    """Return ``decode(body)``; a schema failure is refused at line ``number``, naming its JSON path.

    Raises:
        the ``invalid`` error: ``not a frame of this schema (at $.path)``.
    """
    try:
        return decode(body)
    except msgspec.DecodeError as exc:
        raise invalid(f"not a frame of this schema (at {schema_location(exc)})", line=number) from None


class FrameScanner(ABC, Generic[C]):
    """Verifies a chained cassette one line at a time; the format adds its frames' own rules.

    Each line, in this order: its newline, nothing after the tail, the nesting depth, line 1 a
    readable header (``check_header_line``), the strict ``decode``; then, located at the
    frame's kind and ordinal: ``canonical`` form, ``seq``, ``prev``, ``hash_of`` and the
    format's ``check`` (which sets ``complete`` on the tail). ``finish`` refuses an empty file
    and a missing tail. A hook refuses a frame by raising ``ValueError(reason)``.
    """

    invalid: ClassVar[Invalid]
    io_error: ClassVar[_IoError]
    protocol: ClassVar[str]
    readable: ClassVar[tuple[int, ...]]
    reads: ClassVar[str]
    """How a refusal names the readable versions (``1 to 3``)."""

    def __init__(self) -> None:
        self.frames = 0
        self.prev = GENESIS
        self.complete = False

    @abstractmethod
    def decode(self, body: bytes) -> C:
        """Decode one line (no newline) strictly; raises ``msgspec.DecodeError``."""

    @abstractmethod
    def canonical(self, frame: C, body: bytes) -> bool:
        """Tell whether ``body`` is the canonical line of ``frame`` as this format writes it."""

    @abstractmethod
    def hash_of(self, frame: C, body: bytes) -> str:
        """The digest ``frame``'s ``hash`` must hold (``body`` is canonical here)."""

    @abstractmethod
    def check(self, frame: C) -> None:
        """The format's rules for a frame whose chain fields hold; sets ``complete`` on the tail."""

    def feed(self, number: int, line: bytes) -> None:
        """Check line ``number`` (from 1, with its newline).

        Raises:
            the ``invalid`` error: the first rule the line breaks.
        """
        invalid = type(self).invalid
        if not line.endswith(b"\n"):
            raise invalid("truncated line (no newline)", line=number)
        body = line[:-1]
        if self.complete:
            raise invalid("frame after the complete tail", line=number)
        if too_deep(body):
            raise invalid(DEPTH_REASON, line=number)
        if number == 1:
            check_header_line(body, protocol=self.protocol, readable=self.readable, reads=self.reads,
                              invalid=invalid)
        frame = decode_line(self.decode, body, number, invalid)
        kind = type(frame).__struct_config__.tag
        assert isinstance(kind, str)
        ordinal = getattr(frame, "ordinal", None)
        try:
            if not self.canonical(frame, body):
                raise ValueError("not canonical JSON")
            if frame.seq != self.frames:
                raise ValueError(f"seq {frame.seq} where {self.frames} expected")
            if frame.prev != self.prev:
                raise ValueError("prev does not match the previous frame's hash")
            if frame.hash is UNSET or frame.hash != self.hash_of(frame, body):
                raise ValueError("hash does not match the frame")
            self.check(frame)
        except ValueError as exc:
            raise invalid(str(exc), line=number, kind=kind, ordinal=ordinal) from None
        self.frames += 1
        self.prev = frame.hash

    def finish(self) -> None:
        """Refuse an empty file or one without its tail (raises the ``invalid`` error)."""
        if self.frames == 0:
            raise type(self).invalid("empty file")
        if not self.complete:
            raise type(self).invalid(f"missing complete tail frame after line {self.frames}")

    def scan_lines(self, lines: Iterable[bytes]) -> None:
        """Check in-memory lines (each with its newline) as ``scan_path`` checks a file."""
        for number, line in enumerate(lines, start=1):
            self.feed(number, line)
        self.finish()

    def scan_path(self, path: str) -> None:
        """Check every line of the cassette at ``path``.

        Raises:
            the ``invalid`` error: the first rule a line breaks.
            the ``io_error`` error: the file cannot be read.
        """
        scan_file(path, self.feed, type(self).io_error)
        self.finish()
