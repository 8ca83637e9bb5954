"""Named failures of the tool cassette.

Rule: every message is built from structural fields only (tool name, call path, ordinal,
fingerprint, line number, frame kind, file base name). Raw arguments, values, file lines and
absolute paths never reach an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from dsh_sidecar.python_core.errors import FilterRaised, FilterUnresolved, SidecarError, printable

__all__ = [
    "COMPOSITION_CHANGED",
    "ArgumentsUnreadable",
    "CassetteExists",
    "CassetteIOError",
    "CassetteInvalid",
    "CassetteMismatch",
    "ExtraCall",
    "FilterBreaksSchema",
    "FilterRaised",
    "FilterUnresolved",
    "IllegalEvent",
    "IncludeDiffers",
    "NestedSelection",
    "NothingSelected",
    "OutcomeUnrecordable",
    "RecordingIncomplete",
    "RedactedReplay",
    "ReplayPoisoned",
    "RulesDiffer",
    "ShortCircuited",
    "ToolUnregistered",
    "UnconsumedRecords",
    "UnmatchedPattern",
    "UnsupportedConcludesTurn",
    "ValueRejected",
    "fingerprint",
    "rerecord_hint",
]


def fingerprint(digest: str) -> str:
    """Return the short display form ``sha256:<12 hex>…`` of a ``sha256:`` digest."""
    return digest[:19] + "…"


_SECTION = "toolCassette"


def rerecord_hint(name: str, composition: str = "") -> str:
    """The fix for a replay that no longer matches cassette ``name`` (a base name).

    ``composition``: what changed in the plugin composition since the recording
    (``python_core.composition.describe_change``); it leads the fix, as the likely cause.
    """
    rerecord = (
        f"if the new calls are intended, re-record: delete {printable(name)} and run the same task with "
        f'{_SECTION}.mode: record (run API and pytest: record_mode "all")'
    )
    if not composition:
        return rerecord
    return (f"{COMPOSITION_CHANGED}: {composition}; a plugin's hooks may have shaped the recorded calls: "
            f"replay with the plugins it was recorded with, or {rerecord}")


# How a fix line naming a changed composition starts (the run API keeps that part of it).
COMPOSITION_CHANGED = "the composition changed since the recording"


def _call(tool: str, path: str, ordinal: int | None) -> str:
    where = path or "an unknown path"
    if ordinal is None:
        return f"{tool} at {where}"
    return f"{tool} at {where}, ordinal {ordinal}"


class CassetteMismatch(SidecarError):
    """A replayed call differs from the record at its ordinal; ``field`` says which identity.

    For ``args``, ``pointers`` names where the arguments differ (kinds and JSON pointers).
    """

    code = "CASSETTE_MISMATCH"

    def __init__(
        self, tool: str, path: str, ordinal: int, field: str, actual: str, recorded: str, *,
        cassette: str, pointers: str = "", composition: str = "",
    ) -> None:
        if field == "args":
            detail = (
                f"args {fingerprint(actual)} differ from recorded {fingerprint(recorded)}"
                + (f": {pointers}" if pointers else "")
            )
        else:
            detail = f"{field} differs from recorded {recorded}"
        super().__init__(f"{_call(tool, path, ordinal)}: {detail}")
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.field = field
        self.actual = actual
        self.recorded = recorded
        self.pointers = pointers
        self.hint = rerecord_hint(cassette, composition)


_EXAMPLE = {"number": "0", "integer": "0", "string": '""', "boolean": "false", "null": "null",
            "array": "[]", "object": "{}"}


class FilterBreaksSchema(SidecarError):
    """Record: a result filter would turn a value its tool's output schema accepts into one it
    refuses, so the cassette could never replay (the host fails it ``INVALID_TOOL_OUTPUT``).

    The call is refused and the recording is not published; ``wanted_type`` (the schema's type at
    ``pointer``, if it has one) picks the fix's example ``normalize`` value.
    """

    code = "FILTER_BREAKS_SCHEMA"

    def __init__(self, index: int, tool: str, path: str, ordinal: int, pointer: str, becomes: str, wants: str,
                 wanted_type: str | None) -> None:
        super().__init__(
            f"toolCassette.filters[{index}]: {printable(pointer)} of tool {printable(tool)} at {path}, ordinal "
            f"{ordinal} would become {becomes} where its output schema wants {wants}; the call was refused and "
            "the recording is not published"
        )
        self.index = index
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.pointer = pointer
        example = _EXAMPLE.get(wanted_type or "")
        if example is not None:
            self.hint = (
                f'to keep a volatile value valid, give toolCassette.filters[{index}] "normalize": {example} (a fixed '
                f"{wanted_type} every recording keeps), or filter only arguments (\"in\": \"args\")"
            )
        else:
            self.hint = (f'give toolCassette.filters[{index}] a "normalize" value the schema accepts, '
                         'or filter only arguments ("in": "args")')


class ExtraCall(SidecarError):
    """Replay saw a selected call after every record was consumed."""

    code = "CASSETTE_EXTRA_CALL"

    def __init__(
        self, tool: str, path: str, ordinal: int, recorded_calls: int, *, cassette: str, composition: str = "",
    ) -> None:
        super().__init__(
            f"{_call(tool, path, ordinal)}: extra call, the cassette holds {recorded_calls} calls"
        )
        self.hint = rerecord_hint(cassette, composition)
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.recorded_calls = recorded_calls


class ReplayPoisoned(SidecarError):
    """Replay refuses a selected call because an earlier call broke the trajectory."""

    code = "CASSETTE_POISONED"

    def __init__(self, tool: str, path: str, cause: str) -> None:
        super().__init__(
            f"{_call(tool, path, None)}: replay poisoned by an earlier {cause}; "
            "the tool body was not run"
        )
        self.tool = tool
        self.path = path
        self.cause = cause


class UnconsumedRecords(SidecarError):
    """Replay ended with recorded calls that were never requested."""

    code = "CASSETTE_UNCONSUMED"

    def __init__(self, count: int, ordinal: int, tool: str, path: str, *, cassette: str,
                 composition: str = "") -> None:
        super().__init__(
            f"{count} recorded calls not consumed, first {_call(tool, path, ordinal)}"
        )
        self.hint = rerecord_hint(cassette, composition)
        self.count = count
        self.ordinal = ordinal
        self.tool = tool
        self.path = path


class ShortCircuited(SidecarError):
    """A selected call skipped a cassette stage (denied, bypassed or short-circuited).

    ``reason`` is one of the engine's fixed structural sentences; ``bypassed``: the call never
    reached ``tools/execute``, which has a fix of its own.
    """

    code = "CASSETTE_SHORT_CIRCUITED"

    def __init__(self, tool: str, path: str, ordinal: int | None, reason: str, *, bypassed: bool = False) -> None:
        super().__init__(f"{_call(tool, path, ordinal)}: {reason}")
        if bypassed:
            name = printable(tool)
            self.hint = (
                f"{name} never reached the cassette's tools/execute wrapper (denied by a pre-execute "
                "policy or guard, refused by the host, or answered by another plugin first): allow that "
                f"call in this run, or leave {name} out of {_SECTION}.include"
            )
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.reason = reason


class ValueRejected(SidecarError):
    """The current tool definition rejected a replayed value (schema, renderer or meta)."""

    code = "CASSETTE_VALUE_REJECTED"

    def __init__(self, tool: str, path: str, ordinal: int, host_code: str) -> None:
        super().__init__(f"{_call(tool, path, ordinal)}: replayed value rejected with {host_code}")
        name = printable(tool)
        if host_code == "UNKNOWN_TOOL":
            self.hint = (
                f"register {name} during replay too: its current definition validates and "
                "renders the recorded value"
            )
        else:
            self.hint = (
                f"the current output schema, renderer or presentation meta of {name} rejects the "
                "recorded value: make the tool accept it again, or re-record the cassette"
            )
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.host_code = host_code


def _mcp_server(tool: str) -> str | None:
    """The server name of a dsh-mcp-client tool (``mcp__<server>__<tool>``), if it is one."""
    if not tool.startswith("mcp__"):
        return None
    server, sep, _ = tool[5:].partition("__")
    return server if sep and server else None


class ToolUnregistered(SidecarError):
    """A replayed call's tool is registered by no plugin and the cassette could not stand it up."""

    code = "CASSETTE_TOOL_UNREGISTERED"

    def __init__(self, tool: str, path: str, ordinal: int, version: int, standin_error: str | None) -> None:
        server = _mcp_server(tool)
        provider = f"its MCP server {printable(server)} did not start" if server else "no plugin registered it"
        if standin_error is not None:
            why = f"and its stand-in from the cassette failed to register ({standin_error})"
        elif version < 3:
            why = f"and the cassette (version {version}) holds no definition to stand it up"
        else:
            why = "and the cassette holds no definition of it (none was registered when it was recorded)"
        super().__init__(f"{_call(tool, path, ordinal)}: not registered during replay: {provider}, {why}")
        start = (f"start MCP server {printable(server)}" if server
                 else f"enable the plugin row that registers {printable(tool)}")
        self.hint = (
            f"{start} for the replay, or re-record the cassette with this version: it keeps each "
            "selected tool's definition, so a replay needs no server"
            if standin_error is None else
            f"{start} for the replay; the recorded definition is refused by this DSH"
        )
        self.tool = tool
        self.path = path
        self.ordinal = ordinal


class UnmatchedPattern(SidecarError):
    """An ``include`` pattern matches no tool the host registered (a warning at boot)."""

    code = "CASSETTE_PATTERN_UNMATCHED"
    hint = (
        "match the pattern to a tool name the host registers (an MCP tool is "
        "mcp__<server>__<tool>: mcp__notes__* or mcp__*__read*), or drop it"
    )

    def __init__(self, pattern: str, registered: int) -> None:
        super().__init__(
            f"{_SECTION}.include pattern {printable(pattern)} matches none of the {registered} tools "
            "the host registered"
        )
        self.pattern = pattern


class UnsupportedConcludesTurn(SidecarError):
    """A selected call concluded the turn; V1 cannot record or replay that."""

    code = "CASSETTE_CONCLUDES_TURN"

    def __init__(self, tool: str, path: str, ordinal: int) -> None:
        super().__init__(
            f"{_call(tool, path, ordinal)}: concludesTurn is not supported by cassette V1"
        )
        self.hint = (
            f"leave {printable(tool)} out of {_SECTION}.include: cassette V1 cannot replay a call "
            "that concludes the turn"
        )
        self.tool = tool
        self.path = path
        self.ordinal = ordinal


class NestedSelection(SidecarError):
    """A selected call started inside another selected call that is still running.

    Replay serves the outer call without running its body, so the inner one would never
    start: V1 does not record a composite tool together with its child tools.
    """

    code = "CASSETTE_NESTED_SELECTION"
    hint = f"select either the composite tool or its child tools in {_SECTION}.include, not both"

    def __init__(self, tool: str, path: str, outer_tool: str, outer_path: str, outer_ordinal: int) -> None:
        super().__init__(
            f"{_call(tool, path, None)}: started inside the selected call "
            f"{_call(outer_tool, outer_path, outer_ordinal)}; cassette V1 cannot select a composite "
            "tool and its child tools together"
        )
        self.tool = tool
        self.path = path
        self.outer_tool = outer_tool
        self.outer_path = outer_path
        self.outer_ordinal = outer_ordinal


