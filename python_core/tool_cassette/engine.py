"""Record and replay state machines of the tool cassette.

Rule (as h11): this file owns every transition, listed in the tables below. An event that is
illegal in the current state raises ``IllegalEvent`` and changes nothing. A failure moves the
session to ``FAILED`` (record) or ``POISONED`` (replay) for good: a failed recording is never
published, a poisoned replay refuses every later selected call. Identity of a call is
(path, tool, canonical arguments, ordinal); ordinals follow ``on_execute`` order and results
pair with calls by ``handle``, so completion order never matters.

Sans I/O: a recording never touches its file here. Each frame is chained and sealed into a
line; with no sink (the bridge) the lines wait in ``take_writes`` for a store layer that
writes them off the reader and reports a failure back (``write_failed``); library callers
with no event loop pass the file as ``sink``, which gets each line at once.
"""

from __future__ import annotations

import abc
import enum
import os
from typing import ClassVar, TypeVar

import msgspec
from msgspec import UNSET, Raw, UnsetType

from dsh_sidecar.python_core.canonical import digest_bytes, ordered_bytes
from dsh_sidecar.python_core.cassette_io import Chain, LineSink
from dsh_sidecar.python_core.composition import Composition, describe_change
from dsh_sidecar.python_core.errors import CanonicalJsonError, SidecarError
from dsh_sidecar.python_core.filters import PLACEHOLDER, Filters, rules_digest
from dsh_sidecar.python_core.json_pointers import describe, differing_pointers, parse_pointer
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig, same_selection
from dsh_sidecar.python_core.tool_cassette.errors import (
    ArgumentsUnreadable,
    CassetteExists,
    CassetteIOError,
    CassetteMismatch,
    ExtraCall,
    FilterBreaksSchema,
    FilterRaised,
    IllegalEvent,
    IncludeDiffers,
    NestedSelection,
    NothingSelected,
    OutcomeUnrecordable,
    RecordingIncomplete,
    RedactedReplay,
    ReplayPoisoned,
    RulesDiffer,
    ShortCircuited,
    ToolUnregistered,
    UnconsumedRecords,
    UnsupportedConcludesTurn,
    ValueRejected,
)
from dsh_sidecar.python_core.tool_cassette.faults import FaultRule
from dsh_sidecar.python_core.tool_cassette.format import (
    GENESIS,
    PROTOCOL,
    VERSION,
    Cancellation,
    CompleteFrame,
    DefinitionFrame,
    HeaderFrame,
    HostState,
    ObservedResult,
    ObservedStep,
    ResultFrame,
    StartFrame,
    ToolErrorInfo,
    ToolFailure,
    canonical_outcome,
    canonical_payload,
    canonical_text,
    verbatim_text,
)
from dsh_sidecar.python_core.tool_cassette.host_state import relocated
from dsh_sidecar.python_core.tool_cassette.matching import match_difference, reduce_args
from dsh_sidecar.python_core.tool_cassette.output_schema import first_violation, json_type
from dsh_sidecar.python_core.tool_cassette.store import Cassette, RecordedCall, Recorder, load
from dsh_sidecar.python_core.turns import RecordingInterrupted

__all__ = [
    "CALL_TRANSITIONS",
    "FAILURE_TRANSITIONS",
    "CallPhase",
    "CassetteState",
    "CassetteStats",
    "CloseReport",
    "Event",
    "ExecuteEvent",
    "HostToolResult",
    "Passthrough",
    "PostEvent",
    "RecordSession",
    "Refuse",
    "ReplaySession",
    "ResultEvent",
    "Serve",
    "ToolCassetteSession",
    "ToolContract",
]


class HostToolResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The host's ``ToolExecutionResult`` as JSON; payloads stay ``Raw``: the bytes Node sent,
    in the host's key order, which a recording keeps and a replay serves."""

    isError: bool
    content: Raw
    value: Raw | UnsetType = UNSET
    error: ToolFailure | UnsetType = UNSET
    meta: Raw | UnsetType = UNSET
    additionalContexts: Raw | UnsetType = UNSET
    concludesTurn: bool | UnsetType = UNSET


