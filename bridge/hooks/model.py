"""Model cassette hooks: the wire side of the model cassette.

The shim listens on rc.8's ``llm/stream`` waterfall (the public interception point around every
provider ``stream()`` call) and asks ``model/request``: ``pass`` (route not captured),
``forward`` (record: the shim streams ``next()`` and reports ``model/recorded``) or ``replay``
(the shim yields the recorded chunks; ``next()`` is never called, so no provider request).
A refusal is an error answer; the shim turns it into a terminal ``finish`` of kind ``error``.
A recorded call's frame goes to a ``LineWriter``; the ``model/recorded`` answer is a ``Later``
sent once the frame is durable, while the reader serves other requests.
"""

from __future__ import annotations

import time

import anyio
import msgspec

from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.transport.later import Later, durable
from dsh_sidecar.bridge.transport.line_writer import LineWriter
from dsh_sidecar.bridge.transport.protocol import Empty, ModelDecision, ModelRecordedParams, ModelRequestParams
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.model_cassette import CloseReport, Forward, ModelCassetteConfig, ModelCassetteEngine, Pass
from dsh_sidecar.python_core.model_cassette.errors import ModelCallLeftOut, ModelCassetteMismatch
from dsh_sidecar.python_core.model_cassette.initiator import delegation_depth

__all__ = ["ModelHooks"]


class ModelHooks:
    """Route ``llm/stream`` boundary events to the model cassette."""

    def __init__(self, cassette: ModelCassetteEngine, trace: Trace, *, children_owned: bool = False) -> None:
        self.cassette = cassette
        self.children_owned = children_owned
        self.trace = trace
        recorder = cassette.recorder
        self.writer = None if recorder is None else LineWriter(recorder.write_lines, cassette.write_failed)
        self.closed: CloseReport | None = None
        self.refused_at: int | None = None
        """When this cassette first refused a call (monotonic ns): the first refusal leads at shutdown."""

    @classmethod
    def open(cls, config: ModelCassetteConfig, *, cwd: str, host_version: str | None, trace: Trace,
             children_owned: bool = False) -> ModelHooks:
        """Open the cassette of the parsed ``modelCassette`` section.

        ``children_owned``: a subagent cassette records or replays whole child runs, so calls
        made by child agents (delegation depth above 0) pass through untouched.

        Raises:
            SidecarError: the cassette cannot be opened (exists, invalid, unreadable).
        """
        cassette = ModelCassetteEngine.open(config, cwd=cwd, host_version=host_version or "unknown", deferred=True)
        return cls(cassette, trace, children_owned=children_owned)

    def request(self, params: ModelRequestParams) -> ModelDecision:
        """Decide one ``stream()`` call (a refusal notes when this cassette first refused)."""
        try:
            return self._decide(params)
        except ModelCallLeftOut:
            raise  # answered as a failed title, never a failure of the run
        except SidecarError:
            if self.refused_at is None:
                self.refused_at = time.monotonic_ns()
            raise

    def _decide(self, params: ModelRequestParams) -> ModelDecision:
        if self.children_owned and delegation_depth(params.initiator) > 0:
            return ModelDecision(action="pass")
        where = {"session": params.sessionId, "purpose": params.request.get("purpose")}
        try:
            decision = self.cassette.admit(params.request)
        except ModelCallLeftOut as error:
            self.trace.write("model/request", action="left-out", error=error.code, **where)
            raise
        except SidecarError as error:
            # The host prints the refusal as the turn's error and shutdown lists it: no third copy.
            self.trace.write("model/request", action="refuse", error=error.code, **where)
            if self.trace.values and isinstance(error, ModelCassetteMismatch):
                self.trace.write("model/mismatch", lane=error.lane, position=error.position,
                                 differences=error.differences, live=error.view, recorded=error.recorded_view)
            raise
        if isinstance(decision, Pass):
            return ModelDecision(action="pass")
        if isinstance(decision, Forward):
            self.trace.write("model/request", action="forward", handle=decision.handle, **where)
            return ModelDecision(action="forward", handle=decision.handle)
        self.trace.write("model/request", action="replay", handle=decision.handle, **where)
        return ModelDecision(
            action="replay", handle=decision.handle, chunks=decision.chunks,
            atMs=None if decision.at_ms is None else list(decision.at_ms),
        )

    def recorded(self, params: ModelRecordedParams) -> Later | Empty:
        """A forwarded call ended: answered once its frame is fsync-ed."""
        self.cassette.recorded(params.handle, msgspec.Raw(params.chunks), params.atMs, complete=params.complete,
                               aborted=params.aborted)
        self.trace.write("model/recorded", handle=params.handle, complete=params.complete)
        lines = self.cassette.take_writes()
        if not lines or self.writer is None:
            return Empty()
        return Later(self.writer, self.writer.submit(lines), lambda failure: durable(Empty(), failure))

    async def _close_recording(self, writer: LineWriter) -> CloseReport:
        """Write what is queued, then the tail, then publish: each step after the previous is durable."""
        recorder = self.cassette.recorder
        assert recorder is not None
        await writer.drain()
        publish = self.cassette.finish()
        failure = await writer.written(writer.submit(self.cassette.take_writes()))
        published = False
        if publish and failure is None:
            try:
                await anyio.to_thread.run_sync(recorder.publish)
                published = True
            except SidecarError as error:
                failure = error
        recorder.abandon()
        return self.cassette.report(failure if publish else None, published)

    async def close(self) -> tuple[list[SidecarError], list[str]]:
        """Close the cassette; return its errors and a summary line."""
        if self.writer is not None:
            report = self.closed = await self._close_recording(self.writer)
        else:
            report = self.closed = self.cassette.close()
        s = report.stats
        notes = self.cassette.notes()
        if s.mode == "record":
            published = "yes" if report.published else "no"
            note = f"model cassette record: {s.recorded} calls recorded, published: {published}"
        else:
            note = (f"model cassette replay: {s.admitted} calls, {s.consumed} consumed, {s.unconsumed} unconsumed, "
                    f"poisoned: {'yes' if s.poisoned else 'no'}")
        return list(report.errors), [note, *notes]
