"""The run API: one headless DSH rc.8 turn with cassettes and the mock in, a typed result out.

    from dsh_sidecar.bridge.run import ToolCassette, run

    result = run(
        '/mock run weather_lookup({"city": "Paris"})',
        tool_cassette=ToolCassette("weather.cassette.ndjson", include=["weather_lookup"]),
        record_mode="once",
    )
    assert result.result("weather_lookup").output == "Paris: sunny, 21C"

Each run writes its own ``--patch`` layer and run report in a private temporary folder, finds
its session logs by the ids the sidecar reports (one path computation, no folder scan), and
runs DSH in a new process group that a timeout kills as a whole. Record modes follow
pytest-recording: ``none`` replays and never records, ``once`` records only a missing
cassette, ``all`` re-records. A recording goes to a private file beside the cassette and is
published (create-only for ``once``, atomic replace for ``all``) only when the cassette reports
a complete recording and the sidecar shut down without errors (not killed, not timed out);
otherwise the old cassette is left untouched. The turn's own outcome does not matter: a turn
that fails on purpose (a recorded tool error) is a complete recording.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec

from dsh_sidecar.bridge.hostenv import HostEnv, host_env
from dsh_sidecar.bridge.install import PACKAGE, heal_module_fallback, stale_local_plugins
from dsh_sidecar.bridge.report import CassetteCounts, RunReport, read_report
from dsh_sidecar.bridge.session_staging import SHARED_SESSIONS_VAR, STAGING_DIR, settle, staging_root
from dsh_sidecar.bridge.warm_pool import WarmBoot, WarmOutcome, WarmPool, default_pool
from dsh_sidecar.python_core.errors import SidecarError, printable
from dsh_sidecar.python_core.mock import MockStatus, Script, encode_script, validate_script
from dsh_sidecar.python_core.session_log import (
    SessionLogInvalid,
    final_text,
    mock_statuses,
    read_session_log,
    session_log_candidates,
    tool_calls,
    tool_results,
)
from dsh_sidecar.python_core.stubs import StubFailure
from dsh_sidecar.python_core.subagent_cassette.cli import ONE_SHOT_PATCH

__all__ = [
    "LOGIC_KEYS",
    "CassetteMissing",
    "CassetteSummary",
    "Diagnostic",
    "HostNotFound",
    "ModelCassette",
    "RecordMode",
    "RecordedFailure",
    "Row",
    "RunFailed",
    "RunResult",
    "StalePlugin",
    "StubFailure",
    "SubagentCassette",
    "ToolCall",
    "ToolCassette",
    "ToolResult",
    "WarmPool",
    "default_dsh_home",
    "find_host",
    "run",
    "unused_rows",
]

RecordMode = Literal["none", "once", "all"]
LOGIC_KEYS = ("filters", "allow_redacted_replay", "ignore", "faults", "stubs")
"""The test-logic keys of ``dsh_config``, ``dsh-sidecar run --config`` and ``with_logic``."""
RECORD_MODES: tuple[RecordMode, ...] = ("none", "once", "all")
HOST_ENV_VAR = "DSH_SIDECAR_HOST"
# Node's compile cache for runs, under the host prefix (one per installed host and Node).
COMPILE_CACHE_DIR = "node-compile-cache"
# Rows a run composes only when it can use them (docs/cold-boot.md). rc.8 mounts the pi-ai
# multi-provider adapter dormant (no route) until a `llm-pi-ai:` settings section names one;
# dormant, it only loads its provider SDKs (~0.25 s of a ~1.1 s boot).
DORMANT_PROVIDER_ROW = "llm-pi-ai"
# Where a pi-ai route can come from: the settings row (its document path) or the adapter's row.
_PROVIDER_SOURCES = (DORMANT_PROVIDER_ROW, "dsh-settings-file")
_SETTINGS_DOCUMENTS = ("settings.yaml", "settings.yml", "settings.json")
_SETTINGS_ROW = re.compile(r"""\bid["']?\s*:\s*["']?settings\b""")
_KILL_GRACE_S = 5.0
# A warm host's runner replaces rc.8's one-shot runner (docs/warm-host.md).
WARM_PATCH = '- {"id": "headless-runner", "disabled": true}\n'
# rc.8 prints nothing to stderr on success; a failure's useful lines are its last ones.
_STDERR_TAIL = 6
# What Node prints around an uncaught error besides its message: frames, source excerpts, carets.
_NODE_NOISE = re.compile(r"^(at |Node\.js v|file://\S+:\d+$|\^+$|[{}]$|throw |\[cause\]: )")


class StalePlugin(UserWarning):
    """A plugin installed with ``add-local-plugin`` whose source changed since."""


class RecordedFailure(UserWarning):
    """A recording that holds failed calls (``TOOL_FAILURE_RECORDED``, ``SUBAGENT_CHILD_FAILED``).

    The pytest plugin warns with it when the test does not fail on that run: recording a failure
    is legitimate, but a passing test's stderr is never shown.
    """


class HostNotFound(SidecarError):
    """No installed DSH host was found."""

    code = "HOST_NOT_FOUND"


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
    meaning: ``filters`` (``"credentials"``, ``{"key"|"pointer"|"regex"|"call": ..., "tool"?, "in"?}``,
    or a module-level function, which becomes ``{"call": function}``),
    ``allow_redacted_replay``, ``ignore`` (tool name to the argument pointers matching leaves
    out) and ``faults`` (a replay overlay ``{"name": ..., "rules": [...]}``).
    """

    file: str
    include: list[str]
    filters: list[Any] = msgspec.field(default_factory=list)
    allow_redacted_replay: bool = False
    ignore: dict[str, list[str]] = msgspec.field(default_factory=dict)
    faults: dict[str, Any] | None = None

    def with_logic(self, logic: Mapping[str, Any]) -> ToolCassette:
        """This cassette with the tool cassette keys of a test-logic mapping (``LOGIC_KEYS``)."""
        return msgspec.structs.replace(
            self, filters=list(logic.get("filters", self.filters)),
            allow_redacted_replay=bool(logic.get("allow_redacted_replay", self.allow_redacted_replay)),
            ignore=dict(logic.get("ignore", self.ignore)), faults=logic.get("faults", self.faults),
        )

    def section(self) -> dict[str, Any]:
        """The optional ``toolCassette`` row keys this cassette declares."""
        keys: dict[str, Any] = {}
        if self.filters:
            keys["filters"] = [_filter_entry(index, entry) for index, entry in enumerate(self.filters)]
        if self.allow_redacted_replay:
            keys["allowRedactedReplay"] = True
        if self.ignore:
            keys["match"] = {tool: {"ignore": list(pointers)} for tool, pointers in self.ignore.items()}
        if self.faults is not None:
            keys["faults"] = self.faults
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
    """Tool cassette replay: the recorded tools stood up because no plugin registered them."""


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
        tail = _stderr_tail(self.stderr, known=known)
        if rerecord_line:
            # The caller's own re-record command replaces the sidecar's generic one.
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


_SUMMARY_PREFIXES = ("tool cassette ", "subagent cassette ", "model cassette ")
# The sidecar's pointer to a failed tool's message: the account shows the message and a command
# that works where the user is instead.
_FULL_MESSAGE = re.compile(r"; its full message is in the session log: dsh-sidecar sessions show \S+$")
_FAILED_SHOWN = 3
_MESSAGE_CHARS = 300


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


def _stderr_tail(stderr: str, *, known: Sequence[str]) -> list[str]:
    """The last useful stderr lines: no JS stack frames, no repeats, nothing already shown."""
    seen: list[str] = []
    for raw in stderr.splitlines():
        line = raw.strip()
        for prefix in ("dsh-sidecar: ", "dsh: "):
            line = line.removeprefix(prefix)
        line = _FULL_MESSAGE.sub("", line)
        if (
            not line or _NODE_NOISE.match(line) or line.startswith(_SUMMARY_PREFIXES)
            or any(k and k in line for k in known) or line in seen
        ):
            continue
        seen.append(line)
    # Cut only a stray huge line: the sidecar's own lines (a recorded-failure line names three calls) fit.
    return [line[:400] for line in seen[-_STDERR_TAIL:]]


def default_dsh_home() -> Path:
    """The DSH home ``dsh-sidecar sessions`` reads without ``--dsh-home``: ``$DSH_HOME``, else the
    home of the host ``find_host`` finds from the current folder, else ``~/.dsh`` (as rc.8)."""
    home = os.environ.get("DSH_HOME", "").strip()
    if home:
        return Path(home)
    try:
        return find_host().dsh_home
    except HostNotFound:
        return Path.home() / ".dsh"


def find_host(start: str | os.PathLike[str] | None = None) -> HostEnv:
    """Find the DSH host the way git finds its repository.

    ``$DSH_SIDECAR_HOST`` when set; else the first ``.host`` with ``bin/dsh`` in ``start``, the
    current directory or one of their parents, else beside this checkout (editable install).
    ``DSH_HOME`` is ``$DSH_HOME`` when set, else the host's own ``dsh-home``.

    Raises:
        HostNotFound: nothing installed there; the message says how to install it.
    """
    explicit = os.environ.get(HOST_ENV_VAR, "").strip()
    if explicit:
        candidates = [Path(explicit)]
    else:
        candidates = []
        for base in (Path(start or os.getcwd()).resolve(), Path.cwd().resolve()):
            candidates += [p / ".host" for p in (base, *base.parents)]
        candidates.append(Path(__file__).resolve().parents[1] / ".host")
    home = os.environ.get("DSH_HOME", "").strip()
    for prefix in candidates:
        if (prefix / "bin" / "dsh").exists():
            return host_env(prefix, Path(home) if home else None)
    where = f"${HOST_ENV_VAR}" if explicit else "a .host folder here or in a parent folder"
    raise HostNotFound(
        f"no DSH host at {where}; install one with `dsh-sidecar host install` and "
        "`dsh-sidecar install --profile headless` (or set DSH_SIDECAR_HOST to its prefix)"
    )


class _Plan(msgspec.Struct, kw_only=True):
    """How one cassette takes part in a run."""

    kind: Literal["tool", "subagent", "model"]
    target: Path
    name: str
    mode: Literal["record", "replay"]
    write_to: Path
    record_mode: RecordMode


def _plan(kind: Literal["tool", "subagent", "model"], file: str, cwd: Path, record_mode: RecordMode,
          hint: str) -> _Plan:
    field = f"{kind}Cassette.file"
    target = (cwd / file) if not os.path.isabs(file) else Path(file)
    name = os.path.basename(file) or file
    if target.exists() and not target.is_file():
        raise CassetteNotAFile(field, name)
    exists = target.is_file()
    if record_mode == "none" and not exists:
        raise CassetteMissing(field, name, hint)
    if exists and record_mode != "all":
        return _Plan(kind=kind, target=target, name=name, mode="replay", write_to=target, record_mode=record_mode)
    if not target.parent.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
    private = target.parent / f".{target.name}.{secrets.token_hex(4)}.recording"
    return _Plan(kind=kind, target=target, name=name, mode="record", write_to=private, record_mode=record_mode)


def _publish(plan: _Plan, complete: bool, named: bool = False) -> bool:
    """Move a complete private recording into place; drop an incomplete one. True if published.

    ``named``: the sidecar reported the unpublished recording (its error names the ``.partial``
    it kept), so the partial stays; with no report (DSH killed, timed out) nothing names it.
    """
    private = plan.write_to
    try:
        if not complete or not private.is_file():
            return False
        if plan.record_mode == "all":
            os.replace(private, plan.target)
        else:
            os.link(private, plan.target)  # create-only: never overwrite a cassette that appeared
        fd = os.open(plan.target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    except FileExistsError:
        return False
    finally:
        private.unlink(missing_ok=True)
        # An unpublished recording's partial is the evidence its error names ("kept ...partial").
        if not named:
            Path(f"{private}.partial").unlink(missing_ok=True)
        shutil.rmtree(f"{private}.writer.lock", ignore_errors=True)


def _reference(label: str, function: Callable[..., Any] | str) -> str:
    """``file.py:function`` for a module-level function: the sidecar imports it from its file."""
    if isinstance(function, str):
        return function
    qualname = getattr(function, "__qualname__", "")
    try:
        file = inspect.getsourcefile(function)
    except TypeError:
        file = None
    if file is None or not qualname or "<" in qualname or getattr(function, "__module__", "") == "__main__":
        # The sidecar imports the function's file: a script's own functions would rerun the script.
        raise ValueError(f"{label} must be a module-level function of an importable module, not of "
                         "__main__ (it runs in the sidecar process)")
    return f"{file}:{qualname}"


def _filter_entry(index: int, entry: Any) -> Any:
    """A ``filters`` entry as the row takes it: a function becomes ``{"call": "file.py:function"}``."""
    if callable(entry):
        return {"call": _reference(f"filters[{index}]", entry)}
    if isinstance(entry, Mapping) and callable(entry.get("call")):
        return {**entry, "call": _reference(f"filters[{index}]", entry["call"])}
    return entry


def _script_task(script: str | os.PathLike[str] | Mapping[str, Any] | Script, cwd: Path, wait_ms: int | None,
                 scratch: list[Path]) -> str:
    if isinstance(script, (str, os.PathLike)):
        path = os.fspath(script)
    else:
        value = script if isinstance(script, Script) else validate_script(dict(script), source="script")
        # Replay reads only below the session cwd (or the sessions folder): the file goes there.
        file = cwd / f".dsh-run-{secrets.token_hex(6)}.mock.json"
        file.write_bytes(encode_script(value))
        scratch.append(file)
        path = file.name
    task = f"/mock replay {json.dumps(path)}"
    return task if wait_ms is None else f"{task} --overwrite-wait-time-ms {wait_ms}"


def unused_rows(host: HostEnv, profile: str, rows: Sequence[Row], patches: Sequence[Path]) -> list[str]:
    """The profile rows this run cannot use, so it does not compose them (docs/cold-boot.md).

    ``llm-pi-ai`` has no route unless a settings document, the profile's patch layer, the
    caller's patches or rows name it (or move the settings document): any mention keeps it.
    """
    if any(r.id in (DORMANT_PROVIDER_ROW, "settings") for r in rows):
        return []
    sources = [host.dsh_home / name for name in _SETTINGS_DOCUMENTS]
    sources += [host.dsh_home / "profiles" / profile / "cordis.patch.yml", *patches]
    for source in sources:
        try:
            text = source.read_text(errors="replace")
        except FileNotFoundError:
            continue
        except OSError:
            return []  # unreadable: it may name a route; keep the row (fail closed)
        if any(word in text for word in _PROVIDER_SOURCES) or _SETTINGS_ROW.search(text):
            return []
    return [DORMANT_PROVIDER_ROW]


def _patch_text(sidecar: dict[str, Any], rows: Sequence[Row], one_shot: bool, transparent_spawn: bool,
                skipped: Sequence[str] = ()) -> str:
    # JSON is YAML flow syntax: no YAML writer needed and no quoting surprises.
    entries: list[dict[str, Any]] = [{"id": row, "disabled": True} for row in skipped]
    entries.append({"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": sidecar})
    entries += [
        {"insert": [{"id": r.id, "name": r.name, "config": r.config}]} if r.insert
        else {"id": r.id, "name": r.name, "disabled": False, "config": r.config}
        for r in rows
    ]
    text = "".join(f"- {json.dumps(entry)}\n" for entry in entries)
    if one_shot:
        text += ONE_SHOT_PATCH
    if transparent_spawn:
        # The transparent setup registers the cassette as `spawn`: the real provider moves aside.
        text += '- {"id": "subagent-spawn-in-process", "config": {"providerName": "spawn-upstream"}}\n'

    return text


def _execute(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str, bool]:
    """Run ``argv`` in its own process group; a timeout ends that group only."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, errors="replace", start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out, err, False
    except subprocess.TimeoutExpired:
        for sig, grace in ((signal.SIGTERM, _KILL_GRACE_S), (signal.SIGKILL, None)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                out, err = proc.communicate(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        return proc.returncode, out, err, True


def _summary(plan: _Plan, counts: CassetteCounts | None, published: bool, filtered: bool) -> CassetteSummary:
    c = counts or CassetteCounts(kind=plan.kind, mode=plan.mode)
    return CassetteSummary(
        kind=plan.kind, file=plan.name, record_mode=plan.record_mode, mode=plan.mode, selected=c.selected,
        recorded=c.recorded, consumed=c.consumed, unconsumed=c.unconsumed, missed=c.missed, poisoned=c.poisoned,
        published=published, injected=c.injected, faults=c.faults, failed=c.failed,
        filtered=filtered, stood_up=list(c.stoodUp),
    )


def _sessions(host: HostEnv, report: RunReport) -> tuple[str | None, str | None, list[str], list[dict[str, Any]]]:
    """The root session's id, log path and events, and the child session ids."""
    root = str(host.dsh_home / "sessions")
    found: list[tuple[str, str, list[dict[str, Any]]]] = []
    for session_id in report.sessions:
        for path in session_log_candidates(root, report.cwd, session_id):
            if os.path.exists(path):
                try:
                    found.append((session_id, path, read_session_log(path)))
                except SessionLogInvalid:
                    pass  # not a log rc.8 wrote whole: the run has no events from it
                break
    parents = [f for f in found if f[2] and f[2][0].get("delegationDepth", 0) == 0]
    if not parents:
        return None, None, [s for s, _, _ in found], []
    session_id, path, events = parents[0]
    return session_id, path, [s for s, _, _ in found if s != session_id], events


def _private_home(shared: Path, profile: str, private: Path, sessions: Path) -> Path:
    """A DSH_HOME for one run: links to everything of ``shared`` but the profile's ``cordis.yml``,
    and ``sessions``, its own sessions root (``bridge/session_staging.py``).

    rc.8 rewrites ``profiles/<profile>/cordis.yml`` (truncate, then write) at every boot and reads
    it back; a second run booting at that moment reads an empty file and fails to load. A run
    whose profile folder is its own, with every other entry linked, never shares that file,
    while plugins and patches stay the shared ones.
    """
    if not (shared / "profiles" / profile / "node_modules" / PACKAGE).is_dir():
        raise HostNotFound(
            f"the plugin is not installed in profile {profile}; run `dsh-sidecar install --profile {profile}`"
        )
    home = private / "home"
    profile_dir = home / "profiles" / profile
    profile_dir.mkdir(parents=True)
    (shared / "sessions").mkdir(parents=True, exist_ok=True)
    for entry in shared.iterdir():
        if entry.name not in ("profiles", "sessions", STAGING_DIR):
            (home / entry.name).symlink_to(entry)
    (home / "sessions").symlink_to(sessions)
    for entry in (shared / "profiles").iterdir():
        if entry.name != profile:
            (home / "profiles" / entry.name).symlink_to(entry)
    for entry in (shared / "profiles" / profile).iterdir():
        if entry.name != "cordis.yml":
            (profile_dir / entry.name).symlink_to(entry)
    return home


def run(
    task: str | None = None,
    *,
    script: str | os.PathLike[str] | Mapping[str, Any] | Script | None = None,
    overwrite_wait_time_ms: int | None = None,
    tool_cassette: ToolCassette | None = None,
    subagent_cassette: SubagentCassette | None = None,
    model_cassette: ModelCassette | None = None,
    record_mode: RecordMode = "none",
    rows: Sequence[Row] = (),
    patches: Sequence[str | os.PathLike[str]] = (),
    mock: Mapping[str, Any] | None = None,
    trace: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    host: HostEnv | None = None,
    profile: str = "headless",
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    record_hint: str = "record it with record mode `once`",
    stubs: Mapping[str, Callable[..., Any] | str] | None = None,
    allow_live_tools: bool | Sequence[str] = True,
    compile_cache: bool = True,
    skip_unused_rows: bool = True,
    warm: bool | WarmPool = False,
) -> RunResult:
    """Run one headless DSH turn and return what it did.

    Args:
        task: the task text (``/mock run ...`` for a scripted turn); exclusive with ``script``.
        script: a canonical mock script (path relative to ``cwd``, mapping or ``Script``) to
            ``/mock replay``; ``overwrite_wait_time_ms`` replaces its waits.
        tool_cassette, subagent_cassette, model_cassette: cassettes; relative files resolve
            against ``cwd``.
        record_mode: ``none`` (replay only), ``once`` (record a missing cassette), ``all``
            (re-record; the old cassette is replaced only by a complete recording).
        rows: other profile rows to enable with their config; ``patches``: more ``--patch`` files,
            applied before the run's own layer (so ``rows`` win over them).
        mock: the sidecar's ``mock`` section; ``trace``: a trace file (relative to ``cwd``).
        cwd: the DSH working directory (default: the current one).
        host: the DSH host (default: ``find_host(cwd)``); ``env``: extra environment variables.
        timeout: seconds before the run's process group is terminated (``timed_out`` is set).
        record_hint: how to record a missing cassette, in the words of the caller's interface.
        stubs: tool name to the function serving it instead of its body (docs/test-logic.md): a
            module-level function (it runs in the sidecar process, imported from its file) or a
            ``module:function`` / ``file.py:function`` reference resolved against ``cwd``.
        allow_live_tools: in record mode ``none``, the tools that may run live with no cassette
            serving them: ``True`` all (the API's default), ``False`` none, or their names; a
            blocked call fails the run with ``LIVE_TOOL_BLOCKED``. Recording modes run tools live.
        compile_cache: keep Node's compile cache under the host prefix (docs/cold-boot.md);
            ``False`` boots the way runs did before it (a ``NODE_COMPILE_CACHE`` in ``env`` wins).
        skip_unused_rows: do not compose the profile rows the run cannot use (``unused_rows``:
            the dormant ``llm-pi-ai`` adapter when nothing configures a route for it); ``False``
            composes the whole profile.
        warm: run as a session of a warm host of the same composition (docs/warm-host.md):
            ``True`` this process's pool, or a ``WarmPool``; a run that cannot share a host
            (a subagent cassette, the mock off, another profile than headless, a stand-in its
            replay needs) runs in a process of its own, as with ``False``.

    Raises:
        CassetteMissing: record mode ``none`` and a cassette file does not exist.
        HostNotFound: no host installed, or the plugin is not installed in ``profile``.
        ValueError: both or neither of ``task`` and ``script``; an unknown record mode; a stub
            or filter function that is not a module-level function.
    """
    if (task is None) == (script is None):
        raise ValueError("give exactly one of task and script")
    if record_mode not in RECORD_MODES:
        raise ValueError(f"record_mode {str(record_mode)[:40]!r} is not one of {', '.join(RECORD_MODES)}")
    if not isinstance(allow_live_tools, bool) and (
        isinstance(allow_live_tools, str) or not all(isinstance(t, str) and t for t in allow_live_tools)
    ):
        raise ValueError("allow_live_tools must be True, False or a list of tool names")
    workdir = Path(cwd or os.getcwd()).resolve()
    host = host or find_host(workdir)
    plans: list[_Plan] = []
    hint = record_hint
    sidecar: dict[str, Any] = {}
    if tool_cassette is not None:
        plan = _plan("tool", tool_cassette.file, workdir, record_mode, hint)
        plans.append(plan)
        sidecar["toolCassette"] = {
            "mode": plan.mode, "file": str(plan.write_to), "include": list(tool_cassette.include),
            **tool_cassette.section(),
        }
    if stubs:
        sidecar["stubs"] = {tool: _reference(f"stubs[{tool!r}]", stub) for tool, stub in stubs.items()}
    if subagent_cassette is not None:
        plan = _plan("subagent", subagent_cassette.file, workdir, record_mode, hint)
        plans.append(plan)
        sidecar["subagentCassette"] = {
            **subagent_cassette.options, "mode": plan.mode, "file": str(plan.write_to),
            "provider": subagent_cassette.provider,
        }
    if model_cassette is not None:
        plan = _plan("model", model_cassette.file, workdir, record_mode, hint)
        plans.append(plan)
        sidecar["modelCassette"] = {**model_cassette.options, "mode": plan.mode, "file": str(plan.write_to)}
    if record_mode == "none" and allow_live_tools is not True:
        sidecar["liveTools"] = [] if allow_live_tools is False else list(allow_live_tools)
    if mock is not None:
        sidecar["mock"] = dict(mock)
    if trace is not None:
        sidecar["trace"] = trace
    private = Path(tempfile.mkdtemp(prefix="dsh-run-"))
    scratch: list[Path] = []
    staging: Path | None = None
    try:
        text = task if task is not None else _script_task(script, workdir, overwrite_wait_time_ms, scratch)  # type: ignore[arg-type]
        report_path = private / "report.json"
        sidecar["report"] = str(report_path)
        patch = private / "run.patch.yml"
        one_shot = subagent_cassette is not None and subagent_cassette.one_shot
        transparent = subagent_cassette is not None and subagent_cassette.provider == {"transparent": True}
        extras = [Path(extra).resolve() for extra in patches]
        skipped = unused_rows(host, profile, rows, extras) if skip_unused_rows else []
        patch.write_text(_patch_text(sidecar, rows, one_shot, transparent, skipped))
        # Later layers win: the caller's files first, then this run's own rows.
        argv = [str(host.dsh), "--profile", profile]
        for extra in extras:
            argv += ["--patch", os.fspath(extra)]
        argv += ["--patch", str(patch)]
        environ = host.environ({**os.environ, **(env or {})})
        if not (host.dsh_home / "profiles" / "node_modules").is_dir():
            # Made by rc.8 at a boot; a run's private home would make it where the plugins'
            # real folders cannot see it (a profile installed before install healed it).
            heal_module_fallback(host, profile)
        for package in stale_local_plugins(host.dsh_home):
            warnings.warn(StalePlugin(
                f"PLUGIN_STALE: {package} changed since `dsh-sidecar add-local-plugin` installed it; this run "
                "uses the installed copy: run `dsh-sidecar add-local-plugin <its folder>` again"
            ), stacklevel=2)
        environ[SHARED_SESSIONS_VAR] = os.path.realpath(host.dsh_home / "sessions")
        if compile_cache:
            # V8 code cache of the ~1,650 modules a boot loads: same code, less compiling.
            environ.setdefault("NODE_COMPILE_CACHE", str(host.prefix / COMPILE_CACHE_DIR))
        started = time.monotonic()
        outcome = None
        if warm is not False and _warm_suits(profile, subagent_cassette, mock):
            outcome = _run_warm(warm, host, profile, rows, extras, skipped, environ, sidecar, workdir, text, timeout)
        if outcome is None:
            # A process of its own: its private home, sessions root and temporary folder.
            staging = staging_root(host.dsh_home, private.name)
            environ["DSH_HOME"] = str(_private_home(host.dsh_home, profile, private, staging))
            # rc.8 leaves an empty `dsh-spill-*` folder in the temporary folder at every run: this
            # run's own goes away with `private`.
            (private / "tmp").mkdir()
            environ["TMPDIR"] = str(private / "tmp")
            started = time.monotonic()
            code, out, err, timed_out = _execute([*argv, text], workdir, environ, timeout)
        else:
            code, out, err, timed_out = outcome.exit_code, outcome.stdout, outcome.stderr, outcome.timed_out
        duration_ms = int((time.monotonic() - started) * 1000)
        report = read_report(str(report_path))
    finally:
        if staging is not None:
            # The run's session logs join the shared folder, where its result and later runs find them.
            settle(staging, host.dsh_home / "sessions")
            shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)
        for file in scratch:
            file.unlink(missing_ok=True)
    counts = {c.kind: c for c in report.cassettes} if report is not None else {}
    summaries: dict[str, CassetteSummary] = {}
    # Complete: the sidecar shut down cleanly and the cassette itself reports a finished
    # recording. A turn that failed on purpose (a recorded tool error) is still a recording.
    clean = report is not None and not report.errors and not timed_out
    for plan in plans:
        count = counts.get(plan.kind)
        complete = clean and count is not None and count.published
        named = count is not None and not count.published
        published = _publish(plan, complete, named) if plan.mode == "record" else False
        filtered = plan.kind == "tool" and tool_cassette is not None and bool(tool_cassette.filters)
        summaries[plan.kind] = _summary(plan, count, published, filtered)
    return _result(host, text, report, code, out, err, timed_out, duration_ms, summaries)


def _warm_suits(profile: str, subagent_cassette: SubagentCassette | None, mock: Mapping[str, Any] | None) -> bool:
    """Whether a run can be a session of a warm host (the sidecar refuses what it cannot see here)."""
    return profile == "headless" and subagent_cassette is None and (mock is None or mock.get("enabled") is not False)


def _warm_boot(host: HostEnv, profile: str, rows: Sequence[Row], extras: Sequence[Path], skipped: Sequence[str],
               environ: Mapping[str, str]) -> WarmBoot:
    """How to boot the warm host of a composition: the cold run's argv and rows, the runner row off."""
    argv = [str(host.dsh), "--profile", profile]
    for extra in extras:
        argv += ["--patch", os.fspath(extra)]
    base = {k: v for k, v in environ.items() if k not in ("DSH_HOME", "TMPDIR")}

    def patch_for(socket_path: str) -> str:
        return _patch_text({"warm": socket_path}, rows, False, False, skipped) + WARM_PATCH

    def make_home(private: Path) -> tuple[Path, Path]:
        staging = staging_root(host.dsh_home, private.name)
        return _private_home(host.dsh_home, profile, private, staging), staging

    return WarmBoot(argv, patch_for, base, make_home, host.dsh_home / "sessions")


def _run_warm(warm: bool | WarmPool, host: HostEnv, profile: str, rows: Sequence[Row], extras: Sequence[Path],
              skipped: Sequence[str], environ: dict[str, str], sidecar: dict[str, Any], cwd: Path, task: str,
              timeout: float) -> WarmOutcome | None:
    """The run as a session of the warm host of its composition; ``None``: it needs a process of its own."""
    pool = warm if isinstance(warm, WarmPool) else default_pool()
    boot = _warm_boot(host, profile, rows, extras, skipped, environ)
    return pool.run(boot.key(extras), boot, sidecar, cwd, task, timeout)


def _result(host: HostEnv, task: str, report: RunReport | None, code: int, out: str, err: str, timed_out: bool,
            duration_ms: int, summaries: Mapping[str, CassetteSummary]) -> RunResult:
    session_id = path = None
    children: list[str] = []
    events: list[dict[str, Any]] = []
    if report is not None:
        session_id, path, children, events = _sessions(host, report)
    paths = {c.callId: c for c in report.calls} if report is not None else {}
    calls = [
        ToolCall(call_id=c.call_id, tool=c.tool, path=paths[c.call_id].path if c.call_id in paths else None,
                 arguments=c.arguments, turn=c.turn, step=c.step)
        for c in tool_calls(events)
    ]
    tools = {c.call_id: c.tool for c in calls}
    results = []
    for r in tool_results(events):
        seen = paths.get(r.call_id)
        value = msgspec.json.decode(seen.value) if seen is not None else None
        results.append(ToolResult(
            call_id=r.call_id, tool=tools.get(r.call_id, seen.tool if seen else ""),
            path=seen.path if seen else None, is_error=r.is_error, output=r.output, value=value,
            error_code=r.error_code, error_message=r.error_message,
        ))
    errors = [Diagnostic(e.code, e.message) for e in report.errors] if report is not None else []
    return RunResult(
        exit_code=code, timed_out=timed_out, duration_ms=duration_ms, task=task, stdout=out, stderr=err,
        final_text=final_text(events) or out.strip(), tool_calls=calls, tool_results=results,
        mock=mock_statuses(events), tool_cassette=summaries.get("tool"), subagent_cassette=summaries.get("subagent"),
        model_cassette=summaries.get("model"), errors=errors,
        session_id=session_id, session_path=path, child_session_ids=children, events=events,
    )
