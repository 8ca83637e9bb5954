"""``dsh-sidecar``: set up the host, install the plugin, and the feature CLIs.

Exit codes: ``python_core.cli_errors``'s table (0 ok, 1 a named error or a broken check, 2 usage,
124 ``run`` timed out; ``run`` otherwise exits with DSH's own code).
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NoReturn

import click
import msgspec
import zstandard

from dsh_sidecar.bridge.api.run import run
from dsh_sidecar.bridge.api.scaffold import next_steps, scaffold_plugin
from dsh_sidecar.bridge.api.session_index import SESSION_INDEX, IndexedRun
from dsh_sidecar.bridge.api.trace.document import TraceDocument
from dsh_sidecar.bridge.api.trace.files import ShowUnreadable, align, run_of, shown_name
from dsh_sidecar.bridge.api.trace.redact import Redactor, json_document
from dsh_sidecar.bridge.api.trace.render import json_path_of, write_trace
from dsh_sidecar.bridge.api.types import (
    LOGIC_KEYS,
    RECORD_MODES,
    ModelCassette,
    RecordMode,
    Row,
    SubagentCassette,
    ToolCassette,
)
from dsh_sidecar.bridge.hooks.references import resolve
from dsh_sidecar.bridge.host import doctor
from dsh_sidecar.bridge.host.discovery import HOST_ENV_VAR, HostNotFound, default_dsh_home, find_host
from dsh_sidecar.bridge.host.install import PACKAGE, install_package, install_plugin, record_local_plugin
from dsh_sidecar.bridge.host.toolchain import HostEnv, HostError, ensure_host, find_node, host_env
from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.cassette_io import partial_path
from dsh_sidecar.python_core.cli_errors import EXIT_FAILED, EXIT_TIMEOUT, NamedFailure
from dsh_sidecar.python_core.errors import FilterUnresolved, SidecarError, printable
from dsh_sidecar.python_core.files import reason_of
from dsh_sidecar.python_core.mock.cli import mock as mock_cli
from dsh_sidecar.python_core.model_cassette import verify_file
from dsh_sidecar.python_core.model_cassette.cli import IMPORTED_NOTE
from dsh_sidecar.python_core.model_cassette.cli import cli as model_cassette_cli
from dsh_sidecar.python_core.model_cassette.config import parse_config as parse_model_config
from dsh_sidecar.python_core.session_import import (
    COMPACTION_LANE,
    OVERRIDE_NAME,
    ImportIOError,
    ImportTestExists,
    LogCalls,
    calls_of,
    cassette_path,
    check_override,
    function_name,
    merged,
    model_lines,
    module_source,
    one_turn,
    refuse_other_profile,
    tool_lines,
    write_lines,
    write_tool_lines,
)
from dsh_sidecar.python_core.session_log import (
    LOG_NAMES,
    SessionLogInvalid,
    SessionSummary,
    SessionToolResult,
    decode_session_log,
    encode_segment,
    mock_statuses,
    project_key,
    summarize,
    tool_calls,
    tool_results,
)
from dsh_sidecar.python_core.subagent_cassette.cli import cli as subagent_cassette_cli
from dsh_sidecar.python_core.tool_cassette.cli import main as tool_cassette_cli
from dsh_sidecar.python_core.tool_cassette.cli import verify_summary
from dsh_sidecar.python_core.tool_cassette.errors import CassetteExists
from dsh_sidecar.python_core.tool_cassette.store import verify_file as verify_tool_file

__all__ = ["main"]

_PREFIX = click.option(
    "--prefix",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Host prefix (node, pnpm, dsh, default DSH_HOME). Default: $DSH_SIDECAR_HOST, else the .host "
    "found in this folder or a parent (like git), else ./.host.",
)
_DSH_HOME = click.option(
    "--dsh-home",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="DSH_HOME to use (default: $DSH_HOME, else <prefix>/dsh-home).",
)


def _home(dsh_home: Path | None) -> Path | None:
    if dsh_home is not None:
        return dsh_home
    env = os.environ.get("DSH_HOME", "").strip()
    return Path(env) if env else None


def _prefix(prefix: Path | None, *, creating: bool = False) -> Path:
    """The host prefix: the option, else ``$DSH_SIDECAR_HOST``, else the project's existing host
    (found like git finds its repository), else a new ``./.host``; says which when not obvious.

    ``creating``: the command installs what is missing, so a new host is announced before the
    install starts (it downloads about 100 MB).
    """
    if prefix is not None:
        return prefix
    explicit = os.environ.get(HOST_ENV_VAR, "").strip()
    if explicit:
        click.echo(f"dsh-sidecar: using the host at {explicit} (${HOST_ENV_VAR})", err=True)
        return Path(explicit)
    try:
        found = find_host().prefix
    except HostNotFound:
        if creating:
            click.echo(
                "dsh-sidecar: no DSH host in this folder, its parents or beside this checkout: installing a new "
                f"one at {Path('.host').resolve()} (Node, pnpm and DSH, about 100 MB; use --prefix DIR or "
                f"${HOST_ENV_VAR} for another place)", err=True,
            )
        return Path(".host")
    if found != Path(".host").resolve():
        click.echo(f"dsh-sidecar: using the host at {found}", err=True)
    return found


def _path_hint(env: HostEnv) -> None:
    """Setup ends by saying how to get this host's ``dsh`` on PATH when it is not there yet."""
    if shutil.which("dsh") != str(env.dsh):
        click.echo('to put dsh on PATH in this shell: eval "$(dsh-sidecar shellenv)"')


def _fail(error: SidecarError) -> NoReturn:
    raise NamedFailure(error, context="dsh-sidecar: ")


@click.group()
@click.version_option(__version__, message="%(prog)s %(version)s")
def main() -> None:
    """Record/replay and deterministic testing for DSH rc.8 agents."""


@main.group()
def host() -> None:
    """The DSH rc.8 host toolchain (Node, pnpm, dsh)."""


