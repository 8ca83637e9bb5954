"""DSH session JSONL -> canonical mock script (docs/mock.md, "Session JSONL conversion").

Rule: this adapter only gathers candidate steps and source lines; ``validate_script`` is the
one judge of the result. Every ``assistant/message`` with tool-call blocks is one executable
step (one block: a tool step; several: a parallel group in block order), ordered by durable
``seq``. Records that describe the same step are cross-checked, never silently preferred:
duplicate ``assistant/message`` rows, the ``assistant/chunk`` block-ends the message cites in
``sourceEventSeqs`` and the ``tool/call`` rows must agree on call id, tool name and arguments.
Tool results are never read. Source call ids appear in diagnostics only.

Timing (only with ``preserve_timing``): the wait before executable step k+1 is that step's
model latency, ``time`` of the first chunk the message cites minus ``time`` of its
``step/start``. Both must be integer epoch milliseconds; anything missing or not an integer
gives no wait (the runner's 100 ms default applies). Contradicting boundaries (a chunk before
its ``step/start``, two ``step/start`` rows with different times) are ``CONVERSION_MISMATCH``.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec

from dsh_sidecar.python_core.canonical import DEPTH_REASON, loads_strict, too_deep_lines
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.mock.errors import ConversionMismatch, InvalidScript
from dsh_sidecar.python_core.mock.script import Script, validate_script

__all__ = ["SESSION_LOG_VERSION", "convert_session"]

SESSION_LOG_VERSION: Final = 0


# JSON whitespace (RFC 8259) without the line feed the lines are split on.
_BLANK: Final = b" \t\r"


class _Header(msgspec.Struct, gc=False):
    type: str
    version: int | None = None


class _Head(msgspec.Struct, gc=False):
    """What the line loop reads of a ``data`` object: its ``chunk``, and a chunk's ``block``."""

    type: Any = None
    chunk: _Head | _Json = None
    block: _Head | _Json = None


# Any JSON value: a field typed this way never fails validation, whatever a record holds.
_Json = list[Any] | str | int | float | bool | None
# A record without ``data`` is skipped; ``"data": null`` is not (it is malformed where read).
_NO_DATA: Final = _Head()


class _Event(msgspec.Struct, rename="camel", gc=False):
    """One line as the loop reads it; kinds it acts on are decoded again in full."""

    type: str
    seq: int | None = None
    seq0: int | None = None
    time: int | float | None = None
    data: _Head | _Json = msgspec.field(default_factory=lambda: _NO_DATA)


class _StepData(msgspec.Struct, gc=False):
    turn: int
    step: int


class _Block(msgspec.Struct, gc=False):
    type: str
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


class _Chunk(msgspec.Struct, gc=False):
    type: str
    block: _Block | None = None


class _ChunkData(msgspec.Struct, gc=False):
    turn: int
    step: int
    chunk: _Chunk


class _Message(msgspec.Struct, gc=False):
    content: list[_Block]


class _MessageData(msgspec.Struct, gc=False):
    turn: int
    step: int
    message: _Message
    interrupted: bool = False


class _ToolCallData(msgspec.Struct, rename="camel", gc=False):
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class _StepRecord(msgspec.Struct, gc=False):
    data: _StepData


class _ChunkRecord(msgspec.Struct, gc=False):
    data: _ChunkData


class _MessageRecord(msgspec.Struct, rename="camel", gc=False):
    data: _MessageData
    source_event_seqs: list[int] | None = None


class _ToolCallRecord(msgspec.Struct, gc=False):
    data: _ToolCallData


_HEADER: Final = msgspec.json.Decoder(_Header)
_EVENT: Final = msgspec.json.Decoder(_Event)
_STEP: Final = msgspec.json.Decoder(_StepRecord)
_CHUNK: Final = msgspec.json.Decoder(_ChunkRecord)
_MESSAGE: Final = msgspec.json.Decoder(_MessageRecord)
_TOOL_CALL: Final = msgspec.json.Decoder(_ToolCallRecord)


