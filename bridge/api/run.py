"""The run API: one headless DSH rc.8 turn with cassettes and the mock in, a typed result out.

    from dsh_sidecar import ToolCassette, run

    result = run(
        '/mock run weather_lookup({"city": "Paris"})',
        tool_cassette=ToolCassette(file="weather.cassette.ndjson", include=["weather_lookup"]),
        record_mode="once",
    )
    assert result.result("weather_lookup").output == "Paris: sunny, 21C"

``run`` reads top-down: plan each cassette (``plan``), compose the run (``compose``), hand it
to a transport (``transport``: a warm host's session, else a process of its own), publish the
complete recordings, build the result from the report and the session logs (``result``). Each
run writes its own ``--patch`` layer and run report in a private temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from dsh_sidecar.bridge.api.compose import compose, script_task
from dsh_sidecar.bridge.api.functions import filter_entry, function_reference
from dsh_sidecar.bridge.api.plan import CassettePlan, plan_cassette, publish, summarize
from dsh_sidecar.bridge.api.result import build_result
from dsh_sidecar.bridge.api.trace.build import RunSources, read_hook_log
from dsh_sidecar.bridge.api.trace.collect import TraceLater, redactor_for, write_runs
from dsh_sidecar.bridge.api.trace.redact import Redactor
from dsh_sidecar.bridge.api.transport import ColdTransport, Transport, WarmTransport, warm_suits
from dsh_sidecar.bridge.api.types import (
    LOGIC_KEYS,
    RECORD_MODES,
    CassetteMissing,
    CassetteSummary,
    Diagnostic,
    HostNotFound,
    ModelCassette,
    RecordedFailure,
    RecordMode,
    Row,
    RunFailed,
    RunResult,
    StalePlugin,
    SubagentCassette,
    ToolCall,
    ToolCassette,
    ToolResult,
)
from dsh_sidecar.bridge.api.warm_pool import WarmPool, default_pool
from dsh_sidecar.bridge.host.discovery import default_dsh_home, find_host
from dsh_sidecar.bridge.host.stderr import broken_plugin
from dsh_sidecar.bridge.host.toolchain import HostEnv
from dsh_sidecar.bridge.transport.report import read_report
from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.mock import Script
from dsh_sidecar.python_core.stubs import StubFailure

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
    "TraceLater",
    "WarmPool",
    "default_dsh_home",
    "find_host",
    "run",
]

CONFIG_HINT = "correct the `{key}` argument (ToolCassette(...) or run(...))"
"""The run API's fix for a refused test-logic key; the pytest plugin and the CLI pass their own."""
FAULTS_LEFT_OUT = "FAULTS_LEFT_OUT"
"""The note a recording run prints when it left a fault overlay out."""


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
    trace: str | os.PathLike[str] | TraceLater | None = None,
    hook_log: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    host: HostEnv | None = None,
    profile: str = "headless",
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
    record_hint: str = "record it with record mode `once`",
    config_hint: str = CONFIG_HINT,
    stubs: Mapping[str, Callable[..., Any] | str] | None = None,
    allow_live_tools: bool | Sequence[str] = True,
    compile_cache: bool = True,
    skip_unused_rows: bool = True,
    warm: bool | WarmPool = False,
    strict_replay: bool = False,
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
        mock: the sidecar's ``mock`` section.
        trace: write this run's trace page there (relative to ``cwd``; its JSON beside it, ``x.html`` →
            ``x.json``; docs/trace.md), or keep its sources in a ``TraceLater`` to write when a test fails.
        hook_log: the sidecar's structural hook log (one line per hook, no values), relative to ``cwd``.
        cwd: the DSH working directory (default: the current one).
        host: the DSH host (default: ``find_host(cwd)``); ``env``: extra environment variables.
        timeout: seconds before the run's process group is terminated (``timed_out`` is set).
        record_hint: how to record a missing cassette, in the words of the caller's interface.
        config_hint: how to correct a test-logic key the sidecar refused (``INVALID_CONFIG`` of
            ``toolCassette.faults`` and the like), in the words of the caller's interface;
            ``{key}`` is the key (``faults``, ``filters``, ``ignore``, ``allow_redacted_replay``,
            ``stubs``).
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
            (a subagent cassette, the mock off, another profile than headless) runs in a process
            of its own, as with ``False``; a replay's stand-ins are registered for its session only.
        strict_replay: a replay that diverged from its recording (``REPLAY_DIVERGED``: an unselected
            call returned another result, a model step saw another system prompt or tool list)
            fails the run (exit 1, the line in ``errors``) instead of printing a warning.

    Raises:
        CassetteMissing: record mode ``none`` and a cassette file does not exist.
        HostNotFound: no host installed, or the plugin is not installed in ``profile``.
        ValueError: both or neither of ``task`` and ``script``; an unknown record mode; a stub
            or filter function that is not a module-level function.
    """
    _check_arguments(task, script, record_mode, allow_live_tools)
    workdir = Path(cwd or os.getcwd()).resolve()
    host = host or find_host(workdir)
    plans, sidecar, notes = _sidecar_config(
        workdir, record_mode, record_hint, tool_cassette, subagent_cassette, model_cassette, stubs, allow_live_tools,
    )
    if not isinstance(strict_replay, bool):
        raise ValueError("strict_replay must be True or False")
    if strict_replay:
        sidecar["strictReplay"] = True
    if mock is not None:
        sidecar["mock"] = dict(mock)
    if hook_log is not None:
        sidecar["trace"] = hook_log
    private = Path(tempfile.mkdtemp(prefix="dsh-run-"))
    hooks_file = None
    if trace is not None:
        hooks_file = workdir / hook_log if hook_log is not None else private / "hooks.jsonl"
        sidecar["trace"] = str(hooks_file)
        sidecar["traceValues"] = True
    scratch: list[Path] = []
    try:
        text = task if task is not None else script_task(script, workdir, overwrite_wait_time_ms, scratch)  # type: ignore[arg-type]
        report_path = private / "report.json"
        sidecar["report"] = str(report_path)
        composition = compose(
            host, profile, rows, patches, sidecar, env,
            one_shot=subagent_cassette is not None and subagent_cassette.one_shot,
            transparent_spawn=subagent_cassette is not None and subagent_cassette.provider == {"transparent": True},
            skip_unused_rows=skip_unused_rows, compile_cache=compile_cache,
        )
        transports: list[Transport] = []
        if warm is not False and warm_suits(profile, subagent_cassette is not None, mock):
            transports.append(WarmTransport(warm if isinstance(warm, WarmPool) else default_pool()))
        transports.append(ColdTransport())
        for transport in transports:
            outcome = transport.handle(composition, private, workdir, text, timeout)
            if outcome is not None:
                break
        assert outcome is not None  # the cold transport takes every run
        report = read_report(str(report_path))
        hooks = [] if hooks_file is None else read_hook_log(hooks_file)
    finally:
        shutil.rmtree(private, ignore_errors=True)
        for file in scratch:
            file.unlink(missing_ok=True)
    broken = broken_plugin(outcome.stderr, profile)
    if broken is not None:
        # Nothing of the run ran: no cassette was recorded or replayed, so none is summarized,
        # the private recording goes, and the one line naming the plugin is the run's account.
        for plan in plans:
            if plan.mode == "record":
                publish(plan, complete=False)
        code, message = broken.split(": ", 1)
        result = build_result(host, text, None, outcome.exit_code or 1, outcome.stdout, f"dsh-sidecar: {broken}\n",
                              outcome.timed_out, outcome.duration_ms, {})
        return msgspec.structs.replace(result, errors=[Diagnostic(code, message)])
    counts = {c.kind: c for c in report.cassettes} if report is not None else {}
    summaries: dict[str, CassetteSummary] = {}
    # Complete: the sidecar shut down cleanly and the cassette itself reports a finished
    # recording. A turn that failed on purpose (a recorded tool error) is still a recording.
    clean = report is not None and not report.errors and not outcome.timed_out
    for plan in plans:
        count = counts.get(plan.kind)
        complete = clean and count is not None and count.published
        named = count is not None and not count.published
        published = publish(plan, complete, named) if plan.mode == "record" else False
        filtered = plan.kind == "tool" and tool_cassette is not None and bool(tool_cassette.filters)
        summaries[plan.kind] = summarize(plan, count, published, filtered)
    stderr = "".join(f"dsh-sidecar: {note}\n" for note in notes) + _config_fix(outcome.stderr, config_hint)
    if scratch:
        # The script's file was this run's own and is gone: name where the script came from.
        inline = f"<script from {_caller()}>"
        text = text.replace(json.dumps(scratch[0].name), inline)
        stderr = stderr.replace(scratch[0].name, inline)
    result = build_result(host, text, report, outcome.exit_code, outcome.stdout, stderr, outcome.timed_out,
                          outcome.duration_ms, summaries)
    if trace is None:
        return result
    sources = RunSources(result=result, hooks=hooks, label=_caller_label(text),
                         cassette_files={p.kind: p.target for p in plans},
                         redactor=_trace_redactor(tool_cassette, model_cassette))
    if isinstance(trace, TraceLater):
        trace.add(sources)
        return result
    page = workdir / trace
    write_runs([sources], page, title=f"dsh run: {text[:80]}", outcome="passed" if result.ok else "failed")
    return msgspec.structs.replace(result, trace=str(page))


def _caller_label(task: str) -> str:
    """A run's heading in a trace: where the test called ``run()`` and what it asked."""
    return f"{_caller()}: {task[:120]}"