class ToolContract(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """A tool's definition as registered, in JSON: what a replay needs to stand it up.

    The shim sends it with a recorded call's post-execute when Python asked (``describe``).
    """

    parameters: Raw
    output: Raw
    description: str = ""
    presentationMeta: bool = False
    timeoutMs: int | UnsetType = UNSET


class ExecuteEvent(msgspec.Struct, frozen=True):
    """A selected call entered the outermost ``tools/execute`` wrapper."""

    handle: str
    path: str
    tool: str
    args_json: bytes


class PostEvent(msgspec.Struct, frozen=True):
    """A selected call reached ``tools/post-execute``; ``result`` is the listener's input.

    ``host``: the host state its real body left, to record (``host_state.kept``);
    ``definition``: the tool's registered contract, when ``Passthrough.describe`` asked for it.
    """

    handle: str
    path: str
    tool: str
    result: HostToolResult
    host: HostState | None = None
    definition: ToolContract | None = None


class ResultEvent(msgspec.Struct, frozen=True):
    """A selected call's frozen final outcome, as seen by ``tools/result``."""

    handle: str
    path: str
    tool: str
    result: HostToolResult


class Passthrough(msgspec.Struct, frozen=True):
    """Run the real tool (``next()``); ``ordinal`` is the recorded one, if any.

    ``describe``: send the tool's registered definition with this call's post-execute (the
    first recorded call of each tool).
    """

    ordinal: int | None = None
    describe: bool = False


class Serve(msgspec.Struct, frozen=True):
    """Replay hit: Node defers ``additionalContexts`` one by one, then returns ``result``.

    ``cancellation`` (recorded post-phase abort) replaces ``result`` when the caller's signal
    is already aborted at return time, as a success would become ABORTED_BEFORE_DISPATCH.
    """

    ordinal: int
    result: Raw
    additionalContexts: Raw
    cancellation: Raw | None = None
    delay_ms: int = 0
    """A fault overlay's delay: the bridge answers this long after the call came in."""
    host: HostState | None = None
    fault: str | None = None
    """The fault overlay's name when one of its rules applied to this call (a trace says so)."""


class Refuse(msgspec.Struct, frozen=True):
    """Fail this call closed with ``error``; the tool body must not run."""

    error: SidecarError


class CassetteStats(msgspec.Struct, frozen=True):
    """Counts of one session; ``recorded`` is record-only, ``consumed`` replay-only."""

    mode: str
    state: str
    started: int
    recorded: int
    consumed: int
    unconsumed: int
    pending: int
    refused: int
    cancelled_before_dispatch: int
    poisoned: bool
    selected: int = 0
    """Selected calls that entered ``tools/execute``, refused ones included."""
    injected: int = 0
    """Replayed calls the fault overlay failed or delayed."""
    faults: str | None = None
    """The fault overlay's name, when one was declared."""


class CloseReport(msgspec.Struct, frozen=True):
    """What ``close`` found: no errors means published (record) or fully consumed (replay)."""

    errors: tuple[SidecarError, ...]
    stats: CassetteStats
    published: bool = False


_SELECTS_CACHE = 1024


class CassetteState(enum.Enum):
    """Session states; ``FAILED`` and ``POISONED`` are sticky until ``CLOSED``."""

    # Members are singletons compared by identity; hash them so too (Enum.__hash__ is Python
    # code, and the transition tables look a member up several times per call).
    __hash__ = object.__hash__

    RECORDING = "recording"
    FAILED = "failed"
    SERVING = "serving"
    POISONED = "poisoned"
    CLOSED = "closed"


class CallPhase(enum.Enum):
    """Where one handle stands between its events."""

    # Members are singletons compared by identity; hash them so too (Enum.__hash__ is Python
    # code, and the transition tables look a member up several times per call).
    __hash__ = object.__hash__

    EXECUTED = "executed"
    POSTED = "posted"
    BYPASSED = "bypassed"
    REFUSED = "refused"


class Event(enum.Enum):
    """Events the bridge feeds in."""

    # Members are singletons compared by identity; hash them so too (Enum.__hash__ is Python
    # code, and the transition tables look a member up several times per call).
    __hash__ = object.__hash__

    EXECUTE = "on_execute"
    POST = "on_post_execute"
    RESULT = "on_result"
    CLOSE = "close"


_CALL_EVENTS = frozenset({Event.EXECUTE, Event.POST, Event.RESULT})

STATE_EVENTS: dict[CassetteState, frozenset[Event]] = {
    CassetteState.RECORDING: _CALL_EVENTS | {Event.CLOSE},
    CassetteState.FAILED: _CALL_EVENTS | {Event.CLOSE},
    CassetteState.SERVING: _CALL_EVENTS | {Event.CLOSE},
    CassetteState.POISONED: _CALL_EVENTS | {Event.CLOSE},
    CassetteState.CLOSED: frozenset(),
}

FAILURE_TRANSITIONS: dict[CassetteState, CassetteState] = {
    CassetteState.RECORDING: CassetteState.FAILED,
    CassetteState.FAILED: CassetteState.FAILED,
    CassetteState.SERVING: CassetteState.POISONED,
    CassetteState.POISONED: CassetteState.POISONED,
}

# Per handle: phase -> event -> next phase; None as a target means the call is finished and
# forgotten. A handle with no phase has not been seen (or already finished).
CALL_TRANSITIONS: dict[CallPhase | None, dict[Event, CallPhase | None]] = {
    None: {Event.EXECUTE: CallPhase.EXECUTED, Event.POST: CallPhase.BYPASSED, Event.RESULT: None},
    CallPhase.EXECUTED: {Event.POST: CallPhase.POSTED, Event.RESULT: None},
    CallPhase.POSTED: {Event.RESULT: None},
    CallPhase.BYPASSED: {Event.RESULT: None},
    CallPhase.REFUSED: {Event.POST: CallPhase.REFUSED, Event.RESULT: None},
}

_ABORT_CODES = frozenset({"ABORTED", "ABORTED_BEFORE_DISPATCH"})
# What rc.8 fails a served success with before post-execute: the current definition rejects
# the value (schema, renderer, presentation meta), or no tool of that name is registered.
_REJECTION_CODES = frozenset({"INVALID_TOOL_OUTPUT", "UNKNOWN_TOOL"})
_POST_WITHOUT_EXECUTE = "reached tools/post-execute without passing tools/execute"
_RESULT_WITHOUT_EXECUTE = "reached tools/result without passing tools/execute"
_RESULT_WITHOUT_POST = "reached tools/result without passing tools/post-execute"
_OUTCOME_REPLACED = "tools/post-execute saw another outcome than the one served"
_SERVED_WITHOUT_RESULT = "served, but never reached tools/result"


def _is_abort(result: HostToolResult, codes: frozenset[str] = _ABORT_CODES) -> bool:
    if not result.isError or result.error is UNSET or result.error.info is UNSET:
        return False
    return result.error.info.name == "AbortError" and result.error.info.code in codes


class _Call:
    """Mutable bookkeeping of one in-flight handle."""

    __slots__ = ("frame", "ordinal", "path", "phase", "record", "tool")

    def __init__(self, phase: CallPhase, tool: str, path: str, ordinal: int | None) -> None:
        self.phase = phase
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.frame: ResultFrame | None = None
        self.record: RecordedCall | None = None


def capture_outcome(result: HostToolResult, ordinal: int) -> ResultFrame:
    """Build the unchained ``call/result`` frame for ``result`` (post-execute input).

    The payloads are kept as the host serialized them (format version 4), once each is known to
    have a strict canonical form.

    Raises:
        CanonicalJsonError: a payload has no strict canonical form.
        ValueError: the result's shape is inconsistent (structural reason).
    """
    contexts = Raw(b"[]") if result.additionalContexts is UNSET else verbatim_text(bytes(result.additionalContexts))
    content = verbatim_text(bytes(result.content))
    meta = UNSET if result.meta is UNSET else verbatim_text(bytes(result.meta))
    if not result.isError:
        if result.value is UNSET:
            raise ValueError("success without a value")
        return ResultFrame(
            seq=0, prev=GENESIS, ordinal=ordinal, isError=False, value=verbatim_text(bytes(result.value)),
            content=content, meta=meta, additionalContexts=contexts,
        )
    if result.error is UNSET:
        raise ValueError("failure without an error")
    canonical_payload(msgspec.to_builtins(result.error))
    return ResultFrame(
        seq=0, prev=GENESIS, ordinal=ordinal, isError=True, error=result.error,
        content=content, meta=meta, additionalContexts=contexts,
    )


def _outcome_key(frame: ResultFrame) -> tuple[object, ...]:
    # Key order is not a difference: the host may hand the served text back in its own order.
    frame = canonical_outcome(frame)
    if not frame.isError:
        # A success's content and meta are the live renderer's: a registered tool may render
        # the recorded value otherwise, and only the value is the recorded outcome.
        return (False, frame.value, frame.additionalContexts)
    return (True, frame.error, frame.content, frame.meta, frame.additionalContexts)


def _serve(record: RecordedCall, stood_up: bool = False) -> Serve:
    """The served answer of ``record``; ``stood_up``: its tool is a stand-in, which renders only
    what is served (a success recorded without its rendering shows its value's JSON text).

    Payloads go out as recorded (version 4: the host's text, so its key order) and the result's
    members in the host's own order; older files hold canonical payloads and serve them so.
    """
    frame = record.result
    body: dict[str, object]
    if frame.isError:
        body = {"isError": True, "error": frame.error, "content": frame.content}
    else:
        # The recorded rendering travels along: a stand-in's renderer serves it (a registered
        # tool renders the value itself and DSH drops this content).
        content: object = frame.content
        if content is UNSET:
            assert frame.value is not UNSET  # verified: a success always has a value
            content = [{"type": "text", "text": bytes(frame.value).decode()}] if stood_up else []
        body = {"isError": False, "value": frame.value, "content": content}
    if frame.meta is not UNSET:
        body["meta"] = frame.meta
    cancellation = None
    if frame.cancellation is not UNSET:
        cancelled = frame.cancellation
        cancellation = Raw(_SERVED.encode(
            {"isError": True, "error": cancelled.error, "content": cancelled.content}
        ))
    return Serve(
        ordinal=record.ordinal, result=Raw(_SERVED.encode(body)),
        additionalContexts=frame.additionalContexts, cancellation=cancellation,
        host=None if frame.host is UNSET else frame.host,
    )


# Served results keep insertion order: the host's member order, ``error`` as its fields are declared.
_SERVED = msgspec.json.Encoder()
_PLACEHOLDER_BYTES = msgspec.json.encode(PLACEHOLDER)[1:-1]
R = TypeVar("R", Raw, Raw | UnsetType)


def redact_args(filters: Filters, tool: str, args: Raw) -> Raw:
    """The arguments as recorded and matched: filtered (the fingerprint is over this form)."""
    if not filters:
        return args
    return canonical_payload(filters.apply(msgspec.json.decode(args), tool=tool, where="args"))


def redact_outcome(filters: Filters, tool: str, frame: ResultFrame) -> ResultFrame:
    """The outcome as written to the file: value, error message, content, meta and contexts filtered."""
    if not filters:
        return frame
    error = frame.error
    if not isinstance(error, UnsetType):
        message = filters.apply(error.message, tool=tool, where="result")
        error = msgspec.structs.replace(error, message=message if isinstance(message, str) else PLACEHOLDER)
    value = _redact_raw(filters, tool, frame.value)
    content, meta = _redact_raw(filters, tool, frame.content), _redact_raw(filters, tool, frame.meta)
    if not frame.isError and value != frame.value and not isinstance(frame.value, UnsetType) \
            and filters.hides(msgspec.json.decode(frame.value), tool=tool, where="result"):
        # A success's rendering may spell what a redacting filter took out of its value (a key
        # filter never sees inside rendered text): it is not kept, and a stand-in shows the value.
        # A normalize rule hides nothing: the rendering the model saw is kept.
        content, meta = UNSET, UNSET
    return msgspec.structs.replace(
        frame, error=error, value=value, content=content, meta=meta,
        additionalContexts=_redact_raw(filters, tool, frame.additionalContexts),
    )


def _redact_raw(filters: Filters, tool: str, raw: R) -> R:
    """``raw`` with the filters applied; an unchanged payload keeps its bytes, a changed one
    keeps its key order (it is served as recorded)."""
    if not filters or isinstance(raw, UnsetType):
        return raw
    redacted = filters.apply(msgspec.json.decode(raw), tool=tool, where="result")
    if redacted == msgspec.json.decode(raw):
        return raw
    return Raw(ordered_bytes(redacted))


def _schema_break(filters: Filters, tool: str, path: str, frame: ResultFrame, schema: Raw,
                  ) -> FilterBreaksSchema | None:
    """A result filter that leaves the success ``frame``'s valid value one ``schema`` refuses.

    The value as filtered is judged, as the host judges it at replay; the rule named is the last
    one that changed the part at the first violation. A value the schema refused before any filter
    is the host's to judge (it fails the call live).

    Raises:
        FilterRaised: as ``Filters.steps``.
    """
    if frame.isError or isinstance(frame.value, UnsetType) or not filters:
        return None
    decoded_schema = msgspec.json.decode(schema)
    value = msgspec.json.decode(frame.value)
    if first_violation(decoded_schema, value) is not None:
        return None
    steps = [(value, -1), *((after, index) for index, _, after in filters.steps(value, tool=tool, where="result"))]
    found = first_violation(decoded_schema, steps[-1][0])
    if found is None:
        return None
    culprit = next((index for (before, _), (after, index) in zip(steps[-2::-1], steps[:0:-1], strict=True)
                    if _at(before, found.pointer) != _at(after, found.pointer)), steps[-1][1])
    becomes = _at(steps[-1][0], found.pointer)
    return FilterBreaksSchema(culprit, tool, path, frame.ordinal, found.pointer,
                              "absent" if becomes is _ABSENT else json_type(becomes), found.wants, found.wanted_type)


_ABSENT = object()


def _at(value: object, pointer: str) -> object:
    """The part of ``value`` at ``pointer`` (``/`` is the whole value), or ``_ABSENT``."""
    for token in [] if pointer == "/" else parse_pointer(pointer):
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _ABSENT
    return value


def _holds_placeholder(frame: ResultFrame) -> bool:
    return any(not isinstance(raw, UnsetType) and _PLACEHOLDER_BYTES in bytes(raw)
               for raw in (frame.value, frame.content, frame.meta, frame.additionalContexts))


def _injected(rule: FaultRule, overlay: str, ordinal: int) -> ResultFrame:
    """The failure a fault rule serves instead of the record, named as injected."""
    assert rule.code is not None
    message = f"[injected by fault overlay {overlay}] {rule.code}: {rule.message}"
    return ResultFrame(
        seq=0, prev="", ordinal=ordinal, isError=True,
        error=ToolFailure(message=message, info=ToolErrorInfo(name="HarnessError", code=rule.code)),
        content=canonical_payload([{"text": f"Error: {message}", "type": "text"}]),
        additionalContexts=Raw(b"[]"),
    )


class ToolCassetteSession(abc.ABC):
    """One cassette session; ``open`` returns a ``RecordSession`` or a ``ReplaySession``."""

    mode: ClassVar[str]

    def __init__(self, config: ToolCassetteConfig, state: CassetteState) -> None:
        self.config = config
        self._filters = Filters(config.filters, config.functions)
        self._selects: dict[str, bool] = {}
        self.state = state
        self._calls: dict[str, _Call] = {}
        self._errors: list[SidecarError] = []
        self._ordinals = 0
        self._selected = 0
        self._refused = 0
        self._cancelled_before_dispatch = 0

    @staticmethod
    def open(config: ToolCassetteConfig, *, deferred: bool = False, plugins: Composition | None = None,
             ) -> ToolCassetteSession:
        """Start recording (create the partial, write the header) or load a verified cassette.

        ``deferred``: a recording queues its lines for ``take_writes`` instead of writing each
        at once (its ``recorder`` is the file they go to). ``plugins``: the composition of this
        run (``None``: unknown); a recording keeps it in its header, a replay names what changed
        since the recording when a call no longer matches.

        Raises:
            CassetteExists: record mode and the file or its ``.partial`` exists.
            CassetteInvalid: replay mode and the file fails verification.
            IncludeDiffers: replay mode and ``include`` differs from the recording's.
            CassetteIOError: the file cannot be created or read (names the field and the fix).
            FilterUnresolved: a ``call`` filter has no imported function (before any file is touched).
        """
        Filters(config.filters, config.functions)
        try:
            if config.mode == "record":
                return RecordSession.start(config, deferred=deferred, plugins=plugins)
            return ReplaySession.start(config, plugins=plugins)
        except CassetteIOError as error:
            raise error.at_open(config.mode) from None

    def selects(self, tool: str) -> bool:
        """Tell whether ``tool`` goes through the cassette."""
        known = self._selects.get(tool)
        if known is None:
            known = self.config.selects(tool)
            # A run calls a few tools many times; the bound keeps odd names from growing it.
            if len(self._selects) < _SELECTS_CACHE:
                self._selects[tool] = known
        return known

    @property
    def errors(self) -> tuple[SidecarError, ...]:
        """Failures so far, first cause first."""
        return tuple(self._errors)

    def _advance(
        self, event: Event, handle: str, tool: str
    ) -> tuple[_Call | None, CallPhase | None]:
        """Look up the transition for ``event``; raise before any change if it is illegal."""
        if event not in STATE_EVENTS[self.state]:
            raise IllegalEvent(event.value, self.state.value)
        if event is Event.CLOSE:
            return None, None
        if not self.selects(tool):
            raise IllegalEvent(f"{event.value} for an unselected tool", self.state.value)
        call = self._calls.get(handle)
        moves = CALL_TRANSITIONS[None if call is None else call.phase]
        if event not in moves:
            phase = "unseen" if call is None else call.phase.value
            raise IllegalEvent(f"{event.value} for a call in phase {phase}", self.state.value)
        return call, moves[event]

    def _fail(self, error: SidecarError) -> None:
        self._errors.append(error)
        self.state = FAILURE_TRANSITIONS[self.state]

    def _settle(self, handle: str, call: _Call | None, phase: CallPhase | None) -> None:
        if phase is None:
            self._calls.pop(handle, None)
        elif call is not None:
            call.phase = phase

    def _unseen_result(self, event: ResultEvent) -> None:
        if _is_abort(event.result, frozenset({"ABORTED_BEFORE_DISPATCH"})):
            self._cancelled_before_dispatch += 1
            return
        self._fail(ShortCircuited(event.tool, event.path, None, _RESULT_WITHOUT_EXECUTE, bypassed=True))

    def _pending(self) -> int:
        return sum(1 for call in self._calls.values()
                   if call.ordinal is not None and call.phase in
                   (CallPhase.EXECUTED, CallPhase.POSTED))

    @abc.abstractmethod
    def on_execute(self, event: ExecuteEvent) -> Passthrough | Serve | Refuse:
        """Admit a selected call entering ``tools/execute``."""

    @abc.abstractmethod
    def on_post_execute(self, event: PostEvent) -> Refuse | None:
        """Observe a selected call's ``tools/post-execute`` input."""

    @abc.abstractmethod
    def on_result(self, event: ResultEvent) -> None:
        """Observe a selected call's frozen final outcome."""

    @abc.abstractmethod
    def close(self, interruption: str | None = None) -> CloseReport:
        """End the session and report every error that makes the run fail.

        ``interruption`` says why the recorded turn did not really end (``TurnLedger``);
        a recording then keeps its partial instead of publishing.
        """

    @abc.abstractmethod
    def statistics(self) -> CassetteStats:
        """Return the session's counts."""


class RecordSession(ToolCassetteSession):
    """Record mode: real calls pass through; starts and outcomes become lines to write."""

    mode = "record"

    def __init__(self, config: ToolCassetteConfig, recorder: Recorder, sink: LineSink | None) -> None:
        super().__init__(config, CassetteState.RECORDING)
        self.recorder = recorder
        self._sink = sink
        self._chain = Chain()
        self._writes: list[bytes] = []
        self._recorded = 0
        self._cut_short = 0
        # Tools whose definition was asked for (``describe``) and those already written.
        self._described: set[str] = set()
        self._defined: set[str] = set()
        # Each defined tool's output schema: a result filter must leave a value it accepts.
        self._schemas: dict[str, Raw] = {}

    @classmethod
    def start(cls, config: ToolCassetteConfig, *, deferred: bool = False, plugins: Composition | None = None,
              ) -> RecordSession:
        """Create the partial and write its header (see ``ToolCassetteSession.open``)."""
        recorder = Recorder.create(config.file)
        session = cls(config, recorder, None if deferred else recorder)
        session._emit(HeaderFrame(
            seq=0, prev=GENESIS, protocol=PROTOCOL, version=VERSION, include=config.include,
            filters=rules_digest(config.filters) if config.filters else UNSET, match=config.match or UNSET,
            plugins=UNSET if plugins is None else dict(plugins),
        ))
        try:
            # Nothing can be admitted before the header is durable: written now in both modes.
            recorder.write_lines(session.take_writes())
        except CassetteIOError:
            recorder.abandon()
            raise
        return session

    def take_writes(self) -> list[bytes]:
        """Return the sealed lines not yet handed out, in order; the caller must write them."""
        writes, self._writes = self._writes, []
        return writes

    def observe(self, frame: ObservedResult | ObservedStep) -> None:
        """Keep the digest of something a replay will not serve (``divergence.py``): an unselected
        call's outcome, a model step's input. Nothing is written after the recording failed."""
        if self.state is CassetteState.RECORDING:
            error = self._emit(frame)
            if error is not None:
                self._fail(error)

    def _emit(self, frame: HeaderFrame | StartFrame | ResultFrame | DefinitionFrame | ObservedResult
              | ObservedStep | CompleteFrame) -> CassetteIOError | None:
        """Chain and seal ``frame``; write it now through the sink, or queue it."""
        _, line = self._chain.link(frame)
        if self._sink is None:
            self._writes.append(line)
            return None
        try:
            self._sink.write_lines([line])
        except CassetteIOError as error:
            return error
        return None

    def write_failed(self, handle: str | None, error: SidecarError) -> Refuse | None:
        """A queued line could not be written: the recording fails (first cause kept).

        ``handle`` names the call whose ``tools/execute`` answer waited for the line: it is
        refused instead of passed through, as a synchronous write failure would be.
        """
        if self.state is CassetteState.RECORDING:
            self._fail(error)
        call = None if handle is None else self._calls.get(handle)
        if call is None or handle is None:
            return None
        self._refused += 1
        call.phase, call.ordinal = CallPhase.REFUSED, None
        return Refuse(error)

    def on_execute(self, event: ExecuteEvent) -> Passthrough | Serve | Refuse:
        """Emit ``call/start`` and let the real tool run; refuse only if that is impossible.

        Deferred: the answer must wait until the line is durable (see ``write_failed``).
        """
        _, phase = self._advance(Event.EXECUTE, event.handle, event.tool)
        assert phase is CallPhase.EXECUTED
        self._selected += 1
        if self.state is CassetteState.FAILED:
            self._calls[event.handle] = _Call(phase, event.tool, event.path, None)
            return Passthrough()
        outer = self._enclosing(event.path)
        if outer is not None:
            assert outer.ordinal is not None
            return self._refuse(event, NestedSelection(
                event.tool, event.path, outer.tool, outer.path, outer.ordinal
            ))
        try:
            args = redact_args(self._filters, event.tool, canonical_text(event.args_json))
        except CanonicalJsonError as exc:
            return self._refuse(event, ArgumentsUnreadable(event.tool, event.path, exc.reason))
        except FilterRaised as raised:
            return self._refuse(event, raised)
        ordinal = self._ordinals
        error = self._emit(StartFrame(
            seq=0, prev=GENESIS, ordinal=ordinal, path=event.path, tool=event.tool, args=args,
            argsDigest=digest_bytes(args),
        ))
        if error is not None:
            return self._refuse(event, error)
        self._ordinals += 1
        self._calls[event.handle] = _Call(phase, event.tool, event.path, ordinal)
        describe = event.tool not in self._described and event.tool not in self._defined
        self._described.add(event.tool)
        return Passthrough(ordinal=ordinal, describe=describe)

    def _enclosing(self, path: str) -> _Call | None:
        """The recorded call still running whose path encloses ``path``, if any."""
        if path.count("/") < 2:
            return None  # a root call (``root/N``) has no enclosing call
        parts = path.split("/")
        outer = {"/".join(parts[:end]) for end in range(2, len(parts))}
        for call in self._calls.values():
            if call.ordinal is not None and call.path in outer and call.phase in (CallPhase.EXECUTED, CallPhase.POSTED):
                return call
        return None

    def _refuse(self, event: ExecuteEvent, error: SidecarError) -> Refuse:
        self._fail(error)
        self._refused += 1
        self._calls[event.handle] = _Call(CallPhase.REFUSED, event.tool, event.path, None)
        return Refuse(error)

    def on_post_execute(self, event: PostEvent) -> Refuse | None:
        """Capture the outcome to record; refuse ``concludesTurn`` and bypassed calls."""
        call, phase = self._advance(Event.POST, event.handle, event.tool)
        if call is None:
            error: SidecarError = ShortCircuited(event.tool, event.path, None,
                                                 _POST_WITHOUT_EXECUTE, bypassed=True)
            self._fail(error)
            self._calls[event.handle] = _Call(CallPhase.BYPASSED, event.tool, event.path, None)
            return Refuse(error)
        if call.phase is CallPhase.REFUSED or call.ordinal is None:
            self._settle(event.handle, call, phase)
            return None
        if event.result.concludesTurn is True:
            error = UnsupportedConcludesTurn(call.tool, call.path, call.ordinal)
        else:
            try:
                captured = capture_outcome(event.result, call.ordinal)
                schema = self._schemas.get(call.tool) if event.definition is None else event.definition.output
                broken = None if schema is None else _schema_break(self._filters, call.tool, call.path, captured,
                                                                   schema)
                if broken is not None:
                    self._fail(broken)
                    call.phase = CallPhase.REFUSED
                    return Refuse(broken)
                call.frame = redact_outcome(self._filters, call.tool, captured)
                if event.host is not None:
                    call.frame = msgspec.structs.replace(call.frame, host=event.host)
                if event.definition is not None and call.tool not in self._defined:
                    lost = self._define(call.tool, event.definition)
                    if lost is not None:
                        self._fail(lost)
                        call.phase = CallPhase.REFUSED
                        return Refuse(lost)
            except CanonicalJsonError as exc:
                error = OutcomeUnrecordable(call.tool, call.path, call.ordinal, exc.reason)
            except FilterRaised as raised:
                error = raised
            except ValueError as exc:
                error = OutcomeUnrecordable(call.tool, call.path, call.ordinal, str(exc))
            else:
                self._settle(event.handle, call, phase)
                return None
        self._fail(error)
        call.phase = CallPhase.REFUSED
        return Refuse(error)

    def define(self, tool: str, contract: ToolContract) -> None:
        """Record the contract of a selected tool the host registered (once per tool).

        Every selected tool is defined, called or not: the model sees all of them, so a replay
        standing them up offers the model the same tools.
        """
        if self.state is not CassetteState.RECORDING or tool in self._defined or not self.selects(tool):
            return
        try:
            lost = self._define(tool, contract)
        except CanonicalJsonError as exc:
            self._fail(OutcomeUnrecordable(tool, "its registered definition", None, exc.reason))
            return
        if lost is not None:
            self._fail(lost)

    def _define(self, tool: str, contract: ToolContract) -> CassetteIOError | None:
        """Emit the ``tool`` frame of ``tool`` (once per recording).

        Raises:
            CanonicalJsonError: a schema has no strict canonical form.
        """
        self._defined.add(tool)
        self._schemas[tool] = contract.output
        return self._emit(DefinitionFrame(
            seq=0, prev=GENESIS, tool=tool, description=contract.description,
            parameters=verbatim_text(bytes(contract.parameters)), output=verbatim_text(bytes(contract.output)),
            presentationMeta=True if contract.presentationMeta else UNSET, timeoutMs=contract.timeoutMs,
        ))

    def on_result(self, event: ResultEvent) -> None:
        """Emit ``call/result``, adding the final cancellation if the post phase aborted."""
        call, _ = self._advance(Event.RESULT, event.handle, event.tool)
        self._calls.pop(event.handle, None)
        if call is None:
            self._unseen_result(event)
            return
        if call.ordinal is None or call.phase in (CallPhase.BYPASSED, CallPhase.REFUSED):
            return
        if call.frame is None:
            self._fail(ShortCircuited(call.tool, call.path, call.ordinal, _RESULT_WITHOUT_POST))
            return
        if self.state is CassetteState.FAILED:
            return
        frame = call.frame
        final = event.result
        if _is_abort(final):
            self._cut_short += 1
        if not frame.isError and _is_abort(final):
            assert final.error is not UNSET
            try:
                content = _redact_raw(self._filters, call.tool, verbatim_text(bytes(final.content)))
            except CanonicalJsonError as exc:
                self._fail(OutcomeUnrecordable(call.tool, call.path, call.ordinal, exc.reason))
                return
            except FilterRaised as raised:
                self._fail(raised)
                return
            frame = msgspec.structs.replace(
                frame, cancellation=Cancellation(error=final.error, content=content)
            )
        error = self._emit(frame)
        if error is not None:
            self._fail(error)
            return
        self._recorded += 1

    def busy(self) -> bool:
        """Whether a selected call is open now or any was cut short by an abort."""
        return self._pending() > 0 or self._cut_short > 0

    def finish(self, interruption: str | None = None) -> bool:
        """Decide the end of the recording; true: write ``take_writes()`` (the tail), then publish.

        Every line emitted before must have been written, and its failure reported, first.
        """
        self._advance(Event.CLOSE, "", "")
        if self.state is CassetteState.RECORDING and self._pending() == 0 and interruption is None:
            if self._selected == 0 and self._cancelled_before_dispatch == 0:
                self._errors.append(NothingSelected(os.path.basename(self.config.file), self.config.include))
                return False
            self._emit(CompleteFrame(seq=0, prev=GENESIS, calls=self._ordinals))
            return True
        return False

    def release(self) -> None:
        """Close the partial: removed when nothing was selected, else kept as evidence."""
        if any(isinstance(error, NothingSelected) for error in self._errors):
            self.recorder.discard()
        else:
            self.recorder.abandon()

    def report(self, interruption: str | None, failure: SidecarError | None, published: bool) -> CloseReport:
        """Close the session: the report of a ``finish`` followed by publishing (or not)."""
        errors = list(self._errors)
        if failure is not None:
            errors.append(failure)
        partial = os.path.basename(self.recorder.partial)
        if interruption is not None:
            name = os.path.basename(self.config.file)
            errors.append(RecordingInterrupted(
                f"tool cassette {name}", interruption, f"not published, kept {partial}",
            ))
        elif not published and not any(isinstance(error, NothingSelected) for error in errors):
            cause = errors[0].code if errors else None
            errors.append(RecordingIncomplete(partial, self._pending(), cause))
        self.state = CassetteState.CLOSED
        return CloseReport(errors=tuple(errors), stats=self.statistics(), published=published)

    def close(self, interruption: str | None = None) -> CloseReport:
        """Write the tail and publish create-only, or keep the partial and report why not.

        For a session with a sink; a deferred one goes through ``finish`` and ``report``.
        """
        failure: SidecarError | None = None
        published = False
        if self.finish(interruption):
            try:
                self.recorder.write_lines(self.take_writes())
                self.recorder.publish()
                published = True
            except (CassetteIOError, CassetteExists) as error:
                failure = error
        self.release()
        return self.report(interruption, failure, published)

    def statistics(self) -> CassetteStats:
        """Return the session's counts."""
        return CassetteStats(
            mode=self.mode, state=self.state.value, started=self._ordinals,
            recorded=self._recorded, consumed=0, unconsumed=0, pending=self._pending(),
            refused=self._refused, cancelled_before_dispatch=self._cancelled_before_dispatch,
            poisoned=False, selected=self._selected,
        )


class ReplaySession(ToolCassetteSession):
    """Replay mode: exact hits are served from memory; the cassette file is never written."""

    mode = "replay"

    def __init__(self, config: ToolCassetteConfig, cassette: Cassette, plugins: Composition | None = None) -> None:
        super().__init__(config, CassetteState.SERVING)
        # What changed in the composition since the recording ("" when nothing, or either is unknown).
        recorded = cassette.header.plugins
        self.composition_change = "" if plugins is None or isinstance(recorded, UnsetType) \
            else describe_change(recorded, plugins)
        self._records = cassette.calls
        self.version = cassette.header.version
        # Version 5: digests of what the recording did not serve, for the divergence check.
        self.observed_results = cassette.observed_results
        self.observed_steps = cassette.observed_steps
        # Recorded contracts of the selected tools; ``stood_up`` names those the shim registered
        # because no plugin did, ``standin_errors`` those it could not register.
        self.definitions = cassette.definitions
        # Imported from a session log: every selected tool is stood in, shadowing a registered
        # one (a registered tool would render the served content as if it were its value).
        self.imported = cassette.header.source == "session-log"
        self.stood_up: frozenset[str] = frozenset()
        self.standin_errors: dict[str, str] = {}
        self._consumed = 0
        self._injected = 0
        self._injected_failures = 0
        # The session cwd: recorded outcomes naming the recording's cwd are served with this one.
        self.cwd = ""
        self._name = os.path.basename(config.file)

    @classmethod
    def start(cls, config: ToolCassetteConfig, *, plugins: Composition | None = None) -> ReplaySession:
        """Load and fully verify the cassette (see ``ToolCassetteSession.open``)."""
        cassette = load(config.file)
        name = os.path.basename(config.file)
        if not same_selection(cassette.header.include, config.include):
            raise IncludeDiffers(name)
        header = cassette.header
        if header.filters != (rules_digest(config.filters) if config.filters else UNSET):
            # The header holds the rules' fingerprint only (a regex may spell the secret): say
            # which side has rules, and how many this replay declares.
            declared = f"this replay declares {len(config.filters)} filter rule(s)"
            raise RulesDiffer(name, "filters", (
                f"the recording has no filters, {declared}" if header.filters is UNSET
                else "the recording has filters, this replay declares none" if not config.filters
                else f"{declared}, whose fingerprint is not the recording's (it stores only that "
                "fingerprint, so which rule differs cannot be told)"))
        recorded_match = {} if header.match is UNSET else header.match
        if recorded_match != config.match:
            raise RulesDiffer(name, "match", match_difference(recorded_match, config.match))
        return cls(config, cassette, plugins)

    def _refuse(self, event: ExecuteEvent, error: SidecarError) -> Refuse:
        if not isinstance(error, ReplayPoisoned):
            self._fail(error)
        self._refused += 1
        self._calls[event.handle] = _Call(CallPhase.REFUSED, event.tool, event.path, None)
        return Refuse(error)

    def on_execute(self, event: ExecuteEvent) -> Passthrough | Serve | Refuse:
        """Serve the record at the next ordinal if the identity matches exactly."""
        _, phase = self._advance(Event.EXECUTE, event.handle, event.tool)
        assert phase is CallPhase.EXECUTED
        self._selected += 1
        if self.state is CassetteState.POISONED:
            return self._refuse(event, ReplayPoisoned(event.tool, event.path, self._errors[0].code))
        try:
            args = redact_args(self._filters, event.tool, canonical_text(event.args_json))
        except CanonicalJsonError as exc:
            return self._refuse(event, ArgumentsUnreadable(event.tool, event.path, exc.reason))
        except FilterRaised as raised:
            return self._refuse(event, raised)
        ordinal = self._ordinals
        self._ordinals += 1
        if ordinal >= len(self._records):
            return self._refuse(event, ExtraCall(
                event.tool, event.path, ordinal, len(self._records), cassette=self._name,
                composition=self.composition_change,
            ))
        record = self._records[ordinal]
        mismatch = None
        pointers = ""
        if event.tool != record.tool:
            mismatch = ("tool", event.tool, record.tool)
        elif event.path != record.path:
            mismatch = ("path", event.path, record.path)
        elif args != record.args:
            rule = self.config.match.get(event.tool)
            recorded = reduce_args(msgspec.json.decode(record.args), rule)
            actual = reduce_args(msgspec.json.decode(args), rule)
            # The ignored pointers are gone from both sides; what differs now is a mismatch.
            changes = differing_pointers(recorded, actual)
            if rule is None or changes:
                mismatch = ("args", digest_bytes(args), digest_bytes(record.args))
                pointers = describe(changes)
        if mismatch is not None:
            field, actual, recorded = mismatch
            return self._refuse(event, CassetteMismatch(
                event.tool, event.path, ordinal, field, actual, recorded, cassette=self._name,
                pointers=pointers, composition=self.composition_change,
            ))
        overlay = self.config.faults
        fault = None if overlay is None else overlay.fault(event.tool, event.path, ordinal)
        if fault is not None and fault.code is not None:
            assert overlay is not None
            record = msgspec.structs.replace(record, result=_injected(fault, overlay.name, ordinal))
            self._injected_failures += 1
        elif not self.config.allowRedactedReplay and _holds_placeholder(record.result):
            return self._refuse(event, RedactedReplay(event.tool, event.path, ordinal))
        if fault is not None:
            self._injected += 1
        self._consumed += 1
        if self.cwd:
            record = msgspec.structs.replace(record, result=relocated(record.result, self.cwd))
        call = _Call(phase, event.tool, event.path, ordinal)
        call.record = record
        self._calls[event.handle] = call
        served = _serve(record, stood_up=event.tool in self.stood_up)
        if fault is not None:
            assert overlay is not None
            served = msgspec.structs.replace(served, delay_ms=fault.delayMs or 0, fault=overlay.name)
        return served

    def on_post_execute(self, event: PostEvent) -> Refuse | None:
        """Check that the served outcome reached post-execute unchanged (or was cancelled)."""
        call, phase = self._advance(Event.POST, event.handle, event.tool)
        if call is None:
            error = ShortCircuited(event.tool, event.path, None, _POST_WITHOUT_EXECUTE, bypassed=True)
            self._fail(error)
            self._calls[event.handle] = _Call(CallPhase.BYPASSED, event.tool, event.path, None)
            return Refuse(error)
        if call.record is None or call.ordinal is None or _is_abort(event.result):
            self._settle(event.handle, call, phase)
            return None
        try:
            seen = _outcome_key(capture_outcome(event.result, call.ordinal))
        except (CanonicalJsonError, ValueError):
            seen = None
        if seen == _outcome_key(call.record.result):
            self._settle(event.handle, call, phase)
            return None
        error = ShortCircuited(call.tool, call.path, call.ordinal, _OUTCOME_REPLACED)
        self._fail(error)
        call.phase = CallPhase.REFUSED
        return Refuse(error)

    def on_result(self, event: ResultEvent) -> None:
        """Finish a call; a served call that skipped post-execute poisons the replay."""
        call, _ = self._advance(Event.RESULT, event.handle, event.tool)
        self._calls.pop(event.handle, None)
        if call is None:
            self._unseen_result(event)
            return
        if call.phase is not CallPhase.EXECUTED or call.ordinal is None:
            return
        final = event.result
        if final.isError and final.error is not UNSET and final.error.info is not UNSET \
                and final.error.info.code in _REJECTION_CODES:
            code = final.error.info.code
            if code == "UNKNOWN_TOOL" and call.tool not in self.stood_up:
                self._fail(ToolUnregistered(call.tool, call.path, call.ordinal, self.version,
                                            self.standin_errors.get(call.tool)))
            else:
                self._fail(ValueRejected(call.tool, call.path, call.ordinal, code))
            return
        self._fail(ShortCircuited(call.tool, call.path, call.ordinal, _RESULT_WITHOUT_POST))

    def close(self, interruption: str | None = None) -> CloseReport:
        """Report poison, extra calls and unconsumed records; the file is left untouched."""
        self._advance(Event.CLOSE, "", "")
        # A served call with no final outcome: the run ended inside it, so the trajectory was
        # not replayed to its end even if every record was consumed.
        unfinished = [call for call in self._calls.values()
                      if call.ordinal is not None and call.phase in (CallPhase.EXECUTED, CallPhase.POSTED)]
        if unfinished:
            oldest = min(unfinished, key=lambda call: call.ordinal or 0)
            self._fail(ShortCircuited(oldest.tool, oldest.path, oldest.ordinal, _SERVED_WITHOUT_RESULT))
        errors = list(self._errors)
        # Hits are consumed strictly in ordinal order until the first failure, so the
        # consumed records are exactly the first ``_consumed`` ones.
        remaining = len(self._records) - self._consumed
        # An injected failure changes the trajectory on purpose: the records it left unused
        # are counted (and named in the close note), not a reason to re-record.
        if remaining and not self._injected_failures:
            first = self._records[self._consumed]
            errors.append(UnconsumedRecords(
                remaining, first.ordinal, first.tool, first.path, cassette=self._name,
                composition=self.composition_change,
            ))
        self.state = CassetteState.CLOSED
        return CloseReport(errors=tuple(errors), stats=self.statistics())

    def statistics(self) -> CassetteStats:
        """Return the session's counts."""
        return CassetteStats(
            mode=self.mode, state=self.state.value, started=self._ordinals, recorded=0,
            consumed=self._consumed, unconsumed=len(self._records) - self._consumed,
            pending=self._pending(), refused=self._refused,
            cancelled_before_dispatch=self._cancelled_before_dispatch,
            poisoned=bool(self._errors), selected=self._selected, injected=self._injected,
            faults=None if self.config.faults is None else self.config.faults.name,
        )
