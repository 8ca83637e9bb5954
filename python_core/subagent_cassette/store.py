"""Cassette files on disk: the writer lock, write modes, durable appends, verify and load.

Rule: this is the only module of the package that touches the filesystem (the shared rules
are ``python_core.cassette_io``'s; unlike the tool and model cassettes, the file is written in
place, see docs/subagent-cassette-format.md). A writer holds an
exclusive ``<file>.writer.lock`` directory (with its own ``<uuid>.owner`` marker) from before it
inspects the target until it closes; a second writer fails at once and a leftover lock is never
broken automatically. Every line written is flushed and ``fsync``-ed before the call returns.
Names in errors are file names without directories.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from dsh_sidecar.python_core.cassette_io import display_name, fsync_dir, reason_of, scan_file
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette.errors import (
    CassetteExists,
    CassetteIOError,
    CassetteLocked,
    CassetteNotFound,
    CassetteStateError,
)
from dsh_sidecar.python_core.subagent_cassette.format import Cassette, CassetteParser

__all__ = ["CassetteWriter", "WriterLock", "display_name", "load", "verify_file"]

WriteMode = Literal["create", "truncate", "append"]


def _read_error(operation: str, name: str, reason: str) -> SidecarError:
    return CassetteNotFound(name) if reason == "no such file" else CassetteIOError(name, reason)


def _parse(path: Path, expected_target: str | None, keep: bool) -> Cassette:
    """Stream ``path`` through the parser."""
    parser = CassetteParser(display_name(path), expected_target=expected_target, keep=keep)
    scan_file(path, lambda number, line: parser.feed(line, number), _read_error)
    return parser.finish()


def load(path: str | os.PathLike[str], *, expected_target: str | None = None) -> Cassette:
    """Read and fully validate a cassette, keeping its interactions.

    Raises:
        CassetteNotFound, CassetteIOError: the file cannot be read.
        CassetteFormatError, TargetMismatch: the document is invalid.
    """
    return _parse(Path(path), expected_target, keep=True)


def verify_file(path: str | os.PathLike[str], *, expected_target: str | None = None) -> Cassette:
    """Validate a cassette without keeping its interactions (constant memory per record).

    Raises:
        CassetteNotFound, CassetteIOError: the file cannot be read.
        CassetteFormatError, TargetMismatch: the document is invalid.
    """
    return _parse(Path(path), expected_target, keep=False)


class WriterLock:
    """The exclusive ``<file>.writer.lock`` directory and this writer's owner marker."""

    def __init__(self, path: Path, owner: str) -> None:
        """Prepare (not acquire) the lock of cassette ``path`` for owner id ``owner``."""
        self.directory = path.with_name(path.name + ".writer.lock")
        self.marker = self.directory / f"{owner}.owner"
        self._name = display_name(path)
        self.held = False

    def acquire(self) -> None:
        """Create the lock directory and marker, failing at once if it exists.

        Raises:
            CassetteLocked: another writer holds (or a crashed writer left) the lock.
            CassetteIOError: the directory cannot be created.
        """
        try:
            self.directory.mkdir()
        except FileExistsError:
            raise CassetteLocked(self._name) from None
        except OSError as exc:
            raise CassetteIOError(self._name, reason_of(exc)) from None
        try:
            self.marker.write_text(f"pid {os.getpid()}\n", encoding="utf-8")
        except OSError as exc:
            self.directory.rmdir()
            raise CassetteIOError(self._name, reason_of(exc)) from None
        self.held = True

    def release(self) -> None:
        """Remove only this writer's marker, then the directory if nothing else is in it."""
        if not self.held:
            return
        self.held = False
        self.marker.unlink(missing_ok=True)
        try:
            self.directory.rmdir()
        except OSError:
            # Unknown files inside: never delete what this writer did not create.
            pass


class CassetteWriter:
    """Owns one cassette file for recording; created by ``open``, ended by ``close``."""

    def __init__(self, path: Path, mode: WriteMode, lock: WriterLock) -> None:
        """Use ``CassetteWriter.open``; this only stores its arguments."""
        self.path = path
        self.mode = mode
        self.name = display_name(path)
        self.existing: Cassette | None = None
        self._lock = lock
        self._file: BinaryIO | None = None
        self._closed = False

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        mode: WriteMode,
        *,
        owner: str,
        expected_target: str,
    ) -> CassetteWriter:
        """Take the writer lock, then inspect the target for ``mode``.

        ``create`` fails if the file exists; ``append`` loads and verifies it (``existing``);
        ``truncate`` inspects nothing. No file is created until ``start``.

        Raises:
            CassetteLocked: another writer holds the lock (nothing else is touched).
            CassetteExists: ``create`` and the file exists.
            CassetteFormatError, TargetMismatch: ``append`` found an invalid document.
        """
        target = Path(path)
        lock = WriterLock(target, owner)
        lock.acquire()
        writer = cls(target, mode, lock)
        try:
            if mode == "create" and target.exists():
                raise CassetteExists(writer.name)
            if mode == "append" and target.exists():
                writer.existing = load(target, expected_target=expected_target)
        except BaseException:
            lock.release()
            raise
        return writer

    def start(self, header_line: bytes | None) -> None:
        """Open the file: write and sync ``header_line`` or continue the existing document.

        Raises:
            CassetteExists: ``create`` lost a race with a writer that ignores the lock.
            CassetteIOError: the file cannot be opened or written.
            CassetteStateError: already started or closed.
        """
        if self._file is not None or self._closed:
            raise CassetteStateError("start", "the writer is already started or closed")
        try:
            if self.existing is not None:
                handle = self.path.open("r+b")
                handle.seek(0, os.SEEK_END)
                if handle.tell() > 0:
                    handle.seek(-1, os.SEEK_END)
                    if handle.read(1) != b"\n":
                        handle.write(b"\n")
                self._file = handle
                self._sync()
                return
            if header_line is None:
                raise CassetteStateError("start", "a new cassette needs a header")
            self._file = self.path.open("xb" if self.mode == "create" else "wb")
            self._file.write(header_line)
            self._sync()
            fsync_dir(self.path)
        except FileExistsError:
            raise CassetteExists(self.name) from None
        except OSError as exc:
            raise CassetteIOError(self.name, reason_of(exc)) from None

    def _sync(self) -> None:
        assert self._file is not None
        self._file.flush()
        os.fsync(self._file.fileno())

    def write_lines(self, lines: Sequence[bytes]) -> None:
        """Append complete record lines and ``fsync`` once; all are durable on return.

        The first call opens the file: it continues an ``existing`` document, or else
        ``lines[0]`` is the new document's header.

        Raises:
            CassetteExists: ``create`` lost a race with a writer that ignores the lock.
            CassetteIOError: the file cannot be opened, written or synced.
            CassetteStateError: the writer is closed.
        """
        if self._closed:
            raise CassetteStateError("append", "the writer is closed")
        if self._file is None:
            if self.existing is None:
                self.start(lines[0])
                lines = lines[1:]
            else:
                self.start(None)
        assert self._file is not None
        if not lines:
            return
        try:
            self._file.write(b"".join(lines))
            self._sync()
        except OSError as exc:
            raise CassetteIOError(self.name, reason_of(exc)) from None

    def close(self) -> None:
        """Sync and close the file (if started) and release the lock; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._file is not None:
                try:
                    self._sync()
                finally:
                    self._file.close()
        finally:
            self._lock.release()
