"""The sans-I/O mock plan: one scripted model response per call (docs/mock.md, "Plan").

Rule: this file owns every plan transition (``TRANSITIONS``). The bridge asks
``next_response(observed)`` each time the agent loop calls the mock model, sleeps the returned
``wait_ms`` (cancellation-aware), then streams the action; the plan never sleeps, never reads
a clock and never runs a tool. Results are judged before anything changes: a stale, duplicate
or foreign result, a missing one, or any ``isError`` result makes the plan ``failed`` and no
later step is emitted. A terminal plan raises ``PlanClosed`` on every later ``next_response``;
``cancel`` is a no-op once terminal.

Timing: the first executable step has no wait; each later step waits its explicit wait
(replaced by ``overwrite_wait_ms`` when given) or ``default_gap_ms`` when the script has no
wait on that edge; the final text response has no wait (it is presentation, not a step).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from dsh_sidecar.python_core.errors import ConfigError, SidecarError
from dsh_sidecar.python_core.mock.errors import (
    ConversionMismatch,
    InvalidArgsStop,
    InvalidCommand,
    InvalidScript,
    MissingResult,
    MissingSessionId,
    MockCancelled,
    MockError,
    PlanClosed,
    SourceUnreadable,
    StaleResult,
    ToolFailedStop,
    UnknownToolStop,
    UnsupportedNestedTool,
)
from dsh_sidecar.python_core.mock.reasons import full_message_hint, schema_reasons
from dsh_sidecar.python_core.mock.script import MAX_WAIT_MS, Script, executable_steps, script_id
from dsh_sidecar.python_core.session_records import MockStatus, Mode, Phase, PlanState

__all__ = [
    "DEFAULT_GAP_MS",
    "TRANSITIONS",
    "Action",
    "EmitFinal",
    "EmitToolCalls",
    "MockPlan",
    "MockStatus",
    "ObservedResult",
    "Phase",
    "PlanState",
    "PlannedCall",
    "Stop",
    "auxiliary_answer",
    "error_location",
    "refused_status",
]

DEFAULT_GAP_MS: Final = 100


_PHASE: Final[dict[PlanState, Phase]] = {
    "ready": "queued",
    "awaiting-results": "running",
    "succeeded": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
}

# Every legal transition; an event not listed for a state is refused without a state change.
TRANSITIONS: Final[dict[PlanState, dict[str, frozenset[PlanState]]]] = {
    "ready": {
        "respond": frozenset({"awaiting-results", "failed"}),
        "cancel": frozenset({"cancelled"}),
    },
    "awaiting-results": {
        "respond": frozenset({"awaiting-results", "succeeded", "failed"}),
        "cancel": frozenset({"cancelled"}),
    },
    "succeeded": {"cancel": frozenset({"succeeded"})},
    "failed": {"cancel": frozenset({"failed"})},
    "cancelled": {"cancel": frozenset({"cancelled"})},
}


class PlannedCall(msgspec.Struct, frozen=True):
    """One complete tool-call block: a freshly minted id, the name, JSON-text arguments."""

    call_id: str
    name: str
    arguments_json: str


class EmitToolCalls(msgspec.Struct, frozen=True):
    """Sleep ``wait_ms``, then stream one complete block per call and ``finish: tool-calls``."""

    wait_ms: int
    calls: tuple[PlannedCall, ...]


class EmitFinal(msgspec.Struct, frozen=True):
    """Sleep ``wait_ms``, then stream one full text delta and ``finish: stop``."""

    wait_ms: int
    text: str


class Stop(msgspec.Struct, frozen=True):
    """End the mock turn with ``error`` (its ``code`` is the error class, e.g. ``TOOL_FAILED``)."""

    error: MockError


Action = EmitToolCalls | EmitFinal | Stop


class ObservedResult(msgspec.Struct, frozen=True):
    """A tool result the model sees since the plan's previous response.

    ``session_id`` is the session the result was observed in, when the bridge knows it; a
    result from another session is refused. ``error_message`` is the runtime's message.
    """

    call_id: str
    tool: str
    is_error: bool
    error_code: str | None = None
    session_id: str | None = None
    error_message: str | None = None
    """The runtime's error message; only schema reasons of known shapes are ever shown."""