@host.command("install")
@_PREFIX
@_DSH_HOME
def host_install(prefix: Path | None, dsh_home: Path | None) -> None:
    """Install Node (if needed), pnpm and DSH rc.8 with the hmr fix under PREFIX."""
    try:
        env = ensure_host(_prefix(prefix, creating=True), _home(dsh_home))
    except SidecarError as exc:
        _fail(exc)
    click.echo(f"dsh: {env.dsh}")
    click.echo(f"DSH_HOME: {env.dsh_home}")
    _path_hint(env)


@main.command("shellenv")
@_PREFIX
@_DSH_HOME
def shellenv(prefix: Path | None, dsh_home: Path | None) -> None:
    """Print the shell lines that put this project's dsh on PATH: eval "$(dsh-sidecar shellenv)"."""
    env = host_env(_prefix(prefix), _home(dsh_home))
    if not env.dsh.exists():
        _fail(HostNotFound("no dsh under that prefix; run `dsh-sidecar host install`"))
    click.echo(f"export PATH={shlex.quote(str(env.bin_dir))}:\"$PATH\"")
    click.echo(f"export DSH_HOME={shlex.quote(str(env.dsh_home))}")


@host.command("doctor")
@_PREFIX
@_DSH_HOME
def host_doctor(prefix: Path | None, dsh_home: Path | None) -> None:
    """Check the host and the headless profile as a plain `dsh` run uses them; exit 1 with the fix if broken."""
    env = host_env(_prefix(prefix), _home(dsh_home))
    environ = env.environ()
    problems: list[str] = []
    fixes: list[str] = []

    def version(argv: list[str]) -> str | None:
        try:
            proc = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60)
        except OSError:
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    try:
        node = str(find_node())
    except HostError as exc:
        node = f"missing ({exc.message})"
        problems.append("node")
    click.echo(f"node:    {node} {version([str(env.node), '--version']) or ''}".rstrip())
    pnpm = version([str(env.bin_dir / "pnpm"), "--version"])
    click.echo(f"pnpm:    {pnpm or 'missing'}")
    dsh = version([str(env.dsh), "--version"])
    click.echo(f"dsh:     {dsh or 'missing'}")
    click.echo(f"dsh at:  {env.dsh}")
    on_path = shutil.which("dsh") == str(env.dsh)
    click.echo("PATH:    " + ("dsh is on PATH" if on_path else 'dsh is not on PATH: eval "$(dsh-sidecar shellenv)"'))
    profile = env.dsh_home / "profiles" / "headless"
    click.echo(f"profile: {profile}")
    installed = (profile / "node_modules" / PACKAGE).is_dir()
    click.echo(f"plugin:  {'installed' if installed else 'not installed'}")
    if pnpm is None or dsh is None:
        problems.append("host")
    if not installed:
        problems.append("plugin")
    if problems:
        fixes.append("run `dsh-sidecar host install` then `dsh-sidecar install --profile headless`")
    if dsh is not None and installed:
        row = doctor.read_row(env.dsh, "headless", environ, Path.cwd())
        ok, what = doctor.python_check(profile, row)
        click.echo(f"python:  {what}")
        if not ok:
            problems.append("python")
            fixes.append("point the row at a python that has dsh-sidecar installed (the python line says how)")
        if row.state == "uncomposed":
            click.echo(f"row:     not composed: the profile does not compose: {row.problem}")
            click.echo("boot:    not tried (the profile does not compose)")
            problems.append("profile")
            fixes.append("fix what the row line names (a plugin of the profile, not the sidecar)")
            click.echo(f"fix: {'; '.join(fixes)} (broken: {', '.join(problems)})", err=True)
            sys.exit(EXIT_FAILED)
        click.echo(f"row:     {row.state}" + {
            "enabled": "",
            "disabled": " (plain `dsh` runs do not load the sidecar; the run API and the pytest plugin enable it per "
                        "run; enable it with `- id: sidecar / disabled: false` in the profile's cordis.patch.yml "
                        "or a --patch file)",
            "missing": " (the profile has no `sidecar` row)",
            "unknown": " (the composed row could not be read; see `dsh --profile headless --dump-config`)",
        }[row.state])
        if row.state == "missing":
            problems.append("row")
            fixes.append("re-run `dsh-sidecar install --profile headless` (its bundle patch inserts the row), and "
                         "check that no layer of yours removes it")
        boot = doctor.boot_check(env.dsh, "headless", environ, row, Path.cwd()) if row.state != "missing" else None
        click.echo("boot:    " + ("not tried (no row)" if boot is None else boot.line if boot.ok
                                  else f"FAILED: {boot.line}"))
        if boot is not None and not boot.ok:
            problems.append("boot")
            fixes.append("fix the row's config or python (the boot line names it), then run doctor again")
    else:
        click.echo("boot:    not tried")
    if problems:
        click.echo(f"fix: {'; '.join(fixes)} (broken: {', '.join(problems)})", err=True)
        sys.exit(EXIT_FAILED)


@main.command("install")
@click.option("--profile", default="headless", show_default=True, help="DSH profile to install into.")
@_PREFIX
@_DSH_HOME
@click.option(
    "--python",
    "python",
    default=None,
    help="Interpreter the plugin row starts (default: this one).",
)
def install(profile: str, prefix: Path | None, dsh_home: Path | None, python: str | None) -> None:
    """Pack node_shim and install it with `dsh plugin --profile PROFILE add <tgz>`."""
    try:
        env = ensure_host(_prefix(prefix, creating=True), _home(dsh_home))
        profile_dir = install_plugin(env, profile, [python] if python else None)
    except SidecarError as exc:
        _fail(exc)
    click.echo(f"installed {PACKAGE} into {profile_dir}")
    click.echo("enable it in that profile's cordis.patch.yml (row id `sidecar`); see README")
    _path_hint(env)


