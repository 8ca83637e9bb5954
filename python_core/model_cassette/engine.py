"""The model cassette state machine: every record and replay transition lives here.

Record: ``admit`` assigns the call its lane and position and answers ``Forward``; the shim
streams the real provider route and hands the finished chunk array to ``recorded``, which
appends one fsync-ed call frame. ``close`` writes the tail and publishes create-only, or keeps
the partial when a call never finished. Replay: ``admit`` finds the recorded call at the same
lane and position, compares fingerprints and answers ``Serve`` (zero provider requests) or
raises a named mismatch; the first refusal poisons the replay, so every later call is refused.
Calls to routes the config does not capture get ``Pass``.

Sans I/O past ``open``: frames are sealed into lines that go to the file at once, or, when
``deferred`` (the bridge), wait in ``take_writes`` for a store layer that writes them off the
reader and reports a failure back (``write_failed``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, Raw

from dsh_sidecar.python_core.canonical import MAX_DEPTH, canonical_bytes, loads_strict, too_deep
from dsh_sidecar.python_core.errors import ProtocolError, SidecarError
from dsh_sidecar.python_core.filters import Filters, rules_digest
from dsh_sidecar.python_core.model_cassette.config import ModelCassetteConfig
from dsh_sidecar.python_core.model_cassette.endpoints import scrub_endpoints
from dsh_sidecar.python_core.model_cassette.errors import (
    ModelCallLeftOut,
    ModelCassetteClosed,
    ModelCassetteMismatch,
    ModelExtraCall,
    ModelRecordingIncomplete,
    ModelReplayPoisoned,
    ModelRulesDiffer,
    ModelUnconsumed,
)
from dsh_sidecar.python_core.model_cassette.format import (
    ABANDONABLE,
    GENESIS,
    PROTOCOL,
    VERSION,
    CallFrame,
    ChunkFacts,
    CompleteFrame,
    HeaderFrame,
    chunk_facts,
)
from dsh_sidecar.python_core.model_cassette.store import Recorder, load
from dsh_sidecar.python_core.model_request import compare, filter_view, lane_of, normalize, parts_of

__all__ = ["CloseReport", "Forward", "ModelCassetteEngine", "ModelStats", "Pass", "Serve"]


class Pass(msgspec.Struct, frozen=True):
    """The route is not captured: the shim calls the provider untouched."""


class Forward(msgspec.Struct, frozen=True):
    """Record: stream the real route, then report the chunks under ``handle``."""

    handle: int


class Serve(msgspec.Struct, frozen=True):
    """Replay: yield ``chunks``; ``at_ms`` (timing ``recorded``) are offsets from the call's start."""

    handle: int
    chunks: Raw
    at_ms: tuple[int, ...] | None


class ModelStats(msgspec.Struct, frozen=True):
    """Counts of one cassette session."""

    mode: Literal["record", "replay"]
    admitted: int
    recorded: int
    consumed: int
    unconsumed: int
    poisoned: bool


class CloseReport(msgspec.Struct, frozen=True):
    """What ``close`` did: counts, the errors that fail the run, whether a recording was published."""

    stats: ModelStats
    errors: tuple[SidecarError, ...]
    published: bool


class _Pending(msgspec.Struct):
    lane: str
    position: int
    view: dict[str, Any]


