"""Tool pipeline hooks: the wire side of the tool cassette.

Every forwarded call is traced; calls of tools the cassette selects go to its session, whose
decisions (pass through, serve a recorded outcome, refuse) become wire answers here. Without
a ``toolCassette`` section every call passes through. A recording's lines go to a
``LineWriter``: the ``tools/execute`` answer of a recorded call is a ``Later`` sent once its
``call/start`` line is durable, while the reader serves other requests.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

import anyio
import msgspec
from msgspec import UNSET

from dsh_sidecar.bridge.hooks.mock import MockDriver
from dsh_sidecar.bridge.hooks.recorded_failures import RecordedFailures
from dsh_sidecar.bridge.hooks.stubs import Stubs
from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.later import Later, Pending
from dsh_sidecar.bridge.transport.line_writer import LineWriter, Ticket
from dsh_sidecar.bridge.transport.protocol import (
    ExecuteDecision,
    ExecuteParams,
    PostExecuteDecision,
    PostExecuteParams,
    RegistryParams,
    ResultParams,
    StandIn,
    StepParams,
)
from dsh_sidecar.bridge.transport.report import CallPath
from dsh_sidecar.python_core.composition import Composition
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig
from dsh_sidecar.python_core.tool_cassette.dependencies import DependencyTracker
from dsh_sidecar.python_core.tool_cassette.divergence import DivergenceWatch, StepObserver, observe_result
from dsh_sidecar.python_core.tool_cassette.engine import (
    CloseReport,
    ExecuteEvent,
    HostToolResult,
    Passthrough,
    PostEvent,
    RecordSession,
    Refuse,
    ReplaySession,
    ResultEvent,
    Serve,
    ToolCassetteSession,
)
from dsh_sidecar.python_core.tool_cassette.errors import UnmatchedPattern
from dsh_sidecar.python_core.tool_cassette.format import OBSERVED_VERSION
from dsh_sidecar.python_core.tool_cassette.host_state import kept, restored
from dsh_sidecar.python_core.tool_cassette.routing import Blocked, CallRouter, Live, Stubbed

__all__ = ["ToolHooks"]

_NEXT = ExecuteDecision(action="next")
# An unselected call with no trace: post-execute would only accept, so the shim skips asking.
_NEXT_NO_POST = ExecuteDecision(action="next", post=False)
_ACCEPT = PostExecuteDecision(action="accept")
# A call seen only after tools/execute (denied in pre-execute, or short-circuited outside us).
_NO_PATH = "(not dispatched)"


_NULL = msgspec.Raw(b"null")

class ToolHooks:
    """Route tool hook events to the cassette session (or pass them through)."""

    def __init__(self, trace: Trace, mock: MockDriver | None, cassette: ToolCassetteSession | None,
                 stubs: Stubs | None = None, live_tools: tuple[str, ...] | None = None, cwd: str = "",
                 warn: Callable[[str], None] | None = None, strict_replay: bool = False) -> None:
        self.trace = trace
        # A warning line's sink: stderr, or the warm session's own lines.
        self.warn = warn or _stderr
        self.stubs = stubs
        self.cwd = cwd or os.getcwd()
        self.mock = mock
        self.cassette = cassette
        self.recording = cassette if isinstance(cassette, RecordSession) else None
        self.writer = None if self.recording is None else LineWriter(self.recording.recorder.write_lines, self._failed)
        self.closed: CloseReport | None = None
        # When the first call was refused (monotonic ns): the cassette that refused first leads
        # the errors at shutdown. ``calls``: every call's structural path, when a report wants them.
        self.refused_at: int | None = None
        self.calls: list[CallPath] | None = None
        # Which way each call goes (python_core/tool_cassette/routing.py): stub, cassette, refused, live.
        self.router = CallRouter(
            stubbed=() if stubs is None else list(stubs.functions), live_tools=live_tools,
            selects=None if cassette is None else cassette.selects,
            dependencies=None if cassette is None else DependencyTracker(self.cwd),
            recording=self.recording is not None, traced=trace.enabled,
        )
        if isinstance(cassette, ReplaySession):
            cassette.cwd = self.cwd
        # What a replay does not serve, kept as digests when recording and compared on replay.
        self.strict_replay = strict_replay
        self.steps = StepObserver(self.cwd) if self.recording is not None else None
        self.divergence = None if not isinstance(cassette, ReplaySession) else DivergenceWatch(
            cassette.observed_results, cassette.observed_steps,
            cassette.version >= OBSERVED_VERSION and not cassette.imported,
            cassette.config.volatile, self.cwd)
        # The recorded tools the shim stood up because no plugin registered them.
        self.stood_up: list[str] = []
        self.failures = RecordedFailures()

    def stand_ins(self) -> list[StandIn]:
        """The recorded contracts of a replay, for the shim to register where no plugin did (an
        imported cassette's in any case: ``shadow``)."""
        cassette = self.cassette
        if not isinstance(cassette, ReplaySession):
            return []
        return [
            StandIn(name=d.tool, description=d.description, parameters=d.parameters, output=d.output,
                    presentationMeta=d.presentationMeta is True, timeoutMs=d.timeoutMs, shadow=cassette.imported)
            for d in cassette.definitions.values()
        ]

    def registry_view(self) -> Literal["none", "names", "contracts"]:
        """What the shim reports of the registered tools: a recording keeps the contracts of
        the selected ones; a replay checks its patterns against the names."""
        if self.cassette is None:
            return "none"
        return "contracts" if self.recording is not None else "names"

    def registry(self, params: RegistryParams) -> Later | None:
        """The tools the plugins registered, and the stand-ins, when the first agent was created."""
        self.trace.write("tools/registry", tools=len(params.tools), standIns=params.standIns,
                         failed=[f.tool for f in params.failed])
        cassette = self.cassette
        if cassette is None:
            return None
        if isinstance(cassette, ReplaySession):
            cassette.stood_up = frozenset(params.standIns)
            cassette.standin_errors = {f.tool: f.message for f in params.failed}
        self.stood_up = sorted(params.standIns)
        names = [tool.name for tool in params.tools] + params.standIns
        for pattern in cassette.config.unmatched(names):
            # Named at boot, before any turn: the recording would select nothing through it.
            self.warn(f"dsh-sidecar: warning: {UnmatchedPattern(pattern, len(params.tools))}; "
                      f"fix: {UnmatchedPattern.hint}")
        if self.recording is not None:
            for tool in params.tools:
                if tool.contract is not None:
                    self.recording.define(tool.name, tool.contract)
            ticket = self._queued()
            if ticket is not None and self.writer is not None:
                return Later(self.writer, ticket, _no_answer)
        return None

    def _failed(self, error: SidecarError) -> None:
        assert self.recording is not None
        self.recording.write_failed(None, error)

    @classmethod
    def open(cls, config: ToolCassetteConfig | None, trace: Trace, mock: MockDriver | None,
             stubs: Stubs | None = None, live_tools: tuple[str, ...] | None = None, cwd: str = "",
             warn: Callable[[str], None] | None = None, strict_replay: bool = False,
             plugins: Composition | None = None) -> ToolHooks:
        """Open the cassette named by ``config`` (``None``: pass-through); ``stubs`` serve their tools;
        ``live_tools``: the offline guard; ``cwd``: the session's; ``warn``: where warnings go;
        ``strict_replay``: a replay's divergence fails the run instead of warning; ``plugins``: the
        run's composition (a recording keeps it, a replay compares it).

        Raises:
            SidecarError: the cassette cannot be opened (exists, invalid, unreadable).
        """
        cassette = None if config is None else ToolCassetteSession.open(config, deferred=True, plugins=plugins)
        return cls(trace, mock, cassette, stubs, live_tools, cwd, warn, strict_replay)

    def _selected(self, tool: str) -> ToolCassetteSession | None:
        cassette = self.cassette
        return cassette if cassette is not None and cassette.selects(tool) else None

    def _queued(self) -> Ticket | None:
        """Submit the lines the recording just sealed, if any."""
        if self.recording is None or self.writer is None:
            return None
        lines = self.recording.take_writes()
        return self.writer.submit(lines) if lines else None

    def execute(self, params: ExecuteParams) -> ExecuteDecision | Later | Pending:
        """Decide a call entering ``tools/execute`` (a recorded call's answer waits for its line)."""
        decision = self._decide(params)
        if isinstance(decision, ExecuteDecision) and decision.action == "refuse" and self.refused_at is None:
            self.refused_at = time.monotonic_ns()
        return decision

    def _decide(self, params: ExecuteParams) -> ExecuteDecision | Later | Pending:
        route = self.router.admit(params.handle, params.tool, params.path, params.args)
        if isinstance(route, Stubbed) and self.stubs is not None:
            return self._stubbed(params, self.stubs)
        if isinstance(route, Blocked):
            return self._decided(params, Refuse(error=route.error))
        cassette = self.cassette
        if isinstance(route, Live) or cassette is None:
            return self._decided(params, None) if self.trace.enabled else _NEXT_NO_POST
        try:
            outcome = cassette.on_execute(
                ExecuteEvent(handle=params.handle, path=params.path, tool=params.tool,
                             args_json=params.args.encode())
            )
        except SidecarError as error:
            outcome = Refuse(error=error)
        ticket = self._queued()
        if isinstance(outcome, Serve) and outcome.delay_ms:
            # A fault overlay's delay: answered later while the reader goes on (replay has no writer).
            return Pending(lambda: self._delayed(params, outcome))
        if ticket is None or self.writer is None:
            return self._decided(params, outcome)
        return Later(self.writer, ticket, lambda failure: self._written(params, outcome, failure))

    async def _delayed(self, params: ExecuteParams, outcome: Serve) -> ExecuteDecision:
        await anyio.sleep(outcome.delay_ms / 1000)
        return self._decided(params, outcome)

    def _stubbed(self, params: ExecuteParams, stubs: Stubs) -> ExecuteDecision:
        """Serve a stubbed call from its function (config keeps stubbed tools out of the cassette)."""
        served, error = stubs.call(params.tool, params.path, params.args)
        if served is None:
            assert error is not None
            decision = ExecuteDecision(action="refuse", code=error.code, message=str(error))
        else:
            decision = ExecuteDecision(action="serve", result=msgspec.Raw(served), deferContexts=msgspec.Raw(b"[]"))
        self.trace.write("tools/execute", tool=params.tool, path=params.path, handle=params.handle,
                         callId=params.callId, session=params.sessionId, action=decision.action, source="stub",
                         error=decision.code)
        return decision

    def _written(self, params: ExecuteParams, outcome: Passthrough | Serve | Refuse,
                 failure: SidecarError | None) -> ExecuteDecision:
        """The answer of a recorded call once its lines are durable (or lost)."""
        if failure is not None and self.recording is not None:
            outcome = self.recording.write_failed(params.handle, failure) or outcome
        return self._decided(params, outcome)

    def _decided(self, params: ExecuteParams, outcome: Passthrough | Serve | Refuse | None) -> ExecuteDecision:
        decision = _NEXT
        if isinstance(outcome, Passthrough) and outcome.describe:
            decision = ExecuteDecision(action="next", describe=True)
        elif isinstance(outcome, Refuse):
            decision = ExecuteDecision(action="refuse", code=outcome.error.code, message=str(outcome.error))
        elif isinstance(outcome, Serve):
            if self.divergence is not None:
                self.divergence.served(params.tool, params.path)
            decision = ExecuteDecision(
                action="serve", result=outcome.result, deferContexts=outcome.additionalContexts,
                cancellation=outcome.cancellation,
                host=None if outcome.host is None else restored(outcome.host, self.cwd),
            )
        if self.trace.enabled:
            self.trace.write(
                "tools/execute", tool=params.tool, path=params.path, handle=params.handle, callId=params.callId,
                session=params.sessionId, action=decision.action, **_source(outcome, self.recording is not None),
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
                PostEvent(handle=params.handle, path=params.path or _NO_PATH, tool=params.tool, result=params.result,
                          host=kept(params.host, self.cwd, msgspec.json.encode(params.result)),
                          definition=params.definition)
            )
        except SidecarError as error:
            refused = Refuse(error=error)
        if refused is None:
            if self.recording is not None:
                self.failures.captured(params.handle, params.tool, params.path or _NO_PATH, params.result)
            return _ACCEPT
        return PostExecuteDecision(action="refuse", code=refused.error.code, message=str(refused.error))

    def result(self, params: ResultParams) -> Later | None:
        """See the final outcome; a recorded one is written off the reader."""
        self.trace.write("tools/result", tool=params.tool, path=params.path, handle=params.handle,
                         callId=params.callId, isError=params.result.isError)
        if self.calls is not None:
            value = params.result.value
            self.calls.append(CallPath(params.callId, params.tool, params.path, _NULL if value is UNSET else value))
        if self.mock is not None:
            result = params.result
            message = None if result.error is UNSET else result.error.message
            self.mock.observe(params.sessionId, params.callId, params.tool, result.isError, _code(result), message)
        named = self.router.settled(params.handle, params.result.isError)
        cassette = self._selected(params.tool)
        if cassette is None and self.cassette is not None and params.path is not None:
            # The built-in rule names this call more precisely when it applies.
            return None if named else self._unselected(params)
        if cassette is not None:
            before = self.recording.statistics().recorded if self.recording is not None else 0
            try:
                cassette.on_result(
                    ResultEvent(handle=params.handle, path=params.path or _NO_PATH, tool=params.tool,
                                result=params.result)
                )
            except SidecarError as error:
                self.trace.write("tools/result", handle=params.handle, error=error.code)
            if self.recording is not None:
                self.failures.settled(params.handle, self.recording.statistics().recorded > before)
            ticket = self._queued()
            # No answer waits for a result line; it joins the next batch, written now.
            if ticket is not None and self.writer is not None:
                return Later(self.writer, ticket, _no_answer)
        return None

    def _unselected(self, params: ResultParams) -> Later | None:
        """An unselected call's final outcome: its digest is kept (record) or compared (replay)."""
        assert params.path is not None
        result = params.result
        value = None if result.value is UNSET else bytes(result.value)
        if self.divergence is not None:
            self.divergence.result(params.path, params.tool, result.isError, value, _code(result))
            return None
        if self.recording is None:
            return None
        frame = observe_result(params.path, params.tool, result.isError, value, _code(result),
                               self.recording.config.volatile, self.cwd)
        if frame is not None:
            self.recording.observe(frame)
        return self._written_later()

    def step(self, params: StepParams) -> Later | None:
        """``model/step``: what a model step is shown; its digests are kept (record) or compared (replay)."""
        self.trace.write("model/step", turn=params.turn, step=params.step, tools=len(params.tools))
        if self.divergence is not None:
            self.divergence.step(params.sessionId, params.turn, params.step, params.system, params.tools)
            return None
        if self.recording is None or self.steps is None:
            return None
        frame = self.steps.observe(params.sessionId, params.turn, params.step, params.system, params.tools)
        if frame is not None:
            self.recording.observe(frame)
        return self._written_later()

    def _written_later(self) -> Later | None:
        """Queue what the recording sealed; nobody waits for these lines."""
        ticket = self._queued()
        if ticket is not None and self.writer is not None:
            return Later(self.writer, ticket, _no_answer)
        return None

    def busy(self) -> bool:
        """Whether a selected call of the recording is open or was cut short (see ``TurnLedger``)."""
        return self.recording is not None and self.recording.busy()

    async def _close_recording(self, recording: RecordSession, writer: LineWriter,
                               interruption: str | None) -> CloseReport:
        """Write what is queued, then the tail, then publish: each step after the previous is durable."""
        await writer.drain()
        publish = recording.finish(interruption)
        failure = await writer.written(writer.submit(recording.take_writes()))
        published = False
        if publish and failure is None:
            try:
                await anyio.to_thread.run_sync(recording.recorder.publish)
                published = True
            except SidecarError as error:
                failure = error
        recording.release()
        return recording.report(interruption, failure if publish else None, published)

    async def close(self, interruption: str | None = None) -> tuple[list[SidecarError], list[str]]:
        """Finish the cassette; return the errors that fail the run and a summary line.

        ``interruption`` (from the turn ledger) keeps a recording's partial unpublished.
        """
        stub_errors: list[SidecarError] = [] if self.stubs is None else list(self.stubs.errors)
        stub_notes = [] if self.stubs is None else [self.stubs.note()]
        if self.cassette is None:
            return [*self.router.blocked, *stub_errors], stub_notes
        if stub_errors and interruption is None:
            interruption = "a stub raised"  # the recording saw a broken test double: keep it unpublished
        if self.recording is not None and self.writer is not None:
            report = await self._close_recording(self.recording, self.writer, interruption)
        else:
            report = self.cassette.close(interruption)
        self.closed = report
        stats = report.stats
        note = (
            f"tool cassette {stats.mode}: {stats.selected} selected calls, "
            + (f"{stats.recorded} recorded, published: {'yes' if report.published else 'no'}"
               if stats.mode == "record"
               else f"{stats.consumed} consumed, {stats.unconsumed} unconsumed, "
                    f"poisoned: {'yes' if stats.poisoned else 'no'}")
            + (f", {stats.injected} failed by fault overlay {stats.faults}" if stats.faults is not None else "")
        )
        errors = [*self.router.blocked, *stub_errors, *report.errors]
        if self.stood_up:
            note += f", stood up from the cassette (no plugin registered them): {', '.join(self.stood_up)}"
        if self.recording is not None:
            failed = self.failures.note(stats.recorded, report.published)
            return errors, [f"warning: {d}; fix: {d.hint}" for d in self.router.named] + [
                note, *([] if failed is None else [failed]), *stub_notes]
        diverged = None if self.divergence is None else self.divergence.close()
        if diverged is not None and self.strict_replay:
            errors.append(diverged)
        elif diverged is not None:
            return [*errors, *self.router.named], [note, f"warning: {diverged}; fix: {diverged.hint}", *stub_notes]
        return [*errors, *self.router.named], [note, *stub_notes]


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")


def _no_answer(_failure: SidecarError | None) -> None:
    """A result line's Later: a lost line already failed the recording, nobody waits for it."""
    return None


def _code(result: HostToolResult) -> str | None:
    """``error.info.code`` of a failed host result."""
    if not result.isError or result.error is UNSET or result.error.info is UNSET:
        return None
    return result.error.info.code


def _source(outcome: Passthrough | Serve | Refuse | None, recording: bool) -> dict[str, Any]:
    """Where a call's result came from, for the hook log (a trace shows it per call)."""
    if isinstance(outcome, Serve):
        return {"source": "served", "ordinal": outcome.ordinal, "fault": outcome.fault}
    if isinstance(outcome, Refuse):
        return {"source": "refused", "error": outcome.error.code}
    if isinstance(outcome, Passthrough) and recording:
        return {"source": "recorded", "ordinal": outcome.ordinal}
    return {"source": "live"}