@main.command("add-local-plugin")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--profile", default="headless", show_default=True, help="DSH profile to install into.")
@_PREFIX
@_DSH_HOME
def add_local_plugin(directory: Path, profile: str, prefix: Path | None, dsh_home: Path | None) -> None:
    """Pack a local DSH plugin DIRECTORY and install it with `dsh plugin add` (replacing it)."""
    try:
        env = ensure_host(_prefix(prefix, creating=True), _home(dsh_home))
        profile_dir = install_package(env, profile, directory.resolve())
        record_local_plugin(env.dsh_home, directory.resolve())
    except SidecarError as exc:
        _fail(exc)
    click.echo(f"installed {directory.name} into {profile_dir}")
    _path_hint(env)


@main.command("new-plugin")
@click.argument("name")
@click.option("--dir", "parent", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Folder to create the plugin's folder NAME in.")
def new_plugin(name: str, parent: Path) -> None:
    """Scaffold the DSH tool plugin NAME (package.json, cordis.patch.yml, index.js with one tool) and a
    pytest test that records and replays it (docs/tool-plugin-guide.md)."""
    try:
        made = scaffold_plugin(name, parent)
    except SidecarError as exc:
        _fail(exc)
    shown = os.path.join(str(parent), name) if parent != Path(".") else name
    click.echo(f"created {shown}/: {', '.join(made.files)} (tool {made.tool})")
    click.echo("next:")
    for step in next_steps(made, shown):
        click.echo(f"  {step}")


@main.command("run", context_settings={"allow_interspersed_args": False})
@click.argument("task", required=False)
@click.option("--tool-cassette", "tool_file", default=None, help="Tool cassette file (relative to --cwd).")
@click.option("--include", "include", multiple=True, help="Tool name or `*` pattern the tool cassette selects.")
@click.option("--subagent-cassette", "subagent_file", default=None, help="Subagent cassette file (transparent).")
@click.option("--model-cassette", "model_file", default=None, help="Model cassette file (every provider call).")
@click.option("--script", default=None, help="Canonical mock script to /mock replay (instead of TASK).")
@click.option("--overwrite-wait-time-ms", "wait_ms", type=click.IntRange(min=0), default=None,
              help="With --script: replace every wait.")
@click.option("--record-mode", type=click.Choice(RECORD_MODES), default="none", show_default=True,
              help="none: replay only; once: record missing cassettes; all: re-record.")
@click.option("--patch", "patches", multiple=True, help="Extra --patch layer for dsh (repeatable).")
@click.option("--insert-row", "inserted", multiple=True, metavar="JSON",
              help='New profile row, e.g. \'{"id": "mcp-notes", "name": "@deepseek-ai/dsh-mcp-client", '
                   '"config": {...}}\' (repeatable).')
@click.option("--cwd", type=click.Path(file_okay=False, exists=True), default=None, help="DSH working directory.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds before the run is killed.")
@click.option("--json", "as_json", is_flag=True, help="Print the typed result as JSON (docs/run-result.schema.json).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="JSON object of test logic: filters, allow_redacted_replay, ignore, faults, stubs, volatile "
                   "(docs/test-logic.md).")
@click.option("--all-rows", is_flag=True,
              help="Compose every profile row, also those the run cannot use (docs/cold-boot.md).")
@click.option("--strict-replay", is_flag=True,
              help="A replay that diverged from its recording (REPLAY_DIVERGED) fails the run (default: a warning).")
@click.option("--trace", "trace", default=None, metavar="PATH",
              help="Write the run's trace page there, its JSON beside it (docs/trace.md).")
def run_command(
    task: str | None, tool_file: str | None, include: tuple[str, ...], subagent_file: str | None,
    model_file: str | None, script: str | None, wait_ms: int | None, record_mode: RecordMode,
    patches: tuple[str, ...], inserted: tuple[str, ...], cwd: str | None, timeout: float, as_json: bool,
    config_file: str | None, all_rows: bool, strict_replay: bool, trace: str | None,
) -> None:
    """Run one headless DSH turn with cassettes; exit with the run's exit code.

    \b
    dsh-sidecar run --tool-cassette w.ndjson --include weather_lookup --record-mode once -- \\
        '/mock run weather_lookup({"city": "Paris"})'

    The host: $DSH_SIDECAR_HOST (a host prefix), else the .host found from --cwd or this folder
    upwards (as git finds its repository). The DSH home: $DSH_HOME, else the host's dsh-home.
    """
    if (task is None) == (script is None):
        raise click.UsageError("give exactly one of TASK and --script")
    if (tool_file is None) != (not include):
        raise click.UsageError("--tool-cassette and --include go together")
    rows = [_inserted_row(text, n) for n, text in enumerate(inserted, 1)]
    # Paths on the command line are relative to the shell's directory, as everywhere else.
    tool_file, subagent_file, model_file, script, trace = (
        None if p is None else os.path.abspath(p) for p in (tool_file, subagent_file, model_file, script, trace)
    )
    logic = _logic(config_file)
    tool_cassette = None if tool_file is None else ToolCassette(file=tool_file, include=list(include))
    try:
        result = run(
            task, script=script, overwrite_wait_time_ms=wait_ms,
            tool_cassette=None if tool_cassette is None else tool_cassette.with_logic(logic),
            stubs=logic.get("stubs") or None,
            subagent_cassette=None if subagent_file is None else SubagentCassette(file=subagent_file),
            model_cassette=None if model_file is None else ModelCassette(file=model_file),
            record_mode=record_mode, patches=patches, rows=rows, cwd=cwd, timeout=timeout,
            record_hint="record it with `--record-mode once`", skip_unused_rows=not all_rows,
            strict_replay=strict_replay, trace=trace,
            config_hint="correct the `{key}` key of the --config file",
        )
    except SidecarError as exc:
        _fail(exc)
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
    else:
        click.echo(result.stdout, nl=False)
        click.echo(result.stderr, nl=False, err=True)
        for summary in (result.tool_cassette, result.subagent_cassette, result.model_cassette):
            if summary is not None and summary.mode == "record":
                state = "published" if summary.published else "NOT published (old cassette untouched)"
                click.echo(f"dsh-sidecar run: {summary.kind} cassette {summary.file} {state}", err=True)
        if result.trace is not None:
            click.echo(f"dsh-sidecar run: trace {_shown_path(result.trace)}", err=True)
        if result.timed_out:
            click.echo(f"dsh-sidecar run: TIMEOUT: the run passed {timeout:g} s and was killed", err=True)
    sys.exit(EXIT_TIMEOUT if result.timed_out else result.exit_code)


class _InsertedRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    id: str
    name: str
    config: dict[str, Any] = msgspec.field(default_factory=dict)


def _inserted_row(text: str, index: int) -> Row:
    """Decode one ``--insert-row`` value; a bad one is a usage error naming it and the shape."""
    try:
        row = msgspec.json.decode(text, type=_InsertedRow)
    except msgspec.DecodeError as exc:
        raise click.BadParameter(
            f"value {index}: {exc}; expected {{\"id\": ..., \"name\": ..., \"config\": {{...}}}}",
            param_hint="--insert-row",
        ) from None
    return Row(row.id, row.name, row.config, insert=True)


def _logic(config_file: str | None) -> dict[str, Any]:
    """The test-logic object of ``--config`` (``{}`` without it)."""
    if config_file is None:
        return {}
    try:
        with open(config_file, "rb") as handle:
            logic = json.loads(handle.read())
    except (OSError, ValueError):
        raise click.UsageError("--config: not a readable JSON file") from None
    if not isinstance(logic, dict):
        raise click.UsageError("--config: must hold one JSON object")
    unknown = sorted(set(logic) - set(LOGIC_KEYS))
    if unknown:
        raise click.UsageError(f"--config: unknown key {unknown[0]!r} (known: {', '.join(LOGIC_KEYS)})")
    return logic


class SessionNotFound(SidecarError):
    """No session log matches."""

    code = "SESSION_NOT_FOUND"


class SessionLogUnreadable(SidecarError):
    """A session log that cannot be opened or read (names the session folder, never a path)."""

    code = "SESSION_LOG_UNREADABLE"


def _sessions_home(dsh_home: Path | None) -> Path:
    """``--dsh-home``, else ``default_dsh_home()`` ($DSH_HOME, the project's host, ``~/.dsh``)."""
    return dsh_home if dsh_home is not None else default_dsh_home()


_Log = tuple[SessionSummary, Path, list[dict[str, Any]]]


def _read_log(entry: Path) -> _Log | SidecarError | None:
    """One session folder's log decoded and summarized, the named error that refuses it, or
    ``None`` when the folder holds no log."""
    try:
        path = next((entry / n for n in LOG_NAMES if (entry / n).is_file()), None)
        if path is None:
            return None
        source = f"{entry.name}/{path.name}"
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return SessionLogUnreadable(f"{entry.name}/session.jsonl: {reason_of(exc)}")
    try:
        events = decode_session_log(data, source=source)
    except SessionLogInvalid as exc:
        return exc
    return (summarize(events), path, events) if events else None


def _session_logs(home: Path, cwd: str) -> list[_Log]:
    """The logs of CWD, newest first; each refused one is named on stderr (once) and skipped."""
    folder = home / "sessions" / project_key(os.path.realpath(cwd))
    found = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        log = _read_log(entry)
        if isinstance(log, SidecarError):
            click.echo(f"dsh-sidecar: {log}; skipped", err=True)
        elif log is not None:
            found.append(log)
    return sorted(found, key=lambda item: item[0].created_at or 0, reverse=True)


def _session_folder(home: Path, cwd: str, session_id: str) -> Path | None:
    """The folder of SESSION_ID: CWD's first, else any folder's (an id names one session wherever it ran)."""
    root = home / "sessions"
    try:
        segment = encode_segment(session_id)
    except ValueError:
        return None  # the empty id
    local = root / project_key(os.path.realpath(cwd)) / segment
    if local.is_dir():
        return local
    for project in sorted(root.iterdir()) if root.is_dir() else []:
        if (project / segment).is_dir():
            return project / segment
    return None


def _when(ms: int | None) -> str:
    return "?" if ms is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000))