class _Call(msgspec.Struct, gc=False):
    """A tool-call as one record states it (``arguments`` is the raw JSON text)."""

    line: int
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


class _Candidate(msgspec.Struct, gc=False):
    line: int
    turn: int
    step: int
    calls: list[_Call]
    latency: int | None


def _same_args(a: str, b: str) -> bool:
    # Equal text is the common case; otherwise compare values so whitespace is no conflict.
    if a == b:
        return True
    try:
        return bool(loads_strict(a) == loads_strict(b))
    except CanonicalJsonError:
        return False


class _Converter:
    """One pass over the log lines; holds only what cross-checks and timing need."""

    def __init__(self, source: str, preserve_timing: bool, turn: int | None) -> None:
        self.source = source
        self.preserve_timing = preserve_timing
        self.turn = turn
        self.candidates: list[_Candidate] = []
        self.calls: dict[str, _Call] = {}
        self.messages: dict[tuple[int, int], _Candidate] = {}
        self.step_starts: dict[tuple[int, int], tuple[int | float, int]] = {}
        self.lines: list[bytes] = []
        # Chunk seq -> line (1-based): only the first cited chunk's time is ever read, so it is
        # decoded again then instead of being kept for each of the 10^5 chunks of a big log.
        self.chunk_lines: dict[int, int] = {}
        self.chunk_calls: dict[int, _Call] = {}

    def invalid(self, line: int, reason: str) -> InvalidScript:
        return InvalidScript(self.source, reason, line=line)

    def mismatch(self, a: _Call | _Candidate, field: str, line: int) -> ConversionMismatch:
        return ConversionMismatch(
            self.source, turn=a.turn, step=a.step, field=field, lines=(a.line, line)
        )

    def run(self, data: bytes) -> Script:
        lines = data.split(b"\n")
        self.lines = lines
        first = next((i for i, raw in enumerate(lines) if raw.strip(_BLANK)), None)
        if first is None:
            raise InvalidScript(self.source, "empty session log")
        # Indexes of lines nested too deep, found for the whole log in one C-speed pass. The
        # loop stops before the first one and refuses it there, so it needs no per-line test.
        deep = too_deep_lines(data, lines)
        stop = min(deep) if deep else len(lines)
        if first == stop:
            raise self.invalid(first + 1, DEPTH_REASON)
        try:
            self.header(_HEADER.decode(lines[first]), first + 1)
        except msgspec.DecodeError as exc:
            raise self.invalid(first + 1, f"malformed record: {_reason(exc)}") from None
        # One tight loop: a 50 MB log has ~10^5 records and per-record calls dominate the cost.
        decode = _EVENT.decode
        chunk_lines = self.chunk_lines if self.preserve_timing else None
        last = -1
        line = first + 1
        try:
            for line, raw in enumerate(itertools.islice(lines, first + 1, stop), first + 2):
                try:
                    event = decode(raw)
                except msgspec.DecodeError:
                    # Blank lines are allowed; testing for them only here keeps them off the
                    # path of the 10^5 lines that are records.
                    if not raw.strip(_BLANK):
                        continue
                    raise
                seq = event.seq
                if seq is None:
                    seq = event.seq0
                    if seq is None:
                        raise self.invalid(line, "record has no seq")
                if seq <= last:
                    raise self.invalid(line, f"seq {seq} does not follow seq {last}")
                last = seq
                if event.data is _NO_DATA or event.seq is None:
                    continue
                kind = event.type
                if kind == "assistant/chunk":
                    if chunk_lines is not None:
                        chunk_lines[seq] = line
                    # Only tool-call block-ends can disagree with a message.
                    head = event.data
                    if isinstance(head, _Head) and isinstance(head.chunk, _Head):
                        block = head.chunk.block
                        if (
                            head.chunk.type == "block-end"
                            and isinstance(block, _Head)
                            and block.type == "tool-call"
                        ):
                            self.chunk(seq, _CHUNK.decode(raw).data, line)
                elif kind == "assistant/message":
                    self.message(_MESSAGE.decode(raw), line)
                elif kind == "tool/call":
                    self.tool_call(_TOOL_CALL.decode(raw).data, line)
                elif kind == "step/start" and chunk_lines is not None:
                    self.step_start(event, _STEP.decode(raw).data, line)
        except msgspec.DecodeError as exc:
            raise self.invalid(line, f"malformed record: {_reason(exc)}") from None
        if stop < len(lines):
            raise self.invalid(stop + 1, DEPTH_REASON)
        return self.build()

    def header(self, header: _Header, line: int) -> None:
        if header.type != "session":
            raise self.invalid(line, "the first record is not a DSH session header")
        if header.version != SESSION_LOG_VERSION:
            raise self.invalid(
                line, f"unsupported session log version; this reader supports {SESSION_LOG_VERSION}"
            )

    def chunk(self, seq: int, data: _ChunkData, line: int) -> None:
        block = data.chunk.block
        if block is not None:
            self.chunk_calls[seq] = self.call_of(block, data.turn, data.step, line)

    def call_of(self, block: _Block, turn: int, step: int, line: int) -> _Call:
        if block.id is None or block.name is None or block.arguments is None:
            raise self.invalid(line, "incomplete tool-call block (needs id, name and arguments)")
        return _Call(line, turn, step, block.id, block.name, block.arguments)

    def message(self, record: _MessageRecord, line: int) -> None:
        data = record.data
        calls = [
            self.call_of(block, data.turn, data.step, line)
            for block in data.message.content
            if block.type == "tool-call"
        ]
        cited = record.source_event_seqs or []
        if self.chunk_calls:
            # Sets and maps keep this linear: a message may cite 10^5 chunks for 10^4 calls.
            # By id, the first occurrence wins.
            by_id = {call.call_id: call for call in reversed(calls)}
            cited_seqs = set(cited)
            for seq, stated in self.chunk_calls.items():
                if seq in cited_seqs:
                    self.check_cited(stated, data, by_id, line)
        latency = self.latency(data, cited, line)
        self.chunk_calls.clear()
        self.chunk_lines.clear()
        if not calls:
            return
        candidate = _Candidate(line, data.turn, data.step, calls, latency)
        earlier = self.messages.get((data.turn, data.step))
        if earlier is not None:
            self.check_duplicate(earlier, candidate)
            return
        self.messages[(data.turn, data.step)] = candidate
        seen_here: set[str] = set()
        for call in calls:
            first = self.calls.get(call.call_id)
            if first is not None or call.call_id in seen_here:
                raise self.mismatch(first or call, "call identity", line)
            seen_here.add(call.call_id)
            self.calls[call.call_id] = call
        if not data.interrupted and (self.turn is None or self.turn == data.turn):
            self.candidates.append(candidate)

    def check_cited(
        self, stated: _Call, data: _MessageData, by_id: dict[str, _Call], line: int
    ) -> None:
        if stated.turn != data.turn or stated.step != data.step:
            raise self.mismatch(stated, "turn/step", line)
        match = by_id.get(stated.call_id)
        if match is None:
            raise self.mismatch(stated, "call identity", line)
        self.compare(stated, match.name, match.arguments, line)

    def compare(self, stated: _Call, name: str, arguments: str, line: int) -> None:
        if stated.name != name:
            raise self.mismatch(stated, "tool name", line)
        if not _same_args(stated.arguments, arguments):
            raise self.mismatch(stated, "arguments", line)

    def check_duplicate(self, earlier: _Candidate, later: _Candidate) -> None:
        if len(earlier.calls) != len(later.calls):
            raise self.mismatch(earlier, "call identity", later.line)
        for first, second in zip(earlier.calls, later.calls, strict=True):
            if first.call_id != second.call_id:
                raise self.mismatch(earlier, "call identity", later.line)
            self.compare(first, second.name, second.arguments, later.line)

    def tool_call(self, data: _ToolCallData, line: int) -> None:
        call = self.calls.get(data.call_id)
        if call is None:
            owner = self.messages.get((data.turn, data.step))
            if owner is None:
                raise self.invalid(line, "tool/call has no assistant/message for its turn and step")
            raise self.mismatch(owner, "call identity", line)
        if call.turn != data.turn or call.step != data.step:
            raise self.mismatch(call, "turn/step", line)
        self.compare(call, data.name, data.arguments, line)

    def step_start(self, event: _Event, data: _StepData, line: int) -> None:
        key = (data.turn, data.step)
        earlier = self.step_starts.get(key)
        if event.time is None:
            return
        if earlier is not None and earlier[0] != event.time:
            raise ConversionMismatch(
                self.source,
                turn=data.turn,
                step=data.step,
                field="step/start time",
                lines=(earlier[1], line),
            )
        self.step_starts[key] = (event.time, line)

    def latency(self, data: _MessageData, cited: list[int], line: int) -> int | None:
        if not self.preserve_timing or not cited:
            return None
        start = self.step_starts.get((data.turn, data.step))
        chunk_line = self.chunk_lines.get(min(cited))
        if start is None or chunk_line is None:
            return None
        # The line decoded once already; it cannot fail now.
        chunk_time = _EVENT.decode(self.lines[chunk_line - 1]).time
        start_time, start_line = start
        if not isinstance(start_time, int) or not isinstance(chunk_time, int):
            return None
        if chunk_time < start_time:
            raise ConversionMismatch(
                self.source,
                turn=data.turn,
                step=data.step,
                field="time",
                lines=(start_line, chunk_line),
            )
        return chunk_time - start_time

    def build(self) -> Script:
        if self.turn is not None and not self.candidates:
            raise InvalidScript(self.source, f"turn {self.turn} has no tool calls")
        steps: list[dict[str, Any]] = []
        lines: dict[int, int] = {}
        for k, candidate in enumerate(self.candidates):
            if k > 0 and candidate.latency is not None:
                lines[len(steps)] = candidate.line
                steps.append({"wait": candidate.latency})
            lines[len(steps)] = candidate.line
            members = [self.member(call) for call in candidate.calls]
            steps.append(members[0] if len(members) == 1 else {"parallel": members})
        script = {"type": "dsh-mock-script", "version": 1, "steps": steps}
        return validate_script(script, source=self.source, line_of=_line_lookup(lines))

    def member(self, call: _Call) -> dict[str, Any]:
        try:
            args = loads_strict(call.arguments)
        except CanonicalJsonError as exc:
            raise self.invalid(
                call.line,
                f"arguments of call {call.call_id[:80]} are not strict JSON: {exc.reason}",
            ) from None
        return {"tool": call.name, "args": args}


