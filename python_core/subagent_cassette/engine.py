"""Record and replay state machines of the subagent cassette (every transition is here).

Rule: the bridge feeds events (``on_upstream``, ``on_start``, ``on_published``, ``on_outcome``,
``close``) and acts on the returned decisions; this module never sleeps, spawns or reads the
clock itself (``clock`` and ``make_id`` are injected) and never writes the file: a sealed line
goes to the writer at once, or, ``deferred`` (the bridge), waits in ``take_writes`` for a store
layer that writes it off the reader and reports a failure back (``write_failed``). An event
that is illegal in the current state raises ``CassetteStateError`` and changes nothing. In
replay the first miss poisons the cassette: every later start is refused with
``REPLAY_POISONED`` and ``close`` reports the miss.

    TRANSITIONS = {NEEDS_UPSTREAM: {upstream: READY, close: CLOSED},
                   READY: {upstream: READY, start: READY, published: READY, outcome: READY,
                           miss: POISONED, close: CLOSED},
                   POISONED: {upstream: POISONED, start: POISONED, close: CLOSED}}
"""

from __future__ import annotations

import datetime as _dt
import math
import uuid
from collections import deque
from collections.abc import Callable
from enum import Enum
from typing import Final

import msgspec

from dsh_sidecar.python_core.errors import CanonicalJsonError, ConfigError, SidecarError
from dsh_sidecar.python_core.subagent_cassette.config import CassetteConfig
from dsh_sidecar.python_core.subagent_cassette.errors import (
    AmbiguousCassette,
    AppendIncompatible,
    CassetteMiss,
    CassetteStateError,
    NothingRecorded,
    RedactedReplayRefused,
    ReplayPoisoned,
    TargetMismatch,
    UnconsumedInteractions,
    UnsettledCalls,
)
from dsh_sidecar.python_core.subagent_cassette.format import (
    SUPPORTED_TARGETS,
    VERSION,
    Capabilities,
    Cassette,
    FullRequest,
    FullView,
    Header,
    Interaction,
    MetadataView,
    Outcome,
    ProviderFacts,
    RecordedError,
    RequestMetadata,
    RequestView,
    ResultErrorOutcome,
    ResultOutcome,
    StartErrorOutcome,
    Timing,
    ambiguous_groups,
    group_key,
    seal_header,
    seal_interaction,
    to_json,
)
from dsh_sidecar.python_core.subagent_cassette.identity import (
    StartRequest,
    call_key,
    parent_context_fingerprint,
    parent_key,
    request_fingerprint,
    request_metadata,
)
from dsh_sidecar.python_core.subagent_cassette.redact import Redactor, build_redactor
from dsh_sidecar.python_core.subagent_cassette.store import CassetteWriter, display_name, load

__all__ = [
    "CallHandle",
    "CassetteStats",
    "CloseReport",
    "Decision",
    "Forward",
    "Miss",
    "MissDiagnostic",
    "Replay",
    "SettledRun",
    "SubagentCassetteEngine",
    "Upstream",
]

ABANDONED: Final = RecordedError(
    name="CassetteAbandoned", message="run did not settle before the cassette closed"
)


class State(Enum):
    """Engine states (see the module docstring for the table)."""

    # Members are singletons compared by identity; hash them so too (Enum.__hash__ is Python
    # code, and the transition tables look a member up several times per call).
    __hash__ = object.__hash__

    NEEDS_UPSTREAM = "waiting for the upstream provider facts"
    READY = "ready"
    POISONED = "poisoned by an earlier miss"
    CLOSED = "closed"


TRANSITIONS: Final[dict[State, dict[str, State]]] = {
    State.NEEDS_UPSTREAM: {"upstream": State.READY, "close": State.CLOSED},
    State.READY: {
        "upstream": State.READY,
        "start": State.READY,
        "published": State.READY,
        "outcome": State.READY,
        "miss": State.POISONED,
        "close": State.CLOSED,
    },
    State.POISONED: {"upstream": State.POISONED, "start": State.POISONED, "close": State.CLOSED},
    State.CLOSED: {},
}