@main.command("show")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--against", "against", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A second recording of the same kind (a re-recording against the committed cassette): "
                   "the page aligns them position by position.")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The page to write (default: FILE's name with .html, in this folder); its JSON beside it.")
@_DSH_HOME
def show(file: Path, against: Path | None, output: Path | None, dsh_home: Path | None) -> None:
    """Render a tool, model or subagent cassette, or a session log (its path, or a session id looked
    up as `sessions show` does), as a trace page (docs/trace.md).

    \b
    dsh-sidecar show cassettes/test_weather/test_paris_weather.tools.ndjson
    dsh-sidecar show new.tools.ndjson --against cassettes/old.tools.ndjson
    dsh-sidecar show session-83ead6e0-...
    """
    named = file.name
    if not file.exists() and (folder := _session_folder(_sessions_home(dsh_home), ".", str(file))) is not None:
        log = next((folder / n for n in LOG_NAMES if (folder / n).is_file()), None)
        file = file if log is None else log
    redactor = Redactor()
    try:
        kind, shown = run_of(file, redactor)
        comparison = None
        if against is not None:
            other_kind, other = run_of(against, redactor)
            if other_kind != kind:
                raise ShowUnreadable(f"{against.name}: a {other_kind} recording; --against takes a {kind} one "
                                     f"as {file.name} is")
            comparison = align(kind, other, shown, (shown_name(against), shown_name(file)))
    except SidecarError as error:
        _fail(error)
    by_id = named != file.name  # a session id, found as its log
    page = output or Path((named if by_id else file.name.removesuffix(".zstd").rsplit(".", 1)[0]) + ".html")
    title = (named if by_id else shown_name(file)) + ("" if against is None else f" against {shown_name(against)}")
    write_trace(TraceDocument(title=title, runs=[shown], comparison=comparison), redactor, page)
    click.echo(f"dsh-sidecar show: wrote {_shown_path(str(page))} ({json_path_of(page).name} beside it)")


@main.group()
def sessions() -> None:
    """List and show DSH session logs (decoded: turns, tool calls and results, mock status)."""


@sessions.command("list")
@click.option("--cwd", default=".", show_default=True, help="The DSH working directory whose sessions to list.")
@_DSH_HOME
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summaries as JSON.")
@click.option("--last-run", is_flag=True,
              help="The sessions of the last pytest run whose rootdir is CWD (each with its test's node id).")
@click.option("--test", default=None, metavar="NODEID",
              help="The sessions of one test of the last pytest run (a module or class prefix: each of its tests).")
def sessions_list(cwd: str, dsh_home: Path | None, limit: int, as_json: bool, last_run: bool,
                  test: str | None) -> None:
    """The sessions of CWD, newest first (a log that cannot be read is named on stderr and skipped);
    with --last-run or --test, the sessions the last pytest run in CWD (its rootdir) ran."""
    home = _sessions_home(dsh_home)
    index = Path(cwd) / SESSION_INDEX
    tests: list[str | None]
    if last_run or test is not None:
        runs = _indexed_runs(index, test)
        found = []
        tests = []
        for run in runs:
            try:
                folder = _session_folder(home, run.cwd, run.session) if run.session else None
            except ValueError:  # a NUL in a hand-edited line's folder: no such session
                folder = None
            log = _read_log(folder) if folder is not None else None
            if isinstance(log, SidecarError):
                click.echo(f"dsh-sidecar: {log}; skipped", err=True)
            elif log is not None:
                found.append(log)
                tests.append(run.nodeid)
        found, tests = found[:limit], tests[:limit]
    else:
        found = _session_logs(home, cwd)[:limit]
        tests = [None] * len(found)
    if as_json:
        click.echo(msgspec.json.encode([s for s, _, _ in found]).decode())
        return
    if not found:
        hint = "" if last_run or test is not None or not index.is_file() else (
            "; a pytest run's sessions ran in its temporary folders: dsh-sidecar sessions list --last-run")
        click.echo(f"no sessions for this {'test' if test is not None else 'run' if last_run else 'folder'}{hint}",
                   err=True)
        return
    for (s, _, _), nodeid in zip(found, tests, strict=True):
        ends = ",".join(s.end_reasons) or "-"
        mock = f" mock:{s.mock_state}" if s.mock_state else ""
        where = f"  {nodeid}" if nodeid is not None else ""
        click.echo(f"{s.session_id}  {_when(s.created_at)}  turns:{s.turns} end:{ends} tools:{s.tool_calls}"
                   f" errors:{s.tool_errors}{mock}  {s.task[:60]!r}{where}")


def _indexed_runs(index: Path, test: str | None) -> list[IndexedRun]:
    """The index's runs (of ``test``: its node id, a parametrized case of it, or a module or class
    prefix); a line that is not a run is skipped (the file is ours, written by the plugin)."""
    try:
        lines = index.read_bytes().splitlines()
    except FileNotFoundError:
        _fail(SessionNotFound(f"no pytest run is indexed in this folder ({SESSION_INDEX}); run pytest here, "
                              "or pass --cwd ROOTDIR"))
    except OSError as exc:
        _fail(SessionLogUnreadable(f"{SESSION_INDEX}: {reason_of(exc)}"))
    runs = []
    for line in lines:
        try:
            runs.append(msgspec.json.decode(line, type=IndexedRun))
        except msgspec.DecodeError:
            continue
    if test is None:
        return runs
    return [r for r in runs if r.nodeid == test or r.nodeid.startswith((test + "[", test + "::"))]


@sessions.command("show")
@click.argument("session_id", required=False)
@click.option("--cwd", default=".", show_default=True, help="The DSH working directory of the session.")
@_DSH_HOME
@click.option("--json", "as_json", is_flag=True, help="Summary, tool calls, results, mock status and events as JSON.")
@click.option("--events", "raw_events", is_flag=True,
              help="Print every event as one JSON line (the system prompt and tool list folded; --full prints them).")
@click.option("--full", is_flag=True, help="With --events: the system prompt and tool definitions whole.")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The test logic JSON your runs use (as run --config): its filters hide values in the call tree "
                   "too (credentials are always hidden).")