class NothingSelected(SidecarError):
    """A recording ended with no call of a selected tool: publishing it would replay nothing.

    An empty cassette would pass every later replay while the real tools run: fail closed.
    """

    code = "CASSETTE_NOTHING_SELECTED"
    hint = (
        f"match {_SECTION}.include to the tool names the host registers (an MCP tool is "
        "mcp__<server>__<tool>: mcp__notes__* or mcp__*__read*), or drop the tool cassette from this run"
    )

    def __init__(self, name: str, include: Sequence[str]) -> None:
        shown = ", ".join(printable(pattern) for pattern in include[:5])
        more = "" if len(include) <= 5 else f" and {len(include) - 5} more"
        super().__init__(
            f"no call of a selected tool reached the cassette ({_SECTION}.include: {shown}{more}); "
            f"{printable(name)} was not published and nothing was kept"
        )
        self.name = name
        self.include = tuple(include)


class ArgumentsUnreadable(SidecarError):
    """A selected call's arguments have no strict canonical JSON form."""

    code = "CASSETTE_ARGS_UNREADABLE"

    def __init__(self, tool: str, path: str, reason: str) -> None:
        super().__init__(f"{_call(tool, path, None)}: arguments unreadable ({reason})")
        self.tool = tool
        self.path = path
        self.reason = reason


class OutcomeUnrecordable(SidecarError):
    """A selected call's outcome has no strict canonical JSON form or a broken shape."""

    code = "CASSETTE_OUTCOME_UNRECORDABLE"

    def __init__(self, tool: str, path: str, ordinal: int | None, reason: str) -> None:
        super().__init__(f"{_call(tool, path, ordinal)}: outcome unrecordable ({reason})")
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
        self.reason = reason


