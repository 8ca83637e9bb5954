"""What every cassette's ``reseal`` shares: the report, the file read, the atomic replace.

Rule: a format's ``reseal_lines`` turns the lines read into the lines to write (or raises its
named invalid error, and nothing is written); ``reseal_path`` reads the file, calls it, and
replaces the file atomically: the new text goes to a private temporary file beside the
cassette (mode 0600), is fsync-ed, then ``os.replace``-d over it and the directory synced; on
failure the temporary file is removed and the cassette is untouched. I/O failures become the
cassette's own named error through the ``io_error(operation, name, reason)`` it passes.
A chained format (tool, model) reseals with ``reseal_chain``: its frames are renumbered,
relinked and resealed, its tail rebuilt, and the result checked by its own verifier.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import msgspec

from dsh_sidecar.python_core.cassette_io import Chain, ChainFrame, Invalid, display_name, fsync_dir, reason_of
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.files import FileRefused, open_regular

__all__ = ["ResealReport", "changed_lines", "reseal_chain", "reseal_path"]

YOURS = "the file is now yours (integrity proves only that nothing changed since this reseal)"


class ResealReport(msgspec.Struct, frozen=True):
    """What a reseal did: lines (frames) written, calls, and how many lines changed."""

    frames: int
    calls: int
    changed: int

    def summary(self, calls: str = "calls", frames: str = "frames") -> str:
        """The one line a ``reseal`` command prints, counting in the format's own words."""
        return (f"resealed: {self.calls} {calls}, {self.frames} {frames}, {self.changed} lines "
                f"rewritten; {YOURS}")


def changed_lines(before: list[bytes], after: list[bytes]) -> int:
    """How many lines of ``after`` differ from the same line of ``before``, plus lines dropped."""
    changed = sum(1 for index, line in enumerate(after) if index >= len(before) or before[index] != line)
    return changed + max(0, len(before) - len(after))


def reseal_chain(
    lines: list[bytes],
    frame_of: Callable[[int, bytes], ChainFrame | None],
    *,
    header: type[ChainFrame],
    call: type[ChainFrame],
    tail: Callable[[int], ChainFrame],
    invalid: Invalid,
    verify: Callable[[list[bytes]], None],
) -> tuple[list[bytes], ResealReport]:
    """Reseal the lines of a chained cassette: renumber, relink, reseal, rebuild the tail, verify.

    Args:
        frame_of: ``(line number, line without newline)`` to the frame with its derived fields
            recomputed, or ``None`` for the tail (rebuilt last); raises the format's error.
        header, call: the header's and a call's frame types (the report counts calls).
        tail: the tail frame counting ``calls`` (chain fields are set by the chain).
        invalid: the format's invalid-file error.
        verify: the format's ``check_lines``, the verifier replay uses.

    Raises:
        the ``invalid`` error: a tail before the last line, no header first, whatever
            ``frame_of`` or ``verify`` raise (nothing is written).
    """
    frames: list[ChainFrame] = []
    for number, line in enumerate(lines, start=1):
        frame = frame_of(number, line[:-1] if line.endswith(b"\n") else line)
        if frame is None:
            if number != len(lines):
                raise invalid("complete tail before the last line", line=number)
            continue
        frames.append(frame)
    if not frames or not isinstance(frames[0], header):
        raise invalid("first frame is not a header", line=1)
    chain = Chain()
    out = [chain.link(frame)[1] for frame in frames]
    calls = sum(1 for frame in frames if isinstance(frame, call))
    out.append(chain.link(tail(calls))[1])
    verify(out)
    return out, ResealReport(frames=len(out), calls=calls, changed=changed_lines(lines, out))


def _read_lines(path: str) -> list[bytes]:
    with open_regular(path) as handle:
        return handle.readlines()


def _replace_file(path: str, data: bytes) -> None:
    fd, temporary = tempfile.mkstemp(prefix=".reseal-", dir=os.path.dirname(os.path.abspath(path)))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise
    fsync_dir(path)


def reseal_path(
    path: str,
    reseal_lines: Callable[[list[bytes]], tuple[list[bytes], ResealReport]],
    io_error: Callable[[str, str, str], SidecarError],
) -> ResealReport:
    """Reseal the cassette at ``path`` in place, atomically, with the format's ``reseal_lines``.

    Raises:
        whatever ``reseal_lines`` raises (the file is left untouched).
        the ``io_error`` error: the file cannot be read, or the new one cannot be written.
    """
    name = display_name(path)
    try:
        lines = _read_lines(path)
    except FileRefused as refused:
        raise io_error("read", name, refused.reason) from None
    except OSError as exc:
        raise io_error("read", name, reason_of(exc)) from None
    out, report = reseal_lines(lines)
    try:
        _replace_file(path, b"".join(out))
    except OSError as exc:
        raise io_error("replace", name, reason_of(exc)) from None
    return report