def _trace_redactor(tool_cassette: ToolCassette | None, model_cassette: ModelCassette | None) -> Redactor:
    """The filters a trace applies: the cassettes' own, the credential filter always."""
    entries: list[Any] = []
    functions: dict[str, Callable[[Any], Any]] = {}
    if tool_cassette is not None:
        for index, entry in enumerate(tool_cassette.filters):
            row = filter_entry(index, entry)
            function = entry if callable(entry) else entry.get("call") if isinstance(entry, Mapping) else None
            if callable(function) and isinstance(row, Mapping):
                functions[str(row["call"])] = function
            entries.append(row)
    if model_cassette is not None:
        entries.extend(e for e in model_cassette.options.get("filters") or () if e != "credentials")
    return redactor_for(entries, functions)


_BRIDGE = Path(__file__).resolve().parents[1]  # the run API's callers inside it are skipped


def _caller() -> str:
    """``file:line`` of the first frame outside this package (a test's ``dsh.run(script=...)`` line),
    relative to the current folder when below it (an absolute path is never printed)."""
    frame = sys._getframe(1)
    while frame.f_back is not None and Path(frame.f_code.co_filename).resolve().is_relative_to(_BRIDGE):
        frame = frame.f_back
    path = Path(frame.f_code.co_filename).resolve()
    try:
        shown = str(path.relative_to(Path.cwd()))
    except ValueError:
        shown = path.name
    return f"{shown}:{frame.f_lineno}"