def _line_lookup(lines: dict[int, int]) -> Callable[[str], int | None]:
    def line_of(location: str) -> int | None:
        parts = location.split("/")
        if len(parts) >= 3 and parts[1] == "steps" and parts[2].isdigit():
            return lines.get(int(parts[2]))
        return None

    return line_of


def _reason(exc: msgspec.DecodeError) -> str:
    # msgspec names the JSON path and the expected type, never the offending value.
    return str(exc).split("\n", 1)[0][:200]


def convert_session(
    data: bytes, *, source: str, preserve_timing: bool, turn: int | None = None
) -> Script:
    """Convert decompressed DSH session JSONL into a validated canonical script.

    Args:
        data: the JSONL bytes (header line first).
        source: the source name for diagnostics (never an absolute path).
        preserve_timing: turn reliable model latencies into explicit waits.
        turn: convert only this turn; ``None`` converts every turn in order.

    Returns:
        The validated ``Script``.

    Raises:
        InvalidScript: a malformed record, an incomplete call, bad arguments or tool names.
        ConversionMismatch: records describing the same step disagree.
    """
    with _collector_paused():
        return _Converter(source, preserve_timing, turn).run(data)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cycle collector for one conversion.

    A big log makes ~10^5 short-lived objects and no reference cycle; the collector's passes
    over them find nothing and took 13-23 ms of a 280 ms conversion (scripts/bench_mock).
    Reference counting still frees everything; the previous state is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
