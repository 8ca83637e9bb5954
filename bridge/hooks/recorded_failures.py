"""The failed calls a tool cassette recording holds, named once at shutdown.

Recording a failure is legitimate (a test that replays an outage on purpose), so this is a
warning and never changes the exit code. But a recording made while a service was down replays
that outage in every later run, and its summary alone (``published: yes``) does not say so: the
run ends with one ``TOOL_FAILURE_RECORDED`` line, as the subagent cassette's
``SUBAGENT_CHILD_FAILED``, naming each failed call by tool, structural path and runtime code,
never its message, arguments or value.
"""

from __future__ import annotations

import re
from typing import Final

from msgspec import UNSET

from dsh_sidecar.python_core.tool_cassette.engine import HostToolResult

__all__ = ["CODE", "RecordedFailures"]

CODE: Final = "TOOL_FAILURE_RECORDED"
# A runtime code is printed only when it looks like one: a tool's own text never reaches stderr.
_CODE_SHAPE: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_SHOWN: Final = 3


class RecordedFailures:
    """Failed outcomes captured at post-execute, kept once the recording wrote them."""

    def __init__(self) -> None:
        self._captured: dict[str, str] = {}
        self.failed: list[str] = []
        """One ``tool at path with runtime code X`` per failed call written, in order."""

    def captured(self, handle: str, tool: str, path: str, result: HostToolResult) -> None:
        """A selected call's outcome was captured for the recording (the one replays serve)."""
        if not result.isError:
            return
        info = UNSET if result.error is UNSET else result.error.info
        code = None if info is UNSET else info.code
        shown = f"runtime code {code}" if code is not None and _CODE_SHAPE.fullmatch(code) else "no runtime code"
        self._captured[handle] = f"{tool} at {path} with {shown}"

    def settled(self, handle: str, written: bool) -> None:
        """The call's result reached the recording; ``written``: its line was emitted."""
        failure = self._captured.pop(handle, None)
        if failure is not None and written:
            self.failed.append(failure)

    def note(self, recorded: int, published: bool) -> str | None:
        """The warning line, or ``None`` when no recorded call failed."""
        if not self.failed:
            return None
        shown = "; ".join(self.failed[:_SHOWN])
        more = len(self.failed) - _SHOWN
        fate = ("the cassette is published anyway and replays them" if published
                else "the cassette is not published (see the errors)")
        return (
            f"{CODE}: {len(self.failed)} of {recorded} recorded call(s) failed ({shown}"
            + (f"; and {more} more" if more > 0 else "") + f"); {fate}; if a tool should succeed, "
            "fix it (or the service it needs) and re-record (record mode all)"
        )