def sessions_show(session_id: str | None, cwd: str, dsh_home: Path | None, as_json: bool, raw_events: bool,
                  full: bool, config_file: str | None) -> None:
    """Show SESSION_ID (looked up in CWD's sessions, then in every folder's; default: the newest
    session of CWD), decoded."""
    home = _sessions_home(dsh_home)
    match: _Log | SidecarError | None
    if session_id is None:
        found = _session_logs(home, cwd)
        match = found[0] if found else None
    else:
        folder = _session_folder(home, cwd, session_id)
        match = None if folder is None else _read_log(folder)
    if isinstance(match, SidecarError):
        _fail(match)
    if match is None and session_id is None:
        _fail(SessionNotFound("no session for this folder; list them with `dsh-sidecar sessions list`"))
    if match is None:
        _fail(SessionNotFound(
            f"session {session_id} is in no folder's sessions of this DSH home; list a folder's with "
            "`dsh-sidecar sessions list --cwd DIR`, or name the home with --dsh-home"
        ))
    summary, path, events = match
    redactor = _session_filters(config_file)
    calls, results, statuses = tool_calls(events), tool_results(events), mock_statuses(events)
    if raw_events:
        for event in events:
            click.echo(json.dumps(event if full else _folded(event), ensure_ascii=False))
        return
    if as_json:
        document = {"summary": summary, "path": str(path), "tool_calls": calls, "tool_results": results,
                    "mock": statuses, "events": events}
        click.echo(msgspec.json.encode(document).decode())
        return
    click.echo(f"session {summary.session_id} ({_when(summary.created_at)}, depth {summary.delegation_depth})")
    click.echo(f"log:     {path}")
    click.echo(f"task:    {summary.task[:200]!r}")
    click.echo(f"turns:   {summary.turns} (end: {', '.join(summary.end_reasons) or '-'})")
    width = max(shutil.get_terminal_size().columns, 60)
    by_call = {r.call_id: r for r in results}
    tools = {c.call_id: c.tool for c in calls}
    for c in calls:
        # The call tree: each call with its arguments and its result (credentials filtered: a log
        # keeps what the tool got), cut to the terminal's width; an error's line is shown whole.
        click.echo(f"call     {c.call_id} {c.tool} (turn {c.turn}, step {c.step})")
        click.echo(_cut(f"  args   {_shown(redactor, c.arguments, c.tool, 'args')}", width))
        r = by_call.pop(c.call_id, None)
        if r is not None:
            click.echo(_result_line(redactor, r, width, tools.get(r.call_id, "")))
    for r in by_call.values():  # a result whose call the log does not hold
        click.echo(_result_line(redactor, r, width, "", orphan=True))
    for m in statuses:
        click.echo(f"mock     {m.state} steps {m.steps_completed}/{m.step_count}"
                   + (f" {m.error_code}" if m.error_code else ""))
    click.echo(f"final:   {summary.final_text[:200]!r}")