class RecordingIncomplete(SidecarError):
    """Recording ended without publishing; the ``.partial`` file is kept as evidence."""

    code = "CASSETTE_RECORDING_INCOMPLETE"

    def __init__(self, partial: str, pending: int, cause: str | None) -> None:
        why = f"{pending} calls unfinished" if cause is None else f"recording failed with {cause}"
        super().__init__(f"not published: {why}; kept {partial}")
        self.partial = partial
        self.pending = pending
        self.cause = cause


class CassetteInvalid(SidecarError):
    """The cassette file breaks the format; names the line, frame kind and structural reason."""

    code = "CASSETTE_INVALID"
    hint = "`dsh-tool-cassette verify <file>` shows the first broken frame; re-record the cassette"

    def __init__(
        self, reason: str, *, line: int | None = None, kind: str | None = None,
        ordinal: int | None = None,
    ) -> None:
        where = [] if line is None else [f"line {line}"]
        if kind is not None:
            where.append(kind)
        if ordinal is not None:
            where.append(f"ordinal {ordinal}")
        super().__init__(f"{' '.join(where)}: {reason}" if where else reason)
        self.reason = reason
        self.line = line
        self.kind = kind
        self.ordinal = ordinal


class CassetteExists(SidecarError):
    """Recording refuses to start because the formal file or its ``.partial`` exists."""

    code = "CASSETTE_EXISTS"
    hint = "replay it (toolCassette.mode: replay), or delete it (and any .partial) to record anew"

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} already exists; recording never overwrites")
        self.name = name


FILE_FIELD = f"{_SECTION}.file"


class CassetteIOError(SidecarError):
    """The cassette file could not be read, written or published.

    Raised while a session opens, it names the row field too (``toolCassette.file: cannot …``)
    and carries the fix (see ``at_open``).
    """

    code = "CASSETTE_IO"

    def __init__(
        self, operation: str, name: str, errno_name: str, *, field: str | None = None,
        hint: str = "",
    ) -> None:
        where = "" if field is None else f"{field}: "
        super().__init__(f"{where}cannot {operation} {name}: {errno_name}")
        self.operation = operation
        self.name = name
        self.errno_name = errno_name
        self.field = field
        self.hint = hint

    def at_open(self, mode: str) -> CassetteIOError:
        """This failure as met when a ``mode`` session opens: with the field and the fix."""
        if mode == "replay" and self.errno_name == "no such file":
            hint = (
                f"record it first: run the same task once with {_SECTION}.mode: record, then "
                "replay; or fix the path"
            )
        elif self.errno_name == "is a directory":
            hint = f"name a file inside it ({FILE_FIELD}: {printable(self.name)}/<name>) or fix the path"
        else:
            what = "a readable file" if mode == "replay" else "a file in a writable directory"
            hint = f"point {FILE_FIELD} at {what}"
        return CassetteIOError(
            self.operation, self.name, self.errno_name, field=FILE_FIELD, hint=hint
        )


class IncludeDiffers(SidecarError):
    """Replay config selects other tools than the recording did."""

    code = "CASSETTE_INCLUDE_DIFFERS"
    hint = "use the include list the cassette was recorded with, or re-record it"

    def __init__(self, name: str) -> None:
        super().__init__(f"toolCassette.include differs from the include recorded in {name}")
        self.name = name


class IllegalEvent(SidecarError):
    """The bridge sent an event the session cannot take in its state; nothing changed."""

    code = "CASSETTE_ILLEGAL_EVENT"

    def __init__(self, event: str, state: str) -> None:
        super().__init__(f"{event} is illegal in state {state}")
        self.event = event
        self.state = state


class RulesDiffer(SidecarError):
    """Replay declares other filters or matching rules than the recording's header holds."""

    code = "CASSETTE_RULES_DIFFER"
    hint = "declare the rules the cassette was recorded with (dsh-tool-cassette inspect shows them), or re-record"

    def __init__(self, name: str, field: str, rule: str) -> None:
        super().__init__(f"toolCassette.{field} differs from the {field} recorded in {name}: {rule}")
        self.name = name
        self.field = field
        self.rule = rule


class RedactedReplay(SidecarError):
    """A record to serve holds the filter placeholder and redacted replay was not allowed."""

    code = "CASSETTE_REDACTED_REPLAY"

    def __init__(self, tool: str, path: str, ordinal: int) -> None:
        super().__init__(
            f"{_call(tool, path, ordinal)}: the recorded outcome holds a redacted value; set "
            "toolCassette.allowRedactedReplay: true if the agent may see the placeholder, or "
            "filter only arguments (in: args)"
        )
        self.tool = tool
        self.path = path
        self.ordinal = ordinal
