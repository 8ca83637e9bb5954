"""Subagent provider hooks: the wire side of the subagent cassette.

The shim registers a provider whose ``start()`` asks ``subagent/start``; the cassette decides
``forward`` (record: the shim calls the upstream provider object's ``start()`` and reports
``subagent/published`` and ``subagent/outcome``) or ``replay`` (the shim returns a run with a
fresh id, ``localAgent: undefined`` and the recorded outcome). A miss is an error answer, so
``start()`` rejects and the delegating tool sees it. Recorded lines go to a ``LineWriter``:
the answers that depend on them (the first ``start``, after its header; every ``outcome``) are
``Later`` answers sent once the lines are durable, while the reader serves other requests.

A recorded child that ended in an error is still recorded and published (a failure can be what
the test replays on purpose), but the run says so once at shutdown: ``SUBAGENT_CHILD_FAILED``.
"""

from __future__ import annotations

import re
import sys
import time

import anyio
import msgspec

from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.later import Later, durable
from dsh_sidecar.bridge.transport.line_writer import LineWriter, Ticket
from dsh_sidecar.bridge.transport.protocol import (
    CallHandle,
    Empty,
    ReplayFacts,
    RunOutcome,
    SubagentDecision,
    SubagentOutcomeParams,
    SubagentPublishedParams,
    SubagentSetup,
    SubagentStartParams,
    UpstreamFacts,
    WireResult,
    WireStartError,
)
from dsh_sidecar.python_core.cassette_io import display_name
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette import CallHandle as Handle
from dsh_sidecar.python_core.subagent_cassette import (
    CassetteConfig,
    CloseReport,
    Forward,
    Miss,
    SettledRun,
    SubagentCassetteEngine,
    Upstream,
)
from dsh_sidecar.python_core.subagent_cassette.engine import Decision
from dsh_sidecar.python_core.subagent_cassette.format import (
    Outcome,
    ResultErrorOutcome,
    ResultOutcome,
    StartErrorOutcome,
)
from dsh_sidecar.python_core.subagent_cassette.host import ABORTED_RESULT, PARENT_EVENT_TYPES, start_request
from dsh_sidecar.python_core.turns import RecordingInterrupted

__all__ = ["SubagentHooks"]