class ModelCassetteEngine:
    """One run's model cassette, in record or replay mode."""

    def __init__(self, config: ModelCassetteConfig, *, cwd: str, recorder: Recorder | None,
                 calls: tuple[CallFrame, ...], deferred: bool = False, left_out: tuple[str, ...] = ()) -> None:
        self.config = config
        self.cwd = cwd
        self.recorder = recorder
        self._filters = Filters(config.filters)
        self._deferred = deferred
        self._writes: list[bytes] = []
        self._slots = {(c.lane, c.position): c for c in calls}
        self._consumed: set[tuple[str, int]] = set()
        self._next_position: dict[str, int] = {}
        self._pending: dict[int, _Pending] = {}
        self._handles = 0
        self._recorded = 0
        self._incomplete: str | None = None
        self._errors: list[SidecarError] = []
        self._poisoned = False
        self._closed: CloseReport | None = None
        # Calls of ABANDONABLE lanes: replay, those the recording left out; record, those left out now.
        self._left_out = set(left_out)
        self._notes: list[str] = []

    @classmethod
    def open(cls, config: ModelCassetteConfig, *, cwd: str, host_version: str,
             deferred: bool = False) -> ModelCassetteEngine:
        """Create the partial and write the header (record), or load and verify the file (replay).

        ``deferred``: later lines wait in ``take_writes`` instead of being written at once.

        Raises:
            ModelCassetteExists: record mode and the file or its partial exists.
            ModelCassetteInvalid: replay mode and the file fails verification.
            ModelRulesDiffer: replay mode and the filters differ from the recording's.
            ModelCassetteIOError: the file cannot be created or read.
        """
        filters = rules_digest(config.filters) if config.filters else UNSET
        if config.mode == "replay":
            cassette = load(config.file)
            if cassette.header.filters != filters:
                raise ModelRulesDiffer(os.path.basename(config.file))
            return cls(config, cwd=cwd, recorder=None, calls=cassette.calls, left_out=cassette.left_out)
        recorder = Recorder.create(config.file)
        recorder.append(HeaderFrame(seq=0, prev=GENESIS, protocol=PROTOCOL, version=VERSION,
                                    requestView=config.requestView, host=host_version, filters=filters))
        return cls(config, cwd=cwd, recorder=recorder, calls=(), deferred=deferred)

    @property
    def name(self) -> str:
        """The cassette's base name (errors never show the absolute path)."""
        return os.path.basename(self.config.file)

    def admit(self, request: Mapping[str, Any]) -> Pass | Forward | Serve:
        """Decide one ``stream()`` call.

        Raises:
            ModelCassetteMismatch: replay; the request differs from the record at its position.
            ModelExtraCall: replay; nothing was recorded at this position.
            ModelReplayPoisoned: replay; an earlier call was refused.
            ModelCallLeftOut: replay; the recording left this abandonable call out (not a failure).
            ModelCassetteClosed: the cassette was already closed (after ``shutdown``).
            ModelRequestInvalid: a request field has the wrong shape.
            CanonicalJsonError: the request has no canonical JSON form.
        """
        if self._closed is not None:
            raise ModelCassetteClosed("model/request")
        if not self.config.captures(str(request.get("provider", ""))):
            return Pass()
        view = normalize(request, cwd=self.cwd)
        if self._filters:
            # Recorded and matched in this form, as the tool cassette's arguments (docs/test-logic.md).
            view = filter_view(view, self._apply)
        lane = lane_of(view.get("purpose"))
        position = self._next_position.get(lane, 0)
        self._next_position[lane] = position + 1
        self._handles += 1
        handle = self._handles
        if self.recorder is not None:
            self._pending[handle] = _Pending(lane, position, view)
            return Forward(handle)
        return self._serve(handle, lane, position, view)

    def _apply(self, value: Any) -> Any:
        return self._filters.apply(value, tool="", where="args")

    def _serve(self, handle: int, lane: str, position: int, view: dict[str, Any]) -> Serve:
        if self._poisoned:
            raise ModelReplayPoisoned(lane, position)
        recorded = self._slots.get((lane, position))
        if recorded is None and f"{lane}#{position}" in self._left_out:
            # The recorded run never got this answer either; the host treats it as a failed title.
            raise ModelCallLeftOut(lane, position)
        if recorded is None:
            held = sum(1 for slot in self._slots if slot[0] == lane)
            raise self._poison(ModelExtraCall(lane, position, held, self.name))
        parts = parts_of(view)
        fingerprint = parts.fingerprint()
        if fingerprint != recorded.fingerprint:
            differences = compare(recorded.request, parts) or ["request parts differ"]
            kept = None if recorded.view is UNSET else msgspec.json.decode(recorded.view)
            raise self._poison(ModelCassetteMismatch(lane, position, differences, fingerprint, recorded.fingerprint,
                                                     self.name, view=view, recorded_view=kept))
        self._consumed.add((lane, position))
        # Both timings serve the recorded bytes: a failure is the recorded one, so the host's
        # retry policy waits what it decides (docs/model-cassette-format.md, "Replay").
        return Serve(handle, recorded.chunks, recorded.atMs if self.config.timing == "recorded" else None)

    def _poison(self, error: SidecarError) -> SidecarError:
        self._poisoned = True
        self._errors.append(error)
        return error

    def recorded(self, handle: int, chunks: Raw, at_ms: list[float], *, complete: bool,
                 aborted: bool = False) -> None:
        """Record mode: the forwarded call ``handle`` ended; append it if it finished.

        ``aborted``: the host's signal was aborted when it ended. A call of a lane the host
        abandons at exit (the session title) that ends so, or with an ``aborted`` finish, was not
        answered: it is left out as if it had not settled (whether its abort reaches the stream
        before the process exits is a race).

        ``chunks`` are kept as the host serialized them (key order included), minus endpoints in
        failure texts (``endpoints.py``).

        A call whose chunks are refused, or whose frame would nest deeper than verify accepts,
        keeps the recording from completing (``MODEL_RECORDING_INCOMPLETE`` at close).

        Raises:
            ModelCassetteIOError: the frame could not be written (the recording stays partial).
            ModelCassetteClosed: the cassette was already closed (after ``shutdown``).
            ProtocolError: ``handle`` is not an open forwarded call, or ``chunks`` is not a chunk
                array of one offset per chunk that fits a frame.
            CanonicalJsonError: ``chunks`` is not strict JSON.
        """
        if self._closed is not None:
            raise ModelCassetteClosed("model/recorded")
        pending = self._pending.pop(handle, None)
        if pending is None or self.recorder is None:
            raise ProtocolError(f"model/recorded for handle {handle}, which is not an open recorded call")
        where = f"model call {pending.lane}#{pending.position}"
        if not complete:
            self._unsettled(pending, f"{where} did not finish")
            return
        try:
            kept, facts = _checked_chunks(chunks, at_ms)
        except SidecarError as error:
            # The call took its lane position: a recording published without it would have a
            # gap that verify refuses (a file that cannot replay), so it cannot complete.
            self._incomplete = self._incomplete or f"{where}: its chunks were refused ({error.code})"
            raise
        if facts.finish == "none":
            self._unsettled(pending, f"{where} ended without a finish chunk")
            return
        if pending.lane in ABANDONABLE and (aborted or facts.finish == "aborted"):
            self._unsettled(pending, f"{where} was aborted")
            return
        parts = parts_of(pending.view)
        view = Raw(canonical_bytes(pending.view)) if self.config.requestView == "full" else UNSET
        if view is not UNSET and not _fits_a_frame(bytes(view)):
            self._incomplete = self._incomplete or f"{where}: its request view {_TOO_DEEP_FOR_A_FRAME}"
            return
        frame = CallFrame(
            seq=0, prev="", ordinal=self._recorded, lane=pending.lane, position=pending.position,
            fingerprint=parts.fingerprint(), request=parts, view=view,
            chunks=kept, atMs=tuple(max(0, round(ms)) for ms in _monotone(at_ms)),
            finish=facts.finish, toolCalls=facts.tool_calls,
        )
        if self._deferred:
            self._writes.append(self.recorder.chain.link(frame)[1])
        else:
            try:
                self.recorder.append(frame)
            except SidecarError as error:
                self.write_failed(error)
                raise
        self._recorded += 1

    def _unsettled(self, pending: _Pending, reason: str) -> None:
        """A call ended without an answer: left out if the host abandons such calls, else fatal."""
        if pending.lane in ABANDONABLE:
            self._left_out.add(f"{pending.lane}#{pending.position}")
        else:
            self._incomplete = self._incomplete or reason

    def notes(self) -> list[str]:
        """One line per call left out or not asked for again (the session title), for stderr."""
        return list(self._notes)

    def take_writes(self) -> list[bytes]:
        """Return the sealed lines not yet handed out, in order; the caller must write them."""
        writes, self._writes = self._writes, []
        return writes

    def write_failed(self, error: SidecarError) -> None:
        """A line could not be written: the recording stays partial and ``close`` reports why."""
        if self._incomplete is None:
            self._incomplete = "a call frame could not be written"
            self._errors.append(error)

    def statistics(self) -> ModelStats:
        """Counts so far."""
        replay = self.recorder is None
        return ModelStats(
            mode="replay" if replay else "record", admitted=self._handles, recorded=self._recorded,
            consumed=len(self._consumed), unconsumed=len(self._slots) - len(self._consumed) if replay else 0,
            poisoned=self._poisoned,
        )

    def finish(self) -> bool:
        """Record: decide the end; true: write ``take_writes()`` (the tail), then publish."""
        assert self.recorder is not None
        for pending in sorted(self._pending.values(), key=lambda p: (p.lane, p.position)):
            self._unsettled(pending, f"model call {pending.lane}#{pending.position} was still streaming at shutdown")
        self._pending.clear()
        if self._incomplete is not None:
            return False
        left = tuple(sorted(self._left_out))
        self._notes += [f"model cassette: {name} had not settled at exit (the host does not wait for it); "
                        "left out of the recording" for name in left]
        tail = CompleteFrame(seq=0, prev="", calls=self._recorded, leftOut=left)
        self._writes.append(self.recorder.chain.link(tail)[1])
        return True

    def report(self, failure: SidecarError | None = None, published: bool = False) -> CloseReport:
        """Close the session after ``finish`` (and publishing, if it said so); idempotent."""
        if self._closed is not None:
            return self._closed
        errors = list(self._errors)
        if self.recorder is not None:
            if self._incomplete is not None and not errors:
                errors.append(ModelRecordingIncomplete(self.name, self._incomplete))
            if failure is not None:
                errors.append(failure)
        else:
            left = sorted(slot for slot in self._slots if slot not in self._consumed)
            # The host may exit before asking for the title again: not asking is no failure. A
            # title it did ask for and was refused (a poisoned replay) was asked for: no note.
            unasked = [slot for slot in left
                       if slot[0] in ABANDONABLE and slot[1] >= self._next_position.get(slot[0], 0)]
            self._notes += [f"model cassette: {lane}#{position} was not asked for (the host abandons it at exit)"
                            for lane, position in unasked]
            left = [slot for slot in left if slot[0] not in ABANDONABLE]
            if left and not self._poisoned:
                errors.append(ModelUnconsumed(len(left), *left[0], self.name))
        self._closed = CloseReport(self.statistics(), tuple(errors), published)
        return self._closed

    def close(self) -> CloseReport:
        """Finish the session: publish a complete recording or report what stays unfinished (idempotent)."""
        if self._closed is not None or self.recorder is None:
            return self.report()
        failure: SidecarError | None = None
        published = False
        if self.finish():
            try:
                self.recorder.write_lines(self.take_writes())
                self.recorder.publish()
                published = True
            except SidecarError as error:
                failure = error
        self.recorder.abandon()
        return self.report(failure, published)