def _session_filters(config_file: str | None) -> Redactor:
    """The credential filter, and the ``filters`` of a test logic file (their functions imported
    from this folder, as a run imports them from its cwd)."""
    entries = _logic(config_file).get("filters") or []
    if not isinstance(entries, list):
        raise click.UsageError("--config: filters must be a list")
    functions: dict[str, Callable[..., Any]] = {}
    try:
        for index, entry in enumerate(entries):
            ref = entry.get("call") if isinstance(entry, dict) else None
            if isinstance(ref, str) and ref not in functions:
                functions[ref] = resolve(ref, os.getcwd(), functools.partial(FilterUnresolved, index))
        return Redactor(entries, functions)
    except SidecarError as error:
        _fail(error)


def _folded(event: dict[str, Any]) -> dict[str, Any]:
    """A ``request/header`` event with its system prompt as its size and its tools as their names
    (rc.8 writes them whole at each turn: 20 KB that hide the rest of the log)."""
    data = event.get("data")
    if event.get("type") != "request/header" or not isinstance(data, dict) or not isinstance(data.get("header"), dict):
        return event
    header: dict[str, Any] = data["header"]
    folded = dict(header)
    if isinstance(header.get("system"), str):
        folded["system"] = f"<system prompt: {len(header['system'])} characters; --full prints it>"
    if isinstance(header.get("tools"), list):
        folded["tools"] = [t.get("name") if isinstance(t, dict) else t for t in header["tools"]]
    return {**event, "data": {**data, "header": folded}}


def _shown(redactor: Redactor, value: object, tool: str, where: Literal["args", "result"]) -> str:
    """``value`` as one line of JSON with its filtered parts replaced (text that is not JSON as is)."""
    if isinstance(value, str):
        return str(redactor.scrub(redactor.text(value, tool=tool, where=where))).replace("\n", "\\n")
    return json.dumps(redactor.scrub(redactor.value(value, tool=tool, where=where)), ensure_ascii=False,
                      separators=(",", ":"))


def _cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width - 1] + "…"


def _result_line(redactor: Redactor, r: SessionToolResult, width: int, tool: str, *, orphan: bool = False) -> str:
    head = f"result   {r.call_id}: " if orphan else "  result "
    if r.is_error:
        code = f" {r.error_code}" if r.error_code else ""
        output = str(redactor.scrub(r.output))
        return f"{head}error{code}: {output}".replace("\n", "\\n")  # whole: an error is read to its end
    # A JSON object or array the tool's renderer printed is decoded (its credentials filtered by key).
    decoded = json_document(r.output)
    return _cut(f"{head}ok: {_shown(redactor, r.output if decoded is None else decoded, tool, 'result')}", width)


def _last_written(folder: Path) -> float:
    """When a session folder was last written: the newest mtime of it and its entries."""
    times = [folder.stat().st_mtime]
    for entry in folder.iterdir():
        try:
            times.append(entry.lstat().st_mtime)
        except OSError:
            continue
    return max(times)


@sessions.command("prune")
@click.option("--older-than", "days", type=click.FloatRange(min=0), default=None, metavar="DAYS",
              help="Only sessions last written more than DAYS days ago (default: every session).")
@click.option("--cwd", default=None, help="Only the sessions of this DSH working directory (default: every folder's).")
@_DSH_HOME
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
def sessions_prune(days: float | None, cwd: str | None, dsh_home: Path | None, dry_run: bool) -> None:
    """Remove session logs (whole session folders) by age and by working folder.

    Session logs keep what a cassette's filters removed: the live arguments and results of a
    recording run. Prints one line per session it removes (its id and its folder's key).
    """
    root = _sessions_home(dsh_home) / "sessions"
    if cwd is not None:
        projects = [root / project_key(os.path.realpath(cwd))]
    else:
        projects = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()) if root.is_dir() else []
    cutoff = None if days is None else time.time() - days * 86400
    verb = "would remove" if dry_run else "removed"
    removed = kept = 0
    for project in projects:
        entries = sorted(project.iterdir()) if project.is_dir() else []
        for entry in entries:
            if not entry.is_dir() or entry.is_symlink():
                continue
            if cutoff is not None and _last_written(entry) >= cutoff:
                kept += 1
                continue
            if not dry_run:
                shutil.rmtree(entry)
            removed += 1
            click.echo(f"{verb} {entry.name} ({project.name})")
    click.echo(f"{removed} session(s) {'to remove' if dry_run else 'removed'}, {kept} kept", err=True)


