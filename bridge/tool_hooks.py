"""Tool pipeline hooks: the wire side of the tool cassette.

Without a ``toolCassette`` section every call passes through (the hooks are then installed only
for the trace). With one, each event goes to the cassette session, whose decisions become
wire answers here.
"""

from __future__ import annotations

from bridge.protocol import ExecuteDecision, ExecuteParams, PostExecuteDecision, PostExecuteParams, ResultParams
from bridge.mock_driver import MockDriver
from bridge.trace import Trace
from python_core.errors import SidecarError
from python_core.tool_cassette.config import ToolCassetteConfig

__all__ = ["ToolHooks"]

_NEXT = ExecuteDecision(action="next")
_ACCEPT = PostExecuteDecision(action="accept")


class ToolHooks:
    """Route tool hook events to the cassette session (or pass them through)."""

    def __init__(self, trace: Trace, mock: MockDriver | None) -> None:
        self.trace = trace
        self.mock = mock

    @classmethod
    def open(cls, config: ToolCassetteConfig | None, trace: Trace, mock: MockDriver | None) -> ToolHooks:
        """Open the cassette named by ``config`` (``None``: pass-through)."""
        return cls(trace, mock)

    def execute(self, params: ExecuteParams) -> ExecuteDecision:
        """Decide a call entering ``tools/execute``."""
        self.trace.write("tools/execute", tool=params.tool, path=params.path, handle=params.handle, action="next")
        return _NEXT

    def post_execute(self, params: PostExecuteParams) -> PostExecuteDecision:
        """See the result at the post-execute input boundary."""
        self.trace.write("tools/post-execute", tool=params.tool, path=params.path, handle=params.handle)
        return _ACCEPT

    def result(self, params: ResultParams) -> None:
        """See the final outcome."""
        self.trace.write("tools/result", tool=params.tool, path=params.path, handle=params.handle)
        if self.mock is not None:
            self.mock.observe(params.callId, params.tool, *_error_of(params.result))

    def close(self) -> list[SidecarError]:
        """Finish the cassette; return the errors that fail the run."""
        return []


def _error_of(result: object) -> tuple[bool, str | None]:
    """``(isError, error.info.code)`` of a host result, tolerating any shape."""
    if not isinstance(result, dict) or result.get("isError") is not True:
        return False, None
    error = result.get("error")
    info = error.get("info") if isinstance(error, dict) else None
    code = info.get("code") if isinstance(info, dict) else None
    return True, code if isinstance(code, str) else None