_TOO_DEEP_FOR_A_FRAME = f"nests deeper than {MAX_DEPTH - 1} levels (its frame line would exceed {MAX_DEPTH})"


def _fits_a_frame(value: bytes) -> bool:
    """Whether JSON ``value`` stays within the line depth verify accepts once a frame member."""
    # The frame object adds one level: a value at the decoder's own limit makes a line verify refuses.
    return not too_deep(b"[" + value + b"]")


def _checked_chunks(chunks: Raw, at_ms: list[float]) -> tuple[Raw, ChunkFacts]:
    """The chunks of one ``model/recorded`` as they will be kept, with their summary.

    Raises:
        CanonicalJsonError: ``chunks`` is not strict JSON.
        ProtocolError: not a chunk array, nested too deep for a frame, or not one offset per chunk.
    """
    loads_strict(bytes(chunks))
    if not _fits_a_frame(bytes(chunks)):
        raise ProtocolError(f"model/recorded: chunks {_TOO_DEEP_FOR_A_FRAME}")
    kept = Raw(scrub_endpoints(bytes(chunks)))
    try:
        facts = chunk_facts(kept)
    except msgspec.ValidationError:
        raise ProtocolError("model/recorded: chunks is not an array of chunk objects with a type") from None
    if facts.count != len(at_ms):
        raise ProtocolError(f"model/recorded: {len(at_ms)} atMs for {facts.count} chunks")
    return kept, facts


def _monotone(values: list[float]) -> list[float]:
    """Offsets as recorded, made non-decreasing (timers of one call never run backwards)."""
    out: list[float] = []
    for value in values:
        out.append(max(value, out[-1]) if out else max(0.0, value))
    return out