class Upstream(msgspec.Struct, frozen=True, kw_only=True):
    """The upstream ``SubagentProvider`` as the host found it."""

    name: str
    capabilities: Capabilities
    inherits_parent_context: bool
    continuable: bool


class SettledRun(msgspec.Struct, frozen=True, kw_only=True):
    """Terminal facts of a forwarded run; ``outcome`` is unredacted (``redactions`` is ignored)."""

    published: bool
    local: bool
    timing: Timing
    outcome: Outcome
    child_id: str | None = None


class CallHandle(msgspec.Struct, frozen=True):
    """Identifies one admitted start until its outcome."""

    sequence: int
    call_key: str


class Forward(msgspec.Struct, frozen=True):
    """Record: call the upstream provider's ``start()`` and report ``on_outcome``."""

    handle: CallHandle


class Replay(msgspec.Struct, frozen=True, kw_only=True):
    """Replay hit: settle ``start()`` after ``start_delay_ms`` and the result after ``delay_ms``.

    Both delays are measured from admission; ``outcome`` is the recorded outcome
    (``start-error`` rejects ``start()``, ``result-error`` rejects ``run.result``).
    """

    handle: CallHandle
    outcome: Outcome
    delay_ms: float = 0.0
    start_delay_ms: float = 0.0


class MissDiagnostic(msgspec.Struct, frozen=True, kw_only=True):
    """Metadata-only explanation of a replay miss."""

    callKey: str
    parentKey: str
    parentContextFingerprint: str
    requestFingerprint: str
    occurrence: int
    differed: tuple[str, ...]
    recordedUnderParent: int


class Miss(msgspec.Struct, frozen=True, kw_only=True):
    """Replay refused the start; the bridge rejects ``start()`` with ``error``."""

    error: SidecarError
    diagnostic: MissDiagnostic | None = None


Decision = Forward | Replay | Miss


class CassetteStats(msgspec.Struct, frozen=True, kw_only=True):
    """Counts for the close report (``--json`` friendly)."""

    mode: str
    started: int
    recorded: int
    replayed: int
    missed: int
    unconsumed: int
    nested_unreachable: int
    abandoned: int


class CloseReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``close`` found: structural errors to print and the counts."""

    errors: tuple[SidecarError, ...]
    stats: CassetteStats


class _Pending(msgspec.Struct, kw_only=True):
    """A forwarded start waiting for its outcome."""

    handle: CallHandle
    parent_key: str
    parent_fp: str
    request_fp: str
    occurrence: int
    request: RequestView
    admitted_at: float
    published: bool = False


def _iso(seconds: float) -> str:
    """Format a POSIX timestamp as ``YYYY-MM-DDTHH:MM:SS.mmmZ``."""
    moment = _dt.datetime.fromtimestamp(seconds, _dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(value: float) -> float:
    """Round milliseconds to microseconds (the stored precision); ``0.0`` stays unsigned."""
    return round(value, 3) + 0.0


def _rounded(timing: Timing) -> Timing:
    """Return ``timing`` with every offset at the format's microsecond precision.

    Rounding is monotonic, so ``durationMs >= startLatencyMs`` still holds.
    """
    optional = {
        name: _ms(value)
        for name in ("signalAbortedAtMs", "disposeCalledAtMs")
        if isinstance(value := getattr(timing, name), float | int)
    }
    return msgspec.structs.replace(
        timing, startLatencyMs=_ms(timing.startLatencyMs), durationMs=_ms(timing.durationMs),
        **optional,
    )


def _unserializable(exc: CanonicalJsonError) -> ResultErrorOutcome:
    """The result-error recorded for a settled result that has no canonical JSON form."""
    where = exc.location.removeprefix("/outcome/result") or "/"
    return ResultErrorOutcome(error=RecordedError(
        name="CassetteSerializationError",
        message=f"the result has no canonical JSON form: {exc.reason} at {where}",
    ))


def _new_id() -> str:
    return str(uuid.uuid4())


class SubagentCassetteEngine:
    """One cassette for one wrapped upstream provider, in record or replay mode."""

    def __init__(
        self,
        config: CassetteConfig,
        *,
        host_version: str,
        clock: Callable[[], float],
        make_id: Callable[[], str],
        redactor: Redactor,
        writer: CassetteWriter | None,
        cassette: Cassette | None,
        deferred: bool = False,
    ) -> None:
        """Use ``SubagentCassetteEngine.open``; this only wires the parts together."""
        self.config = config
        self.host_version = host_version
        self._clock = clock
        self._make_id = make_id
        self._redactor = redactor
        self.writer = writer
        self._deferred = deferred
        self._writes: list[bytes] = []
        self._file_started = False
        self._write_error: SidecarError | None = None
        self._cassette = cassette
        self._state = State.READY if config.mode == "replay" else State.NEEDS_UPSTREAM
        self._header: Header | None = cassette.header if cassette is not None else None
        self._provider: ProviderFacts | None = None
        self._last_hash = cassette.last_hash if cassette is not None else ""
        self._sequence = cassette.count if cassette is not None else 0
        self._occurrences: dict[tuple[str, str, str], int] = {}
        self._child_keys: dict[str, str] = {}
        # callKeys used in the file (record: appended ones too), so each new one is unique.
        self._call_keys: set[str] = set()
        self._pending: dict[CallHandle, _Pending] = {}
        self._queues: dict[tuple[str, str, str], deque[Interaction]] = {}
        self._first_miss: SidecarError | None = None
        self._started = 0
        self._recorded = 0
        self._replayed = 0
        self._missed = 0
        self._abandoned = 0
        self._admissions = 0
        if config.mode == "record" and cassette is not None:
            self._seed_occurrences(cassette)
        if config.mode == "replay" and cassette is not None:
            for record in sorted(cassette.interactions, key=lambda r: r.occurrence):
                key = group_key(
                    record.parentKey, record.parentContextFingerprint, record.requestFingerprint
                )
                self._queues.setdefault(key, deque()).append(record)

    def _seed_occurrences(self, cassette: Cassette) -> None:
        """Continue occurrence numbering (and call-key uniqueness) of an appended document."""
        for record in cassette.interactions:
            self._call_keys.add(record.callKey)
            key = group_key(
                record.parentKey, record.parentContextFingerprint, record.requestFingerprint
            )
            self._occurrences[key] = max(self._occurrences.get(key, 0), record.occurrence)

    @classmethod
    def open(
        cls,
        config: CassetteConfig,
        *,
        host_version: str,
        clock: Callable[[], float],
        make_id: Callable[[], str] = _new_id,
        deferred: bool = False,
    ) -> SubagentCassetteEngine:
        """Open a cassette for ``config.mode`` against the host's exact dsh-subagent version.

        Record takes the writer lock and inspects the target now (no file is written before
        the first start); replay loads, verifies and indexes the whole document. ``deferred``:
        lines wait in ``take_writes`` and the caller closes ``writer`` once they are written.

        Raises:
            TargetMismatch: ``host_version`` is not a supported target, or the file targets
                another version.
            ConfigError: the redaction patterns are invalid.
            CassetteLocked, CassetteExists, CassetteNotFound, CassetteFormatError: see store.
            AmbiguousCassette: replay with ``duplicatePolicy: reject`` and an ambiguous group.
        """
        if host_version not in SUPPORTED_TARGETS:
            raise TargetMismatch(
                "host", host_version, " or ".join(sorted(SUPPORTED_TARGETS))
            )
        redactor = build_redactor(config.redactSecrets, config.redactionPatterns)
        writer: CassetteWriter | None = None
        if config.mode == "replay":
            loaded = load(config.file, expected_target=host_version)
            cassette: Cassette | None = loaded
            if config.duplicatePolicy == "reject":
                for (parent, _, request_fp), count in ambiguous_groups(loaded.interactions).items():
                    raise AmbiguousCassette(parent, request_fp, count)
        else:
            writer = CassetteWriter.open(
                config.file, config.writeMode, owner=make_id(), expected_target=host_version
            )
            try:
                cassette = writer.existing
                if cassette is not None:
                    _check_append(writer.name, cassette.header, config)
            except BaseException:
                writer.close()
                raise
        return cls(
            config,
            host_version=host_version,
            clock=clock,
            make_id=make_id,
            redactor=redactor,
            writer=writer,
            cassette=cassette,
            deferred=deferred,
        )

    @property
    def recording(self) -> Cassette | None:
        """The document replay serves (its header's provider facts are shown to the host)."""
        return self._cassette if self.config.mode == "replay" else None

    def take_writes(self) -> list[bytes]:
        """Return the sealed lines not yet handed out, in order; the caller must write them."""
        writes, self._writes = self._writes, []
        return writes

    def write_failed(self, error: SidecarError) -> None:
        """A queued line could not be written: ``close`` reports the first such failure."""
        if self._write_error is None:
            self._write_error = error

    def _emit(self, line: bytes) -> None:
        """Write ``line`` now (raising the writer's error), or queue it when deferred."""
        if self._deferred:
            self._writes.append(line)
        else:
            assert self.writer is not None
            self.writer.write_lines([line])

    # -- transitions ---------------------------------------------------------------------

    def _expect(self, event: str) -> State:
        """Return the next state for ``event`` or raise without changing anything."""
        following = TRANSITIONS[self._state].get(event)
        if following is None:
            raise CassetteStateError(event, self._state.value)
        return following

    def on_upstream(self, facts: Upstream) -> None:
        """Record the upstream provider facts (record needs them before the first start).

        Raises:
            ConfigError: the upstream name differs from the configured one.
            AppendIncompatible: appending to a header with other provider facts.
            CassetteStateError: the cassette is closed.
        """
        following = self._expect("upstream")
        cassette_name, upstream_name = self.config.provider.names()
        if facts.name != upstream_name:
            raise ConfigError("provider.upstream", "differs from the host's upstream provider")
        provider = ProviderFacts(
            cassette=cassette_name,
            upstream=facts.name,
            capabilities=facts.capabilities,
            inheritsParentContext=facts.inherits_parent_context,
            continuable=facts.continuable,
        )
        if self.config.mode == "record":
            if self._header is not None and self._header.provider != provider:
                raise AppendIncompatible(display_name(self.config.file), "provider")
            self._provider = provider
        self._state = following

    def _identity(self, request: StartRequest) -> tuple[str, str, str, int, str]:
        """Return parentKey, parent fp, request fp, occurrence and callKey (no state change)."""
        parent = parent_key(request, self._child_keys)
        parent_fp = parent_context_fingerprint(request)
        request_fp = request_fingerprint(request)
        occurrence = self._occurrences.get(group_key(parent, parent_fp, request_fp), 0) + 1
        label = request.request.label if isinstance(request.request.label, str) else None
        key = call_key(parent, label, request_fp, occurrence)
        if key in self._call_keys:
            key = call_key(parent, label, request_fp, occurrence, parent_fp=parent_fp)
        return parent, parent_fp, request_fp, occurrence, key

    def on_start(self, request: StartRequest) -> Decision:
        """Admit one ``provider.start()``.

        Returns:
            ``Forward`` (record), ``Replay`` (replay hit, consumed) or ``Miss`` (replay).

        Raises:
            InvalidStartRequest: the request has no canonical identity (nothing admitted).
            CassetteStateError: record before ``on_upstream``, or after ``close``.
        """
        following = self._expect("start")
        if self._state is State.POISONED:
            assert self._first_miss is not None
            self._missed += 1
            return Miss(error=ReplayPoisoned(self._first_miss.code))
        parent, parent_fp, request_fp, occurrence, key = self._identity(request)
        group = group_key(parent, parent_fp, request_fp)
        if self.config.mode == "replay":
            self._occurrences[group] = occurrence
            self._call_keys.add(key)
            self._started += 1
            self._admissions += 1
            return self._replay(CallHandle(self._admissions, key), group, occurrence)
        view = self._request_view(request.request)
        self._start_file()
        self._occurrences[group] = occurrence
        self._call_keys.add(key)
        self._started += 1
        self._sequence += 1
        handle = CallHandle(self._sequence, key)
        self._pending[handle] = _Pending(
            handle=handle,
            parent_key=parent,
            parent_fp=parent_fp,
            request_fp=request_fp,
            occurrence=occurrence,
            request=view,
            admitted_at=self._clock(),
        )
        self._state = following
        return Forward(handle)

    def _request_view(self, request: FullRequest) -> RequestView:
        """Build the persisted (redacted) request view of the configured storage."""
        if self.config.requestView == "full":
            value, redactions = self._redactor.value(to_json(request))
            return FullView(value=msgspec.convert(value, FullRequest), redactions=redactions)
        metadata, _ = self._redactor.value(to_json(request_metadata(request)))
        return MetadataView(metadata=msgspec.convert(metadata, RequestMetadata))

    def _start_file(self) -> None:
        """Emit the header on the first start (an appended document continues its own)."""
        assert self.writer is not None and self._provider is not None
        if self._file_started or self.writer.existing is not None:
            return
        header, line = seal_header(
            cassette_id=self._make_id(),
            created_at=_iso(self._clock()),
            target=self.host_version,
            provider=self._provider,
            request_storage=self.config.requestView,
            redact_secrets=self.config.redactSecrets,
            redaction_patterns=list(self.config.redactionPatterns),
        )
        self._emit(line)
        self._file_started = True
        self._header = header
        self._last_hash = header.hash

    def _replay(
        self, handle: CallHandle, group: tuple[str, str, str], occurrence: int
    ) -> Decision:
        queue = self._queues.get(group)
        if not queue:
            diagnostic = self._diagnose(handle.call_key, *group, occurrence)
            return self._poison(CassetteMiss(handle.call_key, diagnostic.differed), diagnostic)
        record = queue[0]
        outcome = record.outcome
        if (
            isinstance(outcome, ResultOutcome)
            and outcome.redactions > 0
            and not self.config.allowRedactedReplay
        ):
            return self._poison(RedactedReplayRefused(record.callKey, outcome.redactions), None)
        # Checked before the record is consumed: a refused delay leaves the cassette as it was.
        start_delay, delay = self._delays(record.timing)
        queue.popleft()
        self._replayed += 1
        return Replay(handle=handle, outcome=outcome, delay_ms=delay, start_delay_ms=start_delay)

    def _poison(self, error: SidecarError, diagnostic: MissDiagnostic | None) -> Miss:
        self._first_miss = error
        self._missed += 1
        self._state = self._expect("miss")
        return Miss(error=error, diagnostic=diagnostic)

    def _delays(self, timing: Timing) -> tuple[float, float]:
        """Scale recorded timing by ``speed`` (``instant`` replays at once).

        Raises:
            ConfigError: a scaled delay is not a finite non-negative number.
        """
        if self.config.timing == "instant":
            return 0.0, 0.0
        start = timing.startLatencyMs / self.config.speed
        total = timing.durationMs / self.config.speed
        if not (math.isfinite(start) and math.isfinite(total)) or start < 0 or total < start:
            raise ConfigError("speed", "scaled replay delay is not representable")
        return start, total

    def _diagnose(
        self, key: str, parent: str, parent_fp: str, request_fp: str, occurrence: int
    ) -> MissDiagnostic:
        """Explain a miss from the recorded identities only (no bodies)."""
        assert self._cassette is not None
        records = self._cassette.interactions
        under_parent = [r for r in records if r.parentKey == parent]
        if any(
            r.parentContextFingerprint == parent_fp and r.requestFingerprint == request_fp
            for r in under_parent
        ):
            differed: tuple[str, ...] = ("occurrence",)
        elif under_parent:
            same_request = any(r.requestFingerprint == request_fp for r in under_parent)
            same_context = any(r.parentContextFingerprint == parent_fp for r in under_parent)
            if same_request:
                differed = ("parent context",)
            elif same_context:
                differed = ("request",)
            else:
                differed = ("parent context", "request")
        elif any(
            r.parentContextFingerprint == parent_fp and r.requestFingerprint == request_fp
            for r in records
        ):
            differed = ("parent key",)
        else:
            differed = ("parent key", "parent context", "request")
        return MissDiagnostic(
            callKey=key,
            parentKey=parent,
            parentContextFingerprint=parent_fp,
            requestFingerprint=request_fp,
            occurrence=occurrence,
            differed=differed,
            recordedUnderParent=len(under_parent),
        )

    def on_published(self, handle: CallHandle, child_id: str) -> None:
        """Note that a forwarded run was published as ``child_id`` (for grandchildren's keys).

        Raises:
            CassetteStateError: not recording, or ``handle`` is not in flight.
        """
        following = self._expect("published")
        pending = self._pending.get(handle)
        if self.config.mode != "record" or pending is None:
            raise CassetteStateError("published", "no such run is in flight")
        pending.published = True
        self._child_keys[child_id] = handle.call_key
        self._state = following

    def on_outcome(self, handle: CallHandle, outcome: SettledRun) -> None:
        """Emit the terminal interaction of a forwarded run (redacted; fsync-ed when written).

        Raises:
            CassetteStateError: not recording, or ``handle`` is not in flight.
            CassetteFormatError: the outcome breaks the format (the run stays in flight and
                is written as abandoned at close). A result with no canonical JSON form is
                not an error: it is recorded as a ``result-error`` (a serialization failure).
            ConfigError: a redaction pattern would alter a structural field.
        """
        following = self._expect("outcome")
        pending = self._pending.get(handle)
        if self.config.mode != "record" or pending is None:
            raise CassetteStateError("outcome", "no such run is in flight")
        persisted = self._persisted_outcome(outcome.outcome)
        timing = _rounded(outcome.timing)
        try:
            self._write(pending, persisted, timing, outcome.published, outcome.local)
        except CanonicalJsonError as exc:
            # Only the result can lack a canonical form (the request was fingerprinted at
            # admission): the format records that serialization failure as a result-error.
            if not isinstance(persisted, ResultOutcome):
                raise
            self._write(pending, _unserializable(exc), timing, outcome.published, outcome.local)
        if outcome.child_id is not None:
            self._child_keys[outcome.child_id] = handle.call_key
        del self._pending[handle]
        self._recorded += 1
        self._state = following

    def _persisted_outcome(self, settled: Outcome) -> Outcome:
        """Redact an outcome for persistence, counting substitutions in the result."""
        if isinstance(settled, ResultOutcome):
            result, redactions = self._redactor.value(settled.result)
            return ResultOutcome(result=result, redactions=redactions)
        message, _ = self._redactor.text(settled.error.message)
        error = msgspec.structs.replace(settled.error, message=message)
        if isinstance(settled, StartErrorOutcome):
            return StartErrorOutcome(error=error)
        return ResultErrorOutcome(error=error)

    def _write(
        self, pending: _Pending, outcome: Outcome, timing: Timing, published: bool, local: bool
    ) -> None:
        assert self._header is not None
        record = Interaction(
            sequence=pending.handle.sequence,
            callKey=pending.handle.call_key,
            parentKey=pending.parent_key,
            parentContextFingerprint=pending.parent_fp,
            occurrence=pending.occurrence,
            requestFingerprint=pending.request_fp,
            request=pending.request,
            timing=timing,
            published=published,
            local=local,
            outcome=outcome,
            previousHash=self._last_hash,
            hash="",
        )
        sealed, line = seal_interaction(self._header, record)
        self._emit(line)
        self._last_hash = sealed.hash

    def close(self) -> CloseReport:
        """Finish: write abandoned runs, release the lock, and report structural errors.

        Record: no start at all is ``NOTHING_RECORDED`` (no file written); runs still in
        flight are written as abandoned and reported as ``UNSETTLED_CALLS``. Replay: an
        earlier miss is reported; with ``assertConsumed`` every reachable unreplayed
        interaction is ``CASSETTE_UNCONSUMED`` (interactions nested under a recorded run can
        never be reached by a replay and are only counted).

        Raises:
            CassetteStateError: already closed.
        """
        following = self._expect("close")
        errors: list[SidecarError] = [] if self._write_error is None else [self._write_error]
        unconsumed = nested = 0
        try:
            if self.config.mode == "record":
                errors.extend(self._close_record())
            else:
                if self._first_miss is not None:
                    errors.append(self._first_miss)
                unconsumed, nested, error = self._unconsumed()
                if error is not None:
                    errors.append(error)
        finally:
            if self.writer is not None and not self._deferred:
                self.writer.close()
            self._state = following
        return CloseReport(
            errors=tuple(errors),
            stats=CassetteStats(
                mode=self.config.mode,
                started=self._started,
                recorded=self._recorded,
                replayed=self._replayed,
                missed=self._missed,
                unconsumed=unconsumed,
                nested_unreachable=nested,
                abandoned=self._abandoned,
            ),
        )

    def _close_record(self) -> list[SidecarError]:
        if self._started == 0:
            return [NothingRecorded(display_name(self.config.file))]
        now = self._clock()
        for pending in sorted(self._pending.values(), key=lambda p: p.handle.sequence):
            elapsed = max(0.0, (now - pending.admitted_at) * 1000.0)
            outcome: Outcome = (
                ResultErrorOutcome(error=ABANDONED)
                if pending.published
                else StartErrorOutcome(error=ABANDONED)
            )
            timing = Timing(
                startedAt=_iso(pending.admitted_at), startLatencyMs=_ms(elapsed), durationMs=_ms(elapsed)
            )
            self._write(pending, outcome, timing, pending.published, False)
            self._abandoned += 1
        self._pending.clear()
        return [UnsettledCalls(self._abandoned)] if self._abandoned else []

    def _unconsumed(self) -> tuple[int, int, SidecarError | None]:
        recorded_keys = {
            r.callKey for r in (self._cassette.interactions if self._cassette else ())
        }
        left = [record for queue in self._queues.values() for record in queue]
        nested = [r for r in left if r.parentKey in recorded_keys]
        reachable = sorted((r for r in left if r.parentKey not in recorded_keys),
                           key=lambda r: r.sequence)
        error = None
        if reachable and self.config.assertConsumed:
            error = UnconsumedInteractions(len(reachable), tuple(r.callKey for r in reachable))
        return len(reachable), len(nested), error


def _check_append(name: str, header: Header, config: CassetteConfig) -> None:
    """Refuse appending under a different persistence policy.

    Raises:
        AppendIncompatible: names the first differing header field.
    """
    cassette_name, upstream_name = config.provider.names()
    checks: tuple[tuple[str, bool], ...] = (
        # A v1 (rc.7) chain cannot be continued under a v2 header.
        ("version", header.version == VERSION),
        ("provider.cassette", header.provider.cassette == cassette_name),
        ("provider.upstream", header.provider.upstream == upstream_name),
        ("requestStorage", header.requestStorage == config.requestView),
        ("redactSecrets", header.redactSecrets == config.redactSecrets),
        ("redactionPatterns", header.redactionPatterns == list(config.redactionPatterns)),
    )
    for field, same in checks:
        if not same:
            raise AppendIncompatible(name, field)
