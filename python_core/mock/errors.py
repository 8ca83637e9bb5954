"""Named failures of the mock model.

Every class carries its error code (the ``CODE`` of ``CODE: message``, listed in docs/mock.md);
messages are built from typed fields: tool names, minted call ids, step numbers, JSON-pointer
locations, ``source:line``. Never raw arguments, results or absolute paths.
"""

from __future__ import annotations

from dsh_sidecar.python_core.errors import SidecarError

__all__ = [
    "ConversionMismatch",
    "DuplicateMockTurn",
    "InvalidArgsStop",
    "InvalidCommand",
    "InvalidScript",
    "MidTurnMockCommand",
    "MissingResult",
    "MissingSessionId",
    "MockCancelled",
    "MockError",
    "MockIllegalEvent",
    "PathRefused",
    "PlanClosed",
    "SessionsDisposed",
    "SourceUnreadable",
    "StaleResult",
    "ToolFailedStop",
    "UnknownToolStop",
    "UnsupportedNestedTool",
]


class MockError(SidecarError):
    """Base of every mock-model failure."""

    code = "MOCK_ERROR"


class InvalidCommand(MockError):
    """The ``/mock`` text breaks the slash grammar or holds malformed JSON; no plan starts."""

    code = "INVALID_COMMAND"

    def __init__(self, column: int, reason: str) -> None:
        super().__init__(f"{reason} (column {column})")
        self.column = column
        self.reason = reason


class InvalidScript(MockError):
    """A script, or what an input adapter produced, is not a valid canonical script."""

    code = "INVALID_SCRIPT"

    def __init__(self, source: str, reason: str, *, location: str = "", line: int | None = None):
        where = source if line is None else f"{source}:{line}"
        at = f" at {location}" if location else ""
        super().__init__(f"{where}: {reason}{at}")
        self.source = source
        self.reason = reason
        self.location = location
        self.line = line


class ConversionMismatch(MockError):
    """Two source records that describe the same assistant step disagree."""

    code = "CONVERSION_MISMATCH"

    def __init__(
        self, source: str, *, turn: int, step: int, field: str, lines: tuple[int, int]
    ) -> None:
        super().__init__(
            f"{source}: turn {turn} step {step}: {field} differs between "
            f"line {lines[0]} and line {lines[1]}"
        )
        self.source = source
        self.turn = turn
        self.step = step
        self.field = field
        self.lines = lines


class UnsupportedNestedTool(MockError):
    """Replay would call a nested/subagent tool whose determinism cannot be guaranteed."""

    code = "UNSUPPORTED_NESTED_TOOL"

    def __init__(self, tool: str, location: str) -> None:
        super().__init__(
            f"{tool} at {location} runs nested agents or tools; deterministic replay does not "
            "support it"
        )
        self.tool = tool
        self.location = location


class _ToolStop(MockError):
    """A real tool result reported an error; the plan stopped its later steps.

    ``detail`` follows the step (a runtime code, a schema reason); ``where`` says where the
    full runtime message is.
    """

    def __init__(
        self, tool: str, call_id: str, step: int, skipped: int, detail: str = "", where: str = ""
    ) -> None:
        tail = f"; {where}" if where else ""
        super().__init__(
            f"{tool} ({call_id}) failed at step {step}{detail}; {skipped} later step(s) stopped{tail}"
        )
        self.tool = tool
        self.call_id = call_id
        self.step = step
        self.skipped = skipped


class UnknownToolStop(_ToolStop):
    """The real DSH registry could not resolve a scripted tool."""

    code = "UNKNOWN_TOOL"


class InvalidArgsStop(_ToolStop):
    """The real DSH schema rejected a scripted call's arguments."""

    code = "INVALID_ARGS"


class ToolFailedStop(_ToolStop):
    """Any other error result (policy denial, execution failure, invalid output, abort)."""

    code = "TOOL_FAILED"

    def __init__(
        self, tool: str, call_id: str, step: int, skipped: int, runtime_code: str | None, where: str = ""
    ) -> None:
        detail = "" if runtime_code is None else f" with runtime code {runtime_code}"
        super().__init__(tool, call_id, step, skipped, detail, where)
        self.runtime_code = runtime_code


class StaleResult(MockError):
    """A result that does not belong to the current step: stale, duplicate or foreign."""

    code = "STALE_RESULT"

    def __init__(self, call_id: str, reason: str, step: int) -> None:
        super().__init__(f"result for call {call_id[:80]} at step {step}: {reason}")
        self.call_id = call_id
        self.reason = reason
        self.step = step


class MissingResult(MockError):
    """The model was asked for its next response before every emitted call had a result."""

    code = "MISSING_RESULT"

    def __init__(self, call_id: str, step: int) -> None:
        super().__init__(f"no result for call {call_id} of step {step}")
        self.call_id = call_id
        self.step = step


class MockCancelled(MockError):
    """The mock turn was cancelled through the normal DSH cancellation path."""

    code = "CANCELLED"

    def __init__(self, step: int) -> None:
        super().__init__(f"mock turn cancelled after {step} started step(s)")
        self.step = step


class PlanClosed(MockError):
    """A terminal plan was asked for another response."""

    code = "MOCK_PLAN_CLOSED"

    def __init__(self, state: str) -> None:
        super().__init__(f"the mock plan is {state}; it emits no further response")
        self.state = state


class MockIllegalEvent(MockError):
    """An event the turn machine's table does not allow in the turn's state; nothing changed."""

    code = "MOCK_ILLEGAL_EVENT"

    def __init__(self, state: str, event: str) -> None:
        super().__init__(f"event {event} is not allowed in mock turn state {state}; nothing changed")
        self.state = state
        self.event = event


class MissingSessionId(MockError):
    """A mock plan needs a DSH session id and a mock turn id; there is no shared fallback."""

    code = "MISSING_SESSION_ID"

    def __init__(self, field: str) -> None:
        super().__init__(f"{field} is empty; mock plans are keyed by session and turn")
        self.field = field


class DuplicateMockTurn(MockError):
    """A second plan was started for a (session, turn) key that is still live."""

    code = "DUPLICATE_MOCK_TURN"

    def __init__(self, turn_id: str) -> None:
        super().__init__(f"mock turn {turn_id[:80]} already has a live plan in this session")
        self.turn_id = turn_id


class MidTurnMockCommand(MockError):
    """A ``/mock`` text entered a later step of a running ordinary turn (a steered message).

    rc.8 joins a steered message to the running turn, so a plan started there would take the
    turn's own earlier tool results as its first results. The turn is refused instead.
    """

    code = "MID_TURN_MOCK_COMMAND"

    def __init__(self, step: int) -> None:
        super().__init__(f"a /mock command starts its own turn; this one entered step {step} of a running turn")
        self.step = step


class SessionsDisposed(MockError):
    """The plan registry was disposed with the plugin; nothing new may start."""

    code = "MOCK_DISPOSED"

    def __init__(self) -> None:
        super().__init__("the mock plan registry is disposed")


class PathRefused(MockError):
    """``/mock replay <path>`` names a file the path policy does not allow (docs/mock.md)."""

    code = "PATH_REFUSED"

    def __init__(self, rule: str, explanation: str) -> None:
        super().__init__(f"replay path refused by rule {rule}: {explanation}")
        self.rule = rule
        self.explanation = explanation


class SourceUnreadable(MockError):
    """The replay source could not be read; names the source, never its absolute path."""

    code = "SOURCE_UNREADABLE"

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason
