"""The run API's types: what a run takes (cassettes, rows), what it gives back (``RunResult``
and its parts) and the errors it raises, all in one place.

``RunResult.explain`` is the failure account the pytest plugin and ``RunFailed`` print.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from dsh_sidecar.bridge.api.functions import filter_entry
from dsh_sidecar.bridge.host.discovery import HostNotFound, default_dsh_home
from dsh_sidecar.bridge.host.stderr import stderr_tail
from dsh_sidecar.python_core.errors import SidecarError, printable
from dsh_sidecar.python_core.mock import MockStatus
from dsh_sidecar.python_core.tool_cassette.errors import COMPOSITION_CHANGED

__all__ = [
    "LOGIC_KEYS",
    "RECORD_MODES",
    "CassetteMissing",
    "CassetteNotAFile",
    "CassetteSummary",
    "Diagnostic",
    "FaultsLeftOut",
    "HostNotFound",
    "ModelCassette",
    "RecordMode",
    "RecordedFailure",
    "ReplayDivergence",
    "Row",
    "RunFailed",
    "RunResult",
    "StalePlugin",
    "SubagentCassette",
    "ToolCall",
    "ToolCassette",
    "ToolResult",
]

RecordMode = Literal["none", "once", "all"]
RECORD_MODES: tuple[RecordMode, ...] = ("none", "once", "all")
LOGIC_KEYS = ("filters", "allow_redacted_replay", "ignore", "faults", "stubs", "volatile")
"""The test-logic keys of ``dsh_config``, ``dsh-sidecar run --config`` and ``with_logic``."""
_FAILED_SHOWN = 3
_MESSAGE_CHARS = 300


class ReplayDivergence(UserWarning):
    """A replay that diverged from its recording (``REPLAY_DIVERGED``) without strictness.

    The pytest plugin warns with the line the run printed: a passing test's stderr is never shown.
    """


class StalePlugin(UserWarning):
    """A plugin installed with ``add-local-plugin`` whose source changed since."""


class RecordedFailure(UserWarning):
    """A recording that holds failed calls (``TOOL_FAILURE_RECORDED``, ``SUBAGENT_CHILD_FAILED``).

    The pytest plugin warns with it when the test does not fail on that run: recording a failure
    is legitimate, but a passing test's stderr is never shown.
    """


class FaultsLeftOut(UserWarning):
    """A recording run was given a fault overlay (replay only): the run left it out.

    The pytest plugin warns with it, once per run that left one out (``FAULTS_LEFT_OUT``).
    """


class CassetteMissing(SidecarError):
    """Record mode ``none`` and the cassette does not exist."""

    code = "CASSETTE_MISSING"

    def __init__(self, field: str, name: str, hint: str) -> None:
        super().__init__(f"{field}: {name} does not exist (record mode none); {hint}")
        self.field = field


class CassetteNotAFile(SidecarError):
    """A cassette path names something that is not a regular file."""

    code = "CASSETTE_IO"

    def __init__(self, field: str, name: str) -> None:
        super().__init__(f"{field}: {name} is not a regular file; name a file path")


class ToolCassette(msgspec.Struct, frozen=True, kw_only=True):
    """A tool cassette for one run: the file and the tools it records or replays.

    The test-logic rules (docs/test-logic.md) are the ``toolCassette`` row keys of the same
    meaning: ``filters`` (``"credentials"``, ``{"key"|"pointer"|"regex"|"call": ..., "tool"?, "in"?, "normalize"?}``,
    or a module-level function, which becomes ``{"call": function}``),
    ``allow_redacted_replay``, ``ignore`` (tool name to the argument pointers matching leaves
    out), ``faults`` (a replay overlay ``{"name": ..., "rules": [...]}``) and ``volatile`` (tool name
    to the result pointers a replay's divergence check leaves out).
    """

    file: str
    include: list[str]
    filters: list[Any] = msgspec.field(default_factory=list)
    allow_redacted_replay: bool = False
    ignore: dict[str, list[str]] = msgspec.field(default_factory=dict)
    faults: dict[str, Any] | None = None
    volatile: dict[str, list[str]] = msgspec.field(default_factory=dict)

    def with_logic(self, logic: Mapping[str, Any]) -> ToolCassette:
        """This cassette with the tool cassette keys of a test-logic mapping (``LOGIC_KEYS``)."""
        return msgspec.structs.replace(
            self, filters=list(logic.get("filters", self.filters)),
            allow_redacted_replay=bool(logic.get("allow_redacted_replay", self.allow_redacted_replay)),
            ignore=dict(logic.get("ignore", self.ignore)), faults=logic.get("faults", self.faults),
            volatile=dict(logic.get("volatile", self.volatile)),
        )

    def section(self) -> dict[str, Any]:
        """The optional ``toolCassette`` row keys this cassette declares."""
        keys: dict[str, Any] = {}
        if self.filters:
            keys["filters"] = [filter_entry(index, entry) for index, entry in enumerate(self.filters)]
        if self.allow_redacted_replay:
            keys["allowRedactedReplay"] = True
        if self.ignore:
            keys["match"] = {tool: {"ignore": list(pointers)} for tool, pointers in self.ignore.items()}
        if self.faults is not None:
            keys["faults"] = self.faults
        if self.volatile:
            keys["volatile"] = {tool: list(pointers) for tool, pointers in self.volatile.items()}
        return keys


class SubagentCassette(msgspec.Struct, frozen=True, kw_only=True):
    """A subagent cassette for one run.

    ``provider`` and ``options`` are the ``subagentCassette`` row keys (docs); ``one_shot`` adds
    the shipped patch that puts the delegation tools in one-shot mode, which recording needs.
    """

    file: str
    provider: dict[str, Any] = msgspec.field(default_factory=lambda: {"transparent": True})
    options: dict[str, Any] = msgspec.field(default_factory=dict)
    one_shot: bool = True


class ModelCassette(msgspec.Struct, frozen=True, kw_only=True):
    """A model cassette for one run: every provider ``stream()`` call recorded or replayed.

    ``options`` are the other ``modelCassette`` row keys (``requestView``, ``timing``,
    ``providers``, ``filters``; see docs/model-cassette-format.md).
    """

    file: str
    options: dict[str, Any] = msgspec.field(default_factory=dict)


class Row(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A profile row for the run: an existing row enabled with ``config``, or a new one (``insert``).

    An id-targeted patch replaces an existing row's ``config``; for an id the profile does not
    have, rc.8 only warns, so a new row (an MCP server, say) needs ``insert=True``.
    """

    id: str
    name: str
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    insert: bool = False


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """A tool call of the run's own session: tool, structural path, decoded arguments."""

    call_id: str
    tool: str
    path: str | None
    arguments: Any
    turn: int | None = None
    step: int | None = None


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """A tool result the model saw: text ``output``, structured ``value``, runtime error code."""

    call_id: str
    tool: str
    path: str | None
    is_error: bool
    output: str
    value: Any = None
    error_code: str | None = None
    error_message: str | None = None


class CassetteSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What one cassette did in the run; ``published`` is true only for a complete recording."""

    kind: Literal["tool", "subagent", "model"]
    file: str
    record_mode: RecordMode
    mode: Literal["record", "replay"]
    selected: int = 0
    recorded: int = 0
    consumed: int = 0
    unconsumed: int = 0
    missed: int = 0
    poisoned: bool = False
    published: bool = False
    injected: int = 0
    """Replayed calls a fault overlay failed on purpose (``faults`` names the overlay)."""
    faults: str | None = None
    failed: int = 0
    """Recorded calls (child runs) that ended in an error: every replay serves those failures."""
    filtered: bool = False
    """The cassette declares result filters: a failure account does not print the tools' messages."""
    stood_up: list[str] = msgspec.field(default_factory=list)
    """Tool cassette replay: the recorded tools stood up because no plugin registered them (an
    imported cassette's, all of its tools: docs/import.md)."""


class Diagnostic(msgspec.Struct, frozen=True):
    """A named error that failed the run (``code``, structural ``message``)."""

    code: str
    message: str


class RunResult(msgspec.Struct, frozen=True, kw_only=True):
    """One finished headless run (``dsh-sidecar run --json`` prints exactly this)."""

    exit_code: int
    timed_out: bool
    duration_ms: int
    task: str
    stdout: str
    stderr: str
    final_text: str
    tool_calls: list[ToolCall]
    tool_results: list[ToolResult]
    mock: list[MockStatus]
    tool_cassette: CassetteSummary | None
    subagent_cassette: CassetteSummary | None
    errors: list[Diagnostic]
    model_cassette: CassetteSummary | None = None
    session_id: str | None
    session_path: str | None
    child_session_ids: list[str]
    events: list[dict[str, Any]]
    trace: str | None = None
    """The trace page this run wrote (``run(trace=PATH)``; docs/trace.md), its JSON beside it."""

    @property
    def ok(self) -> bool:
        """The run exited 0 and did not time out."""
        return self.exit_code == 0 and not self.timed_out

    def calls(self, tool: str | None = None) -> list[ToolCall]:
        """The run's tool calls, optionally of one tool."""
        return [c for c in self.tool_calls if tool is None or c.tool == tool]

    def results(self, tool: str | None = None) -> list[ToolResult]:
        """The run's tool results, optionally of one tool."""
        return [r for r in self.tool_results if tool is None or r.tool == tool]

    def result(self, tool: str) -> ToolResult:
        """The one result of ``tool``.

        Raises:
            LookupError: ``tool`` has no result, or more than one.
        """
        found = self.results(tool)
        if len(found) != 1:
            raise LookupError(f"{tool}: expected exactly 1 result, the run has {len(found)}")
        return found[0]

    def explain(self, rerecord: str | None = None) -> str:
        """A short account of a failed run: exit, named errors, cassettes, failed tools' own
        messages, stderr tail, the command that shows the session log, the fix."""
        head = "timed out" if self.timed_out else f"exited {self.exit_code}"
        lines = [f"dsh run {head}: {self.task[:80]}"]
        lines += [f"  {e.code}: {e.message}" for e in self.errors[:4]]
        for summary in (self.tool_cassette, self.subagent_cassette, self.model_cassette):
            if summary is not None:
                lines.append("  " + _summary_line(summary))
        known = [e.message for e in self.errors]
        lines += _failed_tools(self.tool_results, known, self.tool_cassette)
        cassettes = (self.tool_cassette, self.subagent_cassette, self.model_cassette)
        rerecord_line = bool(rerecord) and any(s is not None and s.mode == "replay" for s in cassettes)
        tail = stderr_tail(self.stderr, known=known)
        if rerecord_line:
            # The caller's own re-record command replaces the sidecar's generic one.
            # A changed composition is kept: it is the likely cause, not a re-record command.
            tail = [line.split(", or if the new calls are intended")[0]
                    if line.startswith(f"fix: {COMPOSITION_CHANGED}") else line
                    for line in tail]
            tail = [line for line in tail if not (line.startswith("fix: ") and "re-record" in line)]
        if tail:
            lines.append("  stderr (last lines):")
            lines += [f"    {line}" for line in tail]
        show = self.show_command()
        if show is not None:
            lines.append(f"  session log: {show}")
        if rerecord_line:
            lines.append(f"  to re-record: {rerecord}")
        return "\n".join(lines)

    def show_command(self) -> str | None:
        """The ``dsh-sidecar sessions show`` command that shows this run's session log, pasted here.

        It names the full id, which ``sessions show`` finds in any folder's sessions (a pytest
        run's folder is a temporary one), so no absolute path is printed; the DSH home only when
        the command would not find this one by itself (``default_dsh_home``), relative to here.
        """
        if self.session_id is None or self.session_path is None:
            return None
        command = f"dsh-sidecar sessions show {shlex.quote(self.session_id)}"
        # <home>/sessions/<project key>/<session folder>/<log>
        home = Path(self.session_path).parents[3]
        if home.resolve() != default_dsh_home().resolve():
            command += f" --dsh-home {shlex.quote(os.path.relpath(home))}"
        return command

    def check(self) -> RunResult:
        """Return ``self`` if the run succeeded.

        Raises:
            RunFailed: the run exited non-zero or timed out (the message is ``explain()``).
        """
        if not self.ok:
            raise RunFailed(self)
        return self


class RunFailed(SidecarError):
    """A run that was expected to succeed did not."""

    code = "RUN_FAILED"

    def __init__(self, result: RunResult, rerecord: str | None = None) -> None:
        super().__init__(result.explain(rerecord))
        self.result = result


def _summary_line(s: CassetteSummary) -> str:
    if s.mode == "record":
        counts = f"{s.selected} selected, {s.recorded} recorded, published: {'yes' if s.published else 'no'}"
    else:
        counts = f"{s.selected} selected, {s.consumed} consumed, {s.unconsumed} unconsumed"
        counts += f", poisoned: {'yes' if s.poisoned else 'no'}" if s.kind != "subagent" else f", {s.missed} missed"
    return f"{s.kind} cassette {s.file} ({s.mode}, record mode {s.record_mode}): {counts}"


def _failed_tools(results: Sequence[ToolResult], known: Sequence[str], tools: CassetteSummary | None) -> list[str]:
    """One line per failed tool result (the first few): tool, path and the tool's own message.

    The message is the text the model saw, as the session log holds it; a refusal of the
    sidecar's own (a named error above) is not repeated, and with result filters declared the
    message is not printed (the log holds it unfiltered).
    """
    failed = [r for r in results if r.is_error and not any(k and k in r.output for k in known)]
    lines = []
    for r in failed[:_FAILED_SHOWN]:
        where = f"{r.tool or '?'}" + (f" at {r.path}" if r.path else "") + (
            f" (runtime code {r.error_code})" if r.error_code else "")
        if tools is not None and tools.filtered:
            lines.append(f"  {where} failed; its message is not shown (the tool cassette filters results)")
            continue
        message = printable(" ".join((r.error_message or r.output).split()))
        cut = message[:_MESSAGE_CHARS] + ("…" if len(message) > _MESSAGE_CHARS else "")
        lines.append(f"  {where} failed: {cut}")
    if len(failed) > _FAILED_SHOWN:
        lines.append(f"  and {len(failed) - _FAILED_SHOWN} more failed tool result(s)")
    return lines