@main.command("import")
@click.argument("session", required=False)
@click.option("--last", is_flag=True, help="Import the newest session of CWD instead of naming one.")
@click.option("--cwd", default=".", show_default=True, help="The DSH working directory of the session (an id is "
              "looked up there first, then in every folder's sessions).")
@_DSH_HOME
@click.option("--model-cassette", "model_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the session's provider calls here as a model cassette (create-only).")
@click.option("--request-view", type=click.Choice(["metadata", "full"]), default="metadata", show_default=True,
              help="As modelCassette.requestView: full also keeps the filtered request views.")
@click.option("--filters", "filters_json", default='["credentials"]', show_default=True, metavar="JSON",
              help="The modelCassette.filters rules (JSON list) run over each request view; a replay declares "
                   "the same (`[]`: none).")
@click.option("--tools", "--include", "include", multiple=True, metavar="PATTERN",
              help="Tools whose calls to import as a tool cassette (repeat; `*` wildcards, as toolCassette.include); "
                   "a replay serves them with no tool body.")
@click.option("--tool-cassette", "tool_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the --tools calls as a tool cassette (create-only; with --test: beside the "
                   "model cassette).")
@click.option("--test", "test_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write a pytest module replaying the session through the `dsh` fixture, its model "
                   "cassette where the fixture looks (cassettes/<module>/<test>.model.ndjson beside it).")
@click.option("--turn", type=click.IntRange(min=1), default=None,
              help="A session of several turns: import its first (1), the one turn a headless replay can answer.")
def import_session(session: str | None, last: bool, cwd: str, dsh_home: Path | None, model_file: Path | None,
                   request_view: str, filters_json: str, include: tuple[str, ...], tool_file: Path | None,
                   test_file: Path | None, turn: int | None) -> None:
    """Import SESSION (a session id, or a session.jsonl / session.jsonl.zstd path) as cassettes that
    replay it offline (docs/import.md); a log that cannot be imported faithfully is refused by name
    and nothing is written.

    \b
    dsh-sidecar import session-83ead6e0-... --model-cassette tests/cassettes/paris.model.ndjson
    dsh-sidecar import session-83ead6e0-... --test tests/test_paris.py --tools weather_lookup
    """
    if (session is None) == (not last):
        raise click.UsageError("name one session: SESSION (an id or a log path) or --last (the newest of CWD)")
    if model_file is not None and test_file is not None:
        raise click.UsageError("--test writes the model cassette where the dsh fixture looks; drop --model-cassette")
    if model_file is None and test_file is None:
        raise click.UsageError("nothing to import: pass --model-cassette FILE or --test PATH")
    if tool_file is not None and test_file is not None:
        raise click.UsageError("--test writes the tool cassette where the dsh fixture looks; drop --tool-cassette")
    if include and tool_file is None and test_file is None:
        raise click.UsageError("--tools: name where its tool cassette goes, --tool-cassette FILE (or use --test)")
    if tool_file is not None and not include:
        raise click.UsageError("--tool-cassette: name the tools whose calls it holds, --tools PATTERN")
    try:
        raw_filters = json.loads(filters_json)
        filters = parse_model_config({"mode": "replay", "file": "-", "filters": raw_filters}, cwd=".").filters
    except ValueError:
        raise click.UsageError("--filters: not a JSON list of filter rules") from None
    except SidecarError as error:
        _fail(error)
    summary, log_path, events = _import_source(session, cwd, _sessions_home(dsh_home))
    try:
        refuse_other_profile(events)  # before turns: no turn of a `dsh web` session replays headless
        events = one_turn(events, turn)
        # A subagent's model calls are in its own log beside the parent's (and its children's in theirs).
        child_logs = [_events_of(path) for path in _descendants(log_path.parent.parent, summary.session_id)]
        children = [calls_of(child, child=True) for child in child_logs]
        parent = calls_of(events)
        override = log_path.parent / OVERRIDE_NAME
        # A dsh-llm-replay fixture's sidecar: carried where it is the log's own calls, else refused.
        agreed = check_override(override.read_bytes(), parent.calls) if override.is_file() else None
        log = merged(parent, children)
        lines = model_lines(log, filters=filters, request_view="full" if request_view == "full" else "metadata")
        served = tool_lines(events, include, cwd=log.cwd, filters=filters, children=child_logs) if include \
            else None
        source = None
        if test_file is not None:
            source = module_source(events, session_id=summary.session_id, cwd=log.cwd, module_stem=test_file.stem,
                                   filters=raw_filters, delegated=bool(children), include=include)
            if test_file.exists():
                raise ImportTestExists(test_file.name)
            name = function_name(summary.session_id)
            model_file = test_file.parent / cassette_path(test_file.stem, name)
            if served is not None:
                tool_file = test_file.parent / cassette_path(test_file.stem, name, "tools")
        assert model_file is not None  # checked above
        model_file.parent.mkdir(parents=True, exist_ok=True)
        if tool_file is not None and any(os.path.lexists(p) for p in (tool_file, partial_path(str(tool_file)))):
            # Both files are create-only: one that exists refuses the import before either is written.
            raise CassetteExists(tool_file.name)
        write_lines(str(model_file), lines)
        if served is not None and tool_file is not None:
            tool_file.parent.mkdir(parents=True, exist_ok=True)
            write_tool_lines(str(tool_file), served)
        if source is not None and test_file is not None:
            _write_new(test_file, source)
        report = verify_file(str(model_file))
        tool_report = None if tool_file is None else verify_tool_file(str(tool_file))
    except SidecarError as error:
        _fail(error)
    except OSError as exc:
        _fail(ImportIOError(Path(exc.filename or "").name or "a file", reason_of(exc)))
    if report.error is not None:
        _fail(report.error)
    if tool_report is not None and tool_report.error is not None:
        _fail(tool_report.error)
    lanes = ", ".join(f"{lane} {n}" for lane, n in report.lanes.items()) or "none"
    left = "".join(f"; left out {name} (the log holds its request, not its stream)" for name in log.left_out)
    click.echo(f"dsh-sidecar import: session {summary.session_id}: wrote {_shown_path(str(model_file))}: "
               f"{report.calls} calls ({lanes}){left}")
    if test_file is not None:
        click.echo(f"dsh-sidecar import: wrote {_shown_path(str(test_file))}: "
                   f"{function_name(summary.session_id)} (run it: pytest {_shown_path(str(test_file))})")
    click.echo(f"valid: dsh-model-cassette v{report.version}: {report.calls} calls ({lanes}), {report.frames} frames, "
               f"complete tail{IMPORTED_NOTE}")
    if tool_report is not None and tool_file is not None:
        tools = ", ".join(f"{tool} {n}" for tool, n in tool_report.tools.items())
        click.echo(f"dsh-sidecar import: wrote {_shown_path(str(tool_file))}: {tool_report.calls} calls ({tools}), "
                   "served by stand-ins with no tool body")
        click.echo(f"valid: {verify_summary(tool_report)}")
    if agreed is not None:
        click.echo(f"dsh-sidecar import: {OVERRIDE_NAME}: {agreed} entr{'y' if agreed == 1 else 'ies'}, each the "
                   "log's own call (carried as the log holds it)")
    click.echo(f"dsh-sidecar import: not in the log, per field: {'; '.join(_gaps(log, tool_report is not None))} "
               "(docs/import.md)")


