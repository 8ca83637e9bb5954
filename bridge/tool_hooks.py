"""Tool pipeline hooks: the wire side of the tool cassette.

Every forwarded call is traced; calls of tools the cassette selects go to its session, whose
decisions (pass through, serve a recorded outcome, refuse) become wire answers here. Without
a ``toolCassette`` section every call passes through.
"""

from __future__ import annotations

from msgspec import UNSET

from bridge.mock_driver import MockDriver
from bridge.protocol import (
    ExecuteDecision,
    ExecuteParams,
    PostExecuteDecision,
    PostExecuteParams,
    ResultParams,
)
from bridge.trace import Trace
from python_core.errors import SidecarError
from python_core.tool_cassette.config import ToolCassetteConfig
from python_core.tool_cassette.engine import (
    CloseReport,
    ExecuteEvent,
    Passthrough,
    PostEvent,
    Refuse,
    ResultEvent,
    ToolCassetteSession,
    ToolResult,
)

__all__ = ["ToolHooks"]

_NEXT = ExecuteDecision(action="next")
# An unselected call with no trace: post-execute would only accept, so the shim skips asking.
_NEXT_NO_POST = ExecuteDecision(action="next", post=False)
_ACCEPT = PostExecuteDecision(action="accept")
# A call seen only after tools/execute (denied in pre-execute, or short-circuited outside us).
_NO_PATH = "(not dispatched)"


class ToolHooks:
    """Route tool hook events to the cassette session (or pass them through)."""

    def __init__(self, trace: Trace, mock: MockDriver | None, cassette: ToolCassetteSession | None) -> None:
        self.trace = trace
        self.mock = mock
        self.cassette = cassette
        self.closed: CloseReport | None = None

    @classmethod
    def open(cls, config: ToolCassetteConfig | None, trace: Trace, mock: MockDriver | None) -> ToolHooks:
        """Open the cassette named by ``config`` (``None``: pass-through).

        Raises:
            SidecarError: the cassette cannot be opened (exists, invalid, unreadable).
        """
        cassette = None if config is None else ToolCassetteSession.open(config)
        return cls(trace, mock, cassette)

    def _selected(self, tool: str) -> ToolCassetteSession | None:
        cassette = self.cassette
        return cassette if cassette is not None and cassette.selects(tool) else None

    def execute(self, params: ExecuteParams) -> ExecuteDecision:
        """Decide a call entering ``tools/execute``."""
        cassette = self._selected(params.tool)
        if cassette is None and not self.trace.enabled:
            return _NEXT_NO_POST
        decision = _NEXT
        if cassette is not None:
            try:
                outcome = cassette.on_execute(
                    ExecuteEvent(handle=params.handle, path=params.path, tool=params.tool,
                                 args_json=params.args.encode())
                )
            except SidecarError as error:
                outcome = Refuse(error=error)
            if isinstance(outcome, Refuse):
                decision = ExecuteDecision(action="refuse", code=outcome.error.code, message=str(outcome.error))
            elif not isinstance(outcome, Passthrough):
                decision = ExecuteDecision(
                    action="serve", result=outcome.result, deferContexts=outcome.additionalContexts,
                    cancellation=outcome.cancellation,
                )
        self.trace.write(
            "tools/execute", tool=params.tool, path=params.path, handle=params.handle, action=decision.action,
        )
        return decision

    def post_execute(self, params: PostExecuteParams) -> PostExecuteDecision:
        """See the result at the post-execute input boundary."""
        self.trace.write("tools/post-execute", tool=params.tool, path=params.path, handle=params.handle)
        cassette = self._selected(params.tool)
        if cassette is None:
            return _ACCEPT
        try:
            refused = cassette.on_post_execute(
                PostEvent(handle=params.handle, path=params.path or _NO_PATH, tool=params.tool, result=params.result)
            )
        except SidecarError as error:
            refused = Refuse(error=error)
        if refused is None:
            return _ACCEPT
        return PostExecuteDecision(action="refuse", message=str(refused.error))

    def result(self, params: ResultParams) -> None:
        """See the final outcome."""
        self.trace.write("tools/result", tool=params.tool, path=params.path, handle=params.handle)
        if self.mock is not None:
            self.mock.observe(params.callId, params.tool, params.result.isError, _code(params.result))
        cassette = self._selected(params.tool)
        if cassette is not None:
            try:
                cassette.on_result(
                    ResultEvent(handle=params.handle, path=params.path or _NO_PATH, tool=params.tool,
                                result=params.result)
                )
            except SidecarError as error:
                self.trace.write("tools/result", handle=params.handle, error=error.code)

    def close(self, interruption: str | None = None) -> tuple[list[SidecarError], list[str]]:
        """Finish the cassette; return the errors that fail the run and a summary line.

        ``interruption`` (from the turn ledger) keeps a recording's partial unpublished.
        """
        if self.cassette is None:
            return [], []
        report = self.closed = self.cassette.close(interruption)
        stats = report.stats
        note = (
            f"tool cassette {stats.mode}: {stats.selected} selected calls, "
            + (f"{stats.recorded} recorded, published: {'yes' if report.published else 'no'}"
               if stats.mode == "record"
               else f"{stats.consumed} consumed, {stats.unconsumed} unconsumed, "
                    f"poisoned: {'yes' if stats.poisoned else 'no'}")
        )
        return list(report.errors), [note]


def _code(result: ToolResult) -> str | None:
    """``error.info.code`` of a failed host result."""
    if not result.isError or result.error is UNSET or result.error.info is UNSET:
        return None
    return result.error.info.code