def _checked_ms(field: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WAIT_MS:
        raise ConfigError(field, f"must be an integer from 0 to {MAX_WAIT_MS}")
    return value


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class MockPlan:
    """The turn-local plan of one accepted ``/mock`` command."""

    def __init__(
        self,
        script: Script,
        *,
        session_id: str,
        turn_id: str,
        mode: Mode,
        source_format: str,
        overwrite_wait_ms: int | None = None,
        default_gap_ms: int = DEFAULT_GAP_MS,
        source_name: str | None = None,
        call_id_tag: str | None = None,
    ) -> None:
        """Build a plan; ``turn_id`` must be unique per mock turn (it prefixes call ids).

        ``call_id_tag`` goes before the turn id in every minted call id: a replay passes a digest
        of its source, so it never re-emits the ids the source's own mock turn minted.

        Raises:
            MissingSessionId: ``session_id`` or ``turn_id`` is empty.
            ConfigError: a wait value is negative, not an integer or too large.
        """
        if not session_id:
            raise MissingSessionId("session_id")
        if not turn_id:
            raise MissingSessionId("turn_id")
        self.session_id = session_id
        self.turn_id = turn_id
        self.mode: Mode = mode
        self.source_format = source_format
        self.source_name = source_name
        self._overwrite = _checked_ms("overwrite_wait_ms", overwrite_wait_ms)
        gap = _checked_ms("default_gap_ms", default_gap_ms)
        self._gap = DEFAULT_GAP_MS if gap is None else gap
        self._script_id = script_id(script)
        self._steps = executable_steps(script)
        prefix = "mock-" if call_id_tag is None else f"mock-{call_id_tag}-"
        self._calls = tuple(
            tuple(
                PlannedCall(
                    call_id=f"{prefix}{turn_id}-{k + 1}-{i}",
                    name=member.tool,
                    arguments_json=bytes(member.args).decode(),
                )
                for i, member in enumerate(step.calls)
            )
            for k, step in enumerate(self._steps)
        )
        self._call_step = {call.call_id: k for k, calls in enumerate(self._calls) for call in calls}
        self._state: PlanState = "ready"
        self._started = 0
        self._completed = 0
        self._error: MockError | None = None
        self._failed_tool: str | None = None
        self._runtime_code: str | None = None
        self._cancelled_in_wait = False

    @property
    def state(self) -> PlanState:
        """The current state (see ``TRANSITIONS``)."""
        return self._state

    @property
    def is_terminal(self) -> bool:
        """Whether the plan has succeeded, failed or been cancelled."""
        return self._state in ("succeeded", "failed", "cancelled")

    def _move(self, event: str, target: PlanState) -> None:
        allowed = TRANSITIONS[self._state].get(event, frozenset())
        if target not in allowed:
            raise PlanClosed(self._state)
        self._state = target

    def next_response(self, observed: Sequence[ObservedResult]) -> Action:
        """Judge the results of the previous response and return the next scripted response.

        Args:
            observed: the tool results that arrived since this plan's previous response, in
                any order (empty on the first call).

        Returns:
            ``EmitToolCalls`` for the next executable step, ``EmitFinal`` after the last one,
            or ``Stop`` when a result failed or does not belong to the current step.

        Raises:
            PlanClosed: the plan is already terminal (nothing changes).
        """
        if "respond" not in TRANSITIONS[self._state]:
            raise PlanClosed(self._state)
        error = self._judge(observed)
        if error is not None:
            self._move("respond", "failed")
            self._error = error
            return Stop(error=error)
        if self._state == "awaiting-results":
            self._completed += 1
        if self._started == len(self._steps):
            self._move("respond", "succeeded")
            return EmitFinal(wait_ms=0, text=self._summary())
        self._move("respond", "awaiting-results")
        action = EmitToolCalls(
            wait_ms=self._wait_before(self._started), calls=self._calls[self._started]
        )
        self._started += 1
        return action

    def _judge(self, observed: Sequence[ObservedResult]) -> MockError | None:
        current = self._started - 1
        step = self._started
        expected = {call.call_id: call for call in self._calls[current]} if current >= 0 else {}
        seen: dict[str, ObservedResult] = {}
        for result in observed:
            reason = self._foreign(result, expected, seen)
            if reason is not None:
                return StaleResult(result.call_id, reason, step)
            seen[result.call_id] = result
        for call_id in expected:
            if call_id not in seen:
                return MissingResult(call_id, step)
        for call in expected.values():
            result = seen[call.call_id]
            if result.is_error:
                self._failed_tool = call.name
                self._runtime_code = result.error_code
                return _stop_for(result, step, len(self._steps) - step, self.session_id)
        return None

    def _foreign(
        self,
        result: ObservedResult,
        expected: dict[str, PlannedCall],
        seen: dict[str, ObservedResult],
    ) -> str | None:
        if result.session_id is not None and result.session_id != self.session_id:
            return "the result belongs to another session"
        if result.call_id in seen:
            return "duplicate result"
        call = expected.get(result.call_id)
        if call is not None:
            return None if result.tool == call.name else "the tool name differs from the call"
        if result.call_id in self._call_step:
            return "the result belongs to an earlier step"
        return "the call was not issued by this mock turn"

    def _wait_before(self, index: int) -> int:
        if index == 0:
            return 0
        explicit = self._steps[index].wait_before
        if explicit is None:
            return self._gap
        return explicit if self._overwrite is None else self._overwrite

    def _summary(self) -> str:
        calls = sum(len(calls) for calls in self._calls)
        return (
            f"mock {self.mode} complete: {_plural(len(self._steps), 'step')}, "
            f"{_plural(calls, 'tool call')}"
        )

    def cancel(self, *, during_wait: bool = False) -> None:
        """Cancel the plan; a no-op once it is terminal.

        ``during_wait``: the bridge was still sleeping the wait before the latest step, so that
        step's calls never reached the runtime and the progress shown stays at the step before.
        """
        if self.is_terminal:
            return
        self._move("cancel", "cancelled")
        self._error = MockCancelled(self._started)
        self._cancelled_in_wait = during_wait

    def status(self) -> MockStatus:
        """Return the serializable progress record for ``mock/status``."""
        error = self._error
        failed_step = getattr(error, "step", None) if self._state == "failed" else None
        stopped_by_tool = self._state == "failed" and self._failed_tool is not None
        if self._state == "succeeded":
            step = len(self._steps)
        elif self._cancelled_in_wait:
            step = self._started - 1
        else:
            step = failed_step if failed_step is not None else self._started
        return MockStatus(
            session_id=self.session_id,
            turn_id=self.turn_id,
            mode=self.mode,
            source_format=self.source_format,
            source_name=self.source_name,
            script_id=self._script_id,
            step_count=len(self._steps),
            steps_started=self._started,
            steps_completed=self._completed,
            state=self._state,
            error_code=error.code if error is not None else None,
            error_message=error.message if error is not None else None,
            failed_tool=self._failed_tool,
            failed_step=failed_step,
            steps_stopped=len(self._steps) - self._started if self._state == "failed" else 0,
            phase=_PHASE[self._state],
            step=step,
            card="tool-stop" if stopped_by_tool else None,
            runtime_code=self._runtime_code if stopped_by_tool else None,
        )


def error_location(error: SidecarError) -> str | None:
    """Where in its source a refused command or script is wrong, as the invalid-script card shows it."""
    if isinstance(error, InvalidCommand):
        return f"column {error.column}"
    if isinstance(error, InvalidScript):
        where = error.source if error.line is None else f"{error.source}:{error.line}"
        return f"{where} at {error.location}" if error.location else where
    if isinstance(error, ConversionMismatch):
        return f"{error.source}:{error.lines[0]} and line {error.lines[1]}"
    if isinstance(error, UnsupportedNestedTool):
        return error.location
    if isinstance(error, SourceUnreadable):
        return error.source
    return None


def refused_status(
    error: SidecarError,
    *,
    session_id: str,
    turn_id: str,
    mode: Mode | None,
    source_name: str | None = None,
) -> MockStatus:
    """Return the terminal ``mock/status`` of a turn refused before any tool ran."""
    return MockStatus(
        session_id=session_id,
        turn_id=turn_id,
        mode=mode,
        source_format="command" if mode != "replay" else "unknown",
        source_name=source_name,
        script_id="",
        step_count=0,
        steps_started=0,
        steps_completed=0,
        state="failed",
        error_code=error.code,
        error_message=error.message,
        phase="failed",
        card="invalid-script",
        location=error_location(error),
    )


def _stop_for(result: ObservedResult, step: int, skipped: int, session_id: str) -> MockError:
    code = result.error_code
    if code == "UNKNOWN_TOOL":
        return UnknownToolStop(result.tool, result.call_id, step, skipped)
    if code == "INVALID_ARGS":
        reasons, complete = schema_reasons(result.error_message)
        return InvalidArgsStop(
            result.tool, result.call_id, step, skipped, "" if reasons is None else f": {reasons}",
            "" if complete else full_message_hint(session_id),
        )
    # Runtime codes are host identifiers; cap them so a message stays one readable line.
    return ToolFailedStop(
        result.tool, result.call_id, step, skipped, code[:64] if code else None, full_message_hint(session_id)
    )


_AUXILIARY: Final = {
    "session-title": "Mock session",
    "compaction": "Mock turn: deterministic scripted tool calls; nothing to summarize.",
}


def auxiliary_answer(purpose: str) -> str:
    """Return the short fixed text for an auxiliary model call; it never advances a plan."""
    return _AUXILIARY.get(purpose, "Mock")