def _gaps(log: LogCalls, tools: bool) -> list[str]:
    """What the written files lack that a recording holds, by field (the import's honest summary)."""
    gaps = ["each call's wait before its first chunk (replays start streaming at once)"]
    if any(call.lane == COMPACTION_LANE for call in log.calls):
        gaps.append("a compaction's chunks (made from its logged answer)")
    if tools:
        gaps.append("tool values, deferred contexts and host state (stand-ins serve the content the model was "
                    "shown)")
    else:
        gaps.append("tool values (the tools run live at replay; --tools serves them)")
    if log.left_out:
        gaps.append("the session title's stream (left out; the host keeps its fallback title)")
    return gaps


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` with ``text``; never overwrite (a test that appeared meanwhile is kept)."""
    try:
        with open(path, "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise ImportTestExists(path.name) from None


def _import_source(session: str | None, cwd: str, home: Path) -> _Log:
    """The log SESSION names (a log file's path, else a session id looked up as `sessions show`
    does; ``None``: CWD's newest): its summary, path and events."""
    match: _Log | SidecarError | None
    if session is None:
        # The newest session a user started: a subagent's session (newer than its parent's) is
        # imported with its parent.
        found = [log for log in _session_logs(home, cwd) if log[0].delegation_depth == 0]
        if not found:
            _fail(SessionNotFound("no session for this folder; list them with `dsh-sidecar sessions list --cwd DIR`"))
        match = found[0]
    elif (path := Path(session)).name in LOG_NAMES and path.is_file():
        try:
            events = decode_session_log(path.read_bytes(), source=path.name)
        except OSError as exc:
            _fail(SessionLogUnreadable(f"{path.name}: {reason_of(exc)}"))
        except SessionLogInvalid as exc:
            _fail(exc)
        match = (summarize(events), path, events) if events else None
    else:
        folder = _session_folder(home, cwd, session)
        match = None if folder is None else _read_log(folder)
    if isinstance(match, SidecarError):
        _fail(match)
    if match is None:
        _fail(SessionNotFound(
            f"no session log for {printable((session or '')[:80])!r}; pass a session id (`dsh-sidecar sessions list "
            "--cwd DIR`) or a session.jsonl[.zstd] path, and --dsh-home when it is another home's"))
    return match


def _descendants(project: Path, session_id: str) -> list[Path]:
    """The logs of the same folder whose parent is ``session_id``, and theirs, depth first (its
    subagents' sessions); only each log's header line is read to find them."""
    parents: dict[object, list[Path]] = {}
    for entry in sorted(project.iterdir()) if project.is_dir() else []:
        path = next((entry / n for n in LOG_NAMES if (entry / n).is_file()), None)
        if path is not None:
            parents.setdefault(_parent_of(path), []).append(path)
    found: list[Path] = []
    stack = [session_id]
    while stack:
        for path in parents.get(stack.pop(), []):
            if path not in found:
                found.append(path)
                stack.append(path.parent.name)
    return found


def _events_of(path: Path) -> list[dict[str, Any]]:
    """A child session's decoded log.

    Raises:
        SessionLogInvalid: a log rc.8 did not write whole.
        SessionLogUnreadable: it cannot be read.
    """
    try:
        return decode_session_log(path.read_bytes(), source=f"{path.parent.name}/{path.name}")
    except OSError as exc:
        raise SessionLogUnreadable(f"{path.parent.name}/{path.name}: {reason_of(exc)}") from None


def _parent_of(path: Path) -> object:
    """The ``parentSession`` of a log's header line (``None`` when unreadable or absent)."""
    try:
        with open(path, "rb") as raw:
            reader = zstandard.ZstdDecompressor().stream_reader(raw) if path.suffix == ".zstd" else raw
            head = reader.read(_HEADER_BYTES).split(b"\n", 1)[0]
        header = msgspec.json.decode(head)
    except (OSError, zstandard.ZstdError, msgspec.DecodeError):
        return None
    return header.get("parentSession") if isinstance(header, dict) else None


_HEADER_BYTES = 65536  # rc.8 writes the header (id, cwd, parent, depth) as the log's short first line


main.add_command(mock_cli, "mock")
main.add_command(model_cassette_cli, "model-cassette")
main.add_command(subagent_cassette_cli, "subagent-cassette")
main.add_command(tool_cassette_cli, "tool-cassette")


def _shown_path(path: str) -> str:
    """``path`` relative to this folder when below it (a terminal line never shows an absolute path
    it does not need)."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    except ValueError:
        return path
