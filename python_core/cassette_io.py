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
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import msgspec
from msgspec import UNSET

from dsh_sidecar.python_core.canonical import canonical_bytes, digest, digest_bytes
from dsh_sidecar.python_core.errors import CanonicalJsonError, SidecarError
from dsh_sidecar.python_core.files import display_name, reason_of

__all__ = [
    "GENESIS",
    "Chain",
    "Invalid",
    "LineSink",
    "PartialFile",
    "check_header_line",
    "display_name",
    "frame_hash",
    "fsync_dir",
    "line_hash",
    "mapping_hash",
    "partial_path",
    "probe_header",
    "reason_of",
    "schema_location",
    "seal",
    "seal_mapping",
]

GENESIS = "sha256:" + "0" * 64

F = TypeVar("F", bound=msgspec.Struct)

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

    def link(self, frame: F) -> tuple[F, bytes]:
        """Return ``frame`` chained after the previous one and sealed, with its line."""
        sealed, line = seal(msgspec.structs.replace(frame, seq=self.seq, prev=self.prev))
        self.seq += 1
        self.prev = getattr(sealed, "hash")  # noqa: B009 (see line_hash)
        return sealed, line


class PartialFile:
    """``<file>.partial``: created exclusively, appended and fsync-ed, published create-only.

    Subclasses name their errors: ``exists(name)`` and ``io_error(operation, name, reason)``.
    """

    exists: ClassVar[_Exists]
    io_error: ClassVar[_IoError]

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.partial = partial_path(path)
        self._fd: int | None = fd

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