_CODE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class SubagentHooks:
    """Route provider boundary events to the subagent cassette."""

    def __init__(self, cassette: SubagentCassetteEngine, setup: SubagentSetup, trace: Trace) -> None:
        self.cassette = cassette
        self.setup = setup
        self.trace = trace
        file = cassette.writer
        self.writer = None if file is None else LineWriter(file.write_lines, cassette.write_failed)
        self.closed: CloseReport | None = None
        # One description per recorded child that ended in an error, in settle order.
        self.failed_children: list[str] = []

    @classmethod
    def open(cls, config: CassetteConfig, *, host_version: str | None, trace: Trace) -> SubagentHooks:
        """Open the cassette of the parsed ``subagentCassette`` section (``file`` already resolved).

        Raises:
            SidecarError: the cassette cannot be opened (locked, exists, invalid, wrong target).
        """
        cassette = SubagentCassetteEngine.open(config, host_version=host_version or "unknown", clock=time.time,
                                         deferred=True)
        name, upstream = config.provider.names()
        setup = SubagentSetup(name=name, upstream=upstream, parentEvents=list(PARENT_EVENT_TYPES))
        recording = cassette.recording
        if recording is not None:
            # Replay shows the host the provider facts as captured, not the live upstream's.
            provider = recording.header.provider
            setup = msgspec.structs.replace(setup, replayFacts=ReplayFacts(
                capabilities=provider.capabilities, inheritsParentContext=provider.inheritsParentContext))
        return cls(cassette, setup, trace)

    def hello(self, facts: UpstreamFacts) -> Empty:
        """The upstream provider was found; record mirrors and stores its facts."""
        self.cassette.on_upstream(Upstream(
            name=facts.name, capabilities=facts.capabilities,
            inherits_parent_context=facts.inheritsParentContext, continuable=facts.continuable,
        ))
        self.trace.write("subagent/hello", upstream=facts.name)
        return Empty()

    def _queued(self) -> Ticket | None:
        lines = self.cassette.take_writes()
        return self.writer.submit(lines) if lines and self.writer is not None else None

    def start(self, params: SubagentStartParams) -> SubagentDecision | Later:
        """Decide one ``start()``: forward to the upstream, replay, or refuse with a miss."""
        request = start_request(params.request, params.parent, signal_aborted=params.signalAborted)
        decision = self.cassette.on_start(request)
        ticket = self._queued()
        if ticket is not None and self.writer is not None:
            return Later(self.writer, ticket, lambda failure: self._decided(durable(decision, failure)))
        return self._decided(decision)

    def _decided(self, decision: Decision) -> SubagentDecision:
        if isinstance(decision, Miss):
            if decision.diagnostic is not None:
                diag = decision.diagnostic
                sys.stderr.write(
                    f"dsh-sidecar: {decision.error} (differed: {', '.join(diag.differed) or 'none'}; "
                    f"callKey {diag.callKey}, request {diag.requestFingerprint[:19]}…, "
                    f"parent context {diag.parentContextFingerprint[:19]}…)\n"
                )
            self.trace.write("subagent/start", action="miss", error=decision.error.code)
            raise decision.error
        if isinstance(decision, Forward):
            self.trace.write("subagent/start", action="forward", callKey=decision.handle.call_key)
            return SubagentDecision(action="forward", handle=_wire_handle(decision.handle))
        self.trace.write("subagent/start", action="replay", callKey=decision.handle.call_key)
        return SubagentDecision(
            action="replay", handle=_wire_handle(decision.handle), outcome=decision.outcome,
            delayMs=decision.delay_ms, startDelayMs=decision.start_delay_ms, aborted=ABORTED_RESULT,
        )

    def published(self, params: SubagentPublishedParams) -> None:
        """A forwarded run was published (its child id keys grandchildren)."""
        self.cassette.on_published(_handle(params.handle), params.childId)

    def outcome(self, params: SubagentOutcomeParams) -> Later | Empty:
        """A forwarded run settled: answered once its interaction is fsync-ed."""
        self.cassette.on_outcome(_handle(params.handle), _settled(params.outcome))
        self.trace.write("subagent/outcome", callKey=params.handle.callKey)
        failure = _failure(params.outcome)
        if failure is not None:
            self.failed_children.append(f"callKey {params.handle.callKey}, {failure}")
        ticket = self._queued()
        if ticket is None or self.writer is None:
            return Empty()
        return Later(self.writer, ticket, lambda failure: durable(Empty(), failure))

    async def _close_file(self) -> SidecarError | None:
        """Write what is queued (abandoned runs included), then release the file and its lock."""
        failure = None
        if self.writer is not None:
            failure = await self.writer.written(self.writer.submit(self.cassette.take_writes()))
        if self.cassette.writer is not None:
            await anyio.to_thread.run_sync(self.cassette.writer.close)
        return failure

    async def close(self, interruption: str | None = None) -> tuple[list[SidecarError], list[str]]:
        """Close the cassette; return its errors and a summary line.

        A recording whose turn did not really end (``interruption``) fails the run: the
        format has no completeness mark, so the file keeps the settled interactions only.
        """
        if self.writer is not None:
            await self.writer.drain()
        report = self.closed = self.cassette.close()
        s = report.stats
        errors: list[SidecarError] = list(report.errors)
        failure = await self._close_file()
        if failure is not None and failure not in errors:
            errors.append(failure)
        if interruption is not None and s.mode == "record" and s.started:
            errors.append(RecordingInterrupted(
                f"subagent cassette {display_name(self.cassette.config.file)}", interruption,
                f"it holds {s.recorded} interactions, not the whole turn; record again",
            ))
        notes = [
            f"subagent cassette {s.mode}: {s.started} starts, {s.recorded} recorded, {s.replayed} replayed, "
            f"{s.missed} missed, {s.unconsumed} unconsumed"
        ]
        if self.failed_children:
            fate = ("the cassette is not published (see the errors)" if errors else
                    "the cassette is published anyway and replays that failure")
            notes.append(
                f"SUBAGENT_CHILD_FAILED: {len(self.failed_children)} of {s.recorded} recorded child run(s) ended "
                f"in an error (first: {self.failed_children[0]}); {fate}; if the child should succeed, fix it and "
                "re-record (record mode all)"
            )
        return errors, notes


def _failure(outcome: RunOutcome) -> str | None:
    """How a settled child run failed (its kind, stop reason, error code; never a message), or None."""
    wire = outcome.outcome
    if isinstance(wire, WireResult):
        reason = wire.result.get("stopReason")
        return "stopReason error" if reason == "error" else None
    kind = "start-error" if isinstance(wire, WireStartError) else "result-error"
    code = wire.error.code
    # The code is printed only when it looks like one: the error's text never reaches stderr.
    return f"{kind} {code}" if isinstance(code, str) and _CODE.fullmatch(code) else kind


def _handle(wire: CallHandle) -> Handle:
    return Handle(wire.sequence, wire.callKey)


def _wire_handle(handle: Handle) -> CallHandle:
    return CallHandle(sequence=handle.sequence, callKey=handle.call_key)


def _settled(wire: RunOutcome) -> SettledRun:
    """Map ``subagent/outcome`` params to the engine's run facts (the result still unredacted)."""
    outcome: Outcome
    if isinstance(wire.outcome, WireResult):
        outcome = ResultOutcome(result=wire.outcome.result, redactions=0)
    elif isinstance(wire.outcome, WireStartError):
        outcome = StartErrorOutcome(error=wire.outcome.error)
    else:
        outcome = ResultErrorOutcome(error=wire.outcome.error)
    return SettledRun(
        published=wire.published, local=wire.local, timing=wire.timing, outcome=outcome,
        child_id=wire.childId if isinstance(wire.childId, str) else None,
    )