_ROW_FIX = "dsh-sidecar: fix: " + ConfigError.hint
_LOGIC_FIELDS = (("toolCassette.faults", "faults"), ("toolCassette.filters", "filters"),
                 ("toolCassette.match", "ignore"), ("toolCassette.allowRedactedReplay", "allow_redacted_replay"),
                 ("toolCassette.include", "include"), ("toolCassette.file", "file"),
                 ("toolCassette.volatile", "volatile"), ("stubs", "stubs"))


def _config_fix(stderr: str, hint: str) -> str:
    """The sidecar's fix for a refused test-logic key names the row config (what a plain ``dsh`` run
    has); this run wrote that row from its caller's arguments, so the fix names the caller's key."""
    lines = stderr.split("\n")
    for index, line in enumerate(lines[:-1]):
        if not line.startswith("dsh-sidecar: INVALID_CONFIG: ") or lines[index + 1] != _ROW_FIX:
            continue
        field = line.removeprefix("dsh-sidecar: INVALID_CONFIG: ").split(":", 1)[0]
        key = next((key for prefix, key in _LOGIC_FIELDS if field == prefix or field.startswith(
            (prefix + ".", prefix + "["))), None)
        if key is not None:
            lines[index + 1] = "dsh-sidecar: fix: " + hint.format(key=key)
    return "\n".join(lines)


def _check_arguments(task: str | None, script: object, record_mode: str, allow_live_tools: object) -> None:
    if (task is None) == (script is None):
        raise ValueError("give exactly one of task and script")
    if record_mode not in RECORD_MODES:
        raise ValueError(f"record_mode {str(record_mode)[:40]!r} is not one of {', '.join(RECORD_MODES)}")
    if not isinstance(allow_live_tools, bool) and (
        isinstance(allow_live_tools, str) or not all(isinstance(t, str) and t for t in allow_live_tools)  # type: ignore[attr-defined]
    ):
        raise ValueError("allow_live_tools must be True, False or a list of tool names")


def _sidecar_config(
    workdir: Path, record_mode: RecordMode, hint: str, tool_cassette: ToolCassette | None,
    subagent_cassette: SubagentCassette | None, model_cassette: ModelCassette | None,
    stubs: Mapping[str, Callable[..., Any] | str] | None, allow_live_tools: bool | Sequence[str],
) -> tuple[list[CassettePlan], dict[str, Any], list[str]]:
    """Each cassette's plan, the sidecar row's config that carries them out, and the notes the run
    prints first (a fault overlay left out of a recording)."""
    plans: list[CassettePlan] = []
    sidecar: dict[str, Any] = {}
    notes: list[str] = []
    if tool_cassette is not None:
        plan = plan_cassette("tool", tool_cassette.file, workdir, record_mode, hint)
        plans.append(plan)
        section = tool_cassette.section()
        if plan.mode == "record" and "faults" in section:
            # A fault overlay is replay only; the same test records, then replays with it.
            faults = section.pop("faults")
            name = faults.get("name") if isinstance(faults, Mapping) else None
            named = f" {name}" if isinstance(name, str) and name else ""
            notes.append(f"{FAULTS_LEFT_OUT}: toolCassette.faults: the fault overlay{named} applies on replay only; "
                         f"this recording of {plan.name} ran without it, and a replay of it applies it")
        sidecar["toolCassette"] = {
            "mode": plan.mode, "file": str(plan.write_to), "include": list(tool_cassette.include), **section,
        }
    if stubs:
        sidecar["stubs"] = {tool: function_reference(f"stubs[{tool!r}]", stub) for tool, stub in stubs.items()}
    if subagent_cassette is not None:
        plan = plan_cassette("subagent", subagent_cassette.file, workdir, record_mode, hint)
        plans.append(plan)
        sidecar["subagentCassette"] = {
            **subagent_cassette.options, "mode": plan.mode, "file": str(plan.write_to),
            "provider": subagent_cassette.provider,
        }
    if model_cassette is not None:
        plan = plan_cassette("model", model_cassette.file, workdir, record_mode, hint)
        plans.append(plan)
        sidecar["modelCassette"] = {**model_cassette.options, "mode": plan.mode, "file": str(plan.write_to)}
    if record_mode == "none" and allow_live_tools is not True:
        sidecar["liveTools"] = [] if allow_live_tools is False else list(allow_live_tools)
    return plans, sidecar, notes

