"""``dsh-sidecar``: set up the host, install the plugin, and the feature CLIs.

Exit codes: 0 ok, 1 the thing checked is broken or invalid, 2 usage or environment error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

import click
import msgspec

from bridge.hostenv import HostError, ensure_host, find_node, host_env
from bridge.install import PACKAGE, install_package, install_plugin
from bridge.run import RECORD_MODES, RecordMode, SubagentCassette, ToolCassette, run
from python_core.errors import SidecarError
from python_core.mock.cli import mock as mock_cli
from python_core.subagent_cassette.cli import cli as subagent_cassette_cli
from python_core.tool_cassette.cli import main as tool_cassette_cli

__all__ = ["main"]

_PREFIX = click.option(
    "--prefix",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path(".host"),
    show_default=True,
    help="Project-local host prefix (node, pnpm, dsh, default DSH_HOME).",
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


def _fail(error: SidecarError, hint_exit: int = 2) -> NoReturn:
    click.echo(f"dsh-sidecar: {error}", err=True)
    sys.exit(hint_exit)


@click.group()
def main() -> None:
    """Record/replay and deterministic testing for DSH rc.8 agents."""


@main.group()
def host() -> None:
    """The DSH rc.8 host toolchain (Node, pnpm, dsh)."""


@host.command("install")
@_PREFIX
@_DSH_HOME
def host_install(prefix: Path, dsh_home: Path | None) -> None:
    """Install Node (if needed), pnpm and DSH rc.8 with the hmr fix under PREFIX."""
    try:
        env = ensure_host(prefix, _home(dsh_home))
    except SidecarError as exc:
        _fail(exc)
    click.echo(f"dsh: {env.dsh}")
    click.echo(f"DSH_HOME: {env.dsh_home}")


def _boot_check(env_dsh: Path, environ: dict[str, str]) -> tuple[bool, str]:
    """Boot the headless profile once with the sidecar row on and an ordinary task."""
    with tempfile.TemporaryDirectory() as work:
        patch = Path(work) / "doctor.patch.yml"
        patch.write_text(
            "- id: sidecar\n  name: dsh-sidecar-shim\n  disabled: false\n  config: {}\n"
            "- id: agent-default-model\n  config: { provider: mock, model: mock }\n"
        )
        proc = subprocess.run(
            [str(env_dsh), "--profile", "headless", "--patch", str(patch), "doctor"],
            cwd=work, env=environ, capture_output=True, text=True, timeout=120,
        )
    ok = proc.returncode == 0 and "dsh-sidecar mock route" in proc.stdout
    return ok, (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]


@host.command("doctor")
@_PREFIX
@_DSH_HOME
def host_doctor(prefix: Path, dsh_home: Path | None) -> None:
    """Print Node, pnpm and DSH versions, the profile dir, and whether a headless boot works."""
    env = host_env(prefix, _home(dsh_home))
    environ = env.environ()
    problems: list[str] = []

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
    profile = env.dsh_home / "profiles" / "headless"
    click.echo(f"profile: {profile}")
    installed = (profile / "node_modules" / PACKAGE).is_dir()
    click.echo(f"plugin:  {'installed' if installed else 'not installed'}")
    if pnpm is None or dsh is None:
        problems.append("host")
    if not installed:
        problems.append("plugin")
    if dsh is not None and installed:
        ok, last = _boot_check(env.dsh, environ)
        click.echo(f"boot:    {'ok' if ok else 'FAILED: ' + last}")
        if not ok:
            problems.append("boot")
    else:
        click.echo("boot:    not tried")
    if problems:
        click.echo(
            "fix: run `dsh-sidecar host install` then `dsh-sidecar install --profile headless` "
            f"(broken: {', '.join(problems)})",
            err=True,
        )
        sys.exit(1)


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
def install(profile: str, prefix: Path, dsh_home: Path | None, python: str | None) -> None:
    """Pack node_shim and install it with `dsh plugin --profile PROFILE add <tgz>`."""
    try:
        env = ensure_host(prefix, _home(dsh_home))
        profile_dir = install_plugin(env, profile, [python] if python else None)
    except SidecarError as exc:
        _fail(exc)
    click.echo(f"installed {PACKAGE} into {profile_dir}")
    click.echo("enable it in that profile's cordis.patch.yml (row id `sidecar`); see README")


@main.command("add-local-plugin")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--profile", default="headless", show_default=True, help="DSH profile to install into.")
@_PREFIX
@_DSH_HOME
def add_local_plugin(directory: Path, profile: str, prefix: Path, dsh_home: Path | None) -> None:
    """Pack a local DSH plugin DIRECTORY and install it with `dsh plugin add` (replacing it)."""
    try:
        env = ensure_host(prefix, _home(dsh_home))
        profile_dir = install_package(env, profile, directory.resolve())
    except SidecarError as exc:
        _fail(exc)
    click.echo(f"installed {directory.name} into {profile_dir}")


@main.command("run", context_settings={"allow_interspersed_args": False})
@click.argument("task", required=False)
@click.option("--tool-cassette", "tool_file", default=None, help="Tool cassette file (relative to --cwd).")
@click.option("--include", "include", multiple=True, help="Tool name or `*` pattern the tool cassette selects.")
@click.option("--subagent-cassette", "subagent_file", default=None, help="Subagent cassette file (transparent).")
@click.option("--script", default=None, help="Canonical mock script to /mock replay (instead of TASK).")
@click.option("--overwrite-wait-time-ms", "wait_ms", type=click.IntRange(min=0), default=None,
              help="With --script: replace every wait.")
@click.option("--record-mode", type=click.Choice(RECORD_MODES), default="none", show_default=True,
              help="none: replay only; once: record missing cassettes; all: re-record.")
@click.option("--patch", "patches", multiple=True, help="Extra --patch layer for dsh (repeatable).")
@click.option("--cwd", type=click.Path(file_okay=False, exists=True), default=None, help="DSH working directory.")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="Seconds before the run is killed.")
@click.option("--json", "as_json", is_flag=True, help="Print the typed result as JSON (docs/run-result.schema.json).")
def run_command(
    task: str | None, tool_file: str | None, include: tuple[str, ...], subagent_file: str | None,
    script: str | None, wait_ms: int | None, record_mode: RecordMode, patches: tuple[str, ...], cwd: str | None,
    timeout: float, as_json: bool,
) -> None:
    """Run one headless DSH turn with cassettes; exit with the run's exit code.

    \b
    dsh-sidecar run --tool-cassette w.ndjson --include weather_lookup --record-mode once -- \\
        '/mock run weather_lookup({"city": "Paris"})'
    """
    if (task is None) == (script is None):
        raise click.UsageError("give exactly one of TASK and --script")
    if (tool_file is None) != (not include):
        raise click.UsageError("--tool-cassette and --include go together")
    # Paths on the command line are relative to the shell's directory, as everywhere else.
    tool_file, subagent_file, script = (
        None if p is None else os.path.abspath(p) for p in (tool_file, subagent_file, script)
    )
    try:
        result = run(
            task, script=script, overwrite_wait_time_ms=wait_ms,
            tool_cassette=None if tool_file is None else ToolCassette(file=tool_file, include=list(include)),
            subagent_cassette=None if subagent_file is None else SubagentCassette(file=subagent_file),
            record_mode=record_mode, patches=patches, cwd=cwd, timeout=timeout,
            record_hint="record it with `--record-mode once`",
        )
    except SidecarError as exc:
        _fail(exc, exc.exit_code)
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
    else:
        click.echo(result.stdout, nl=False)
        click.echo(result.stderr, nl=False, err=True)
        for summary in (result.tool_cassette, result.subagent_cassette):
            if summary is not None and summary.mode == "record":
                state = "published" if summary.published else "NOT published (old cassette untouched)"
                click.echo(f"dsh-sidecar run: {summary.kind} cassette {summary.file} {state}", err=True)
        if result.timed_out:
            click.echo(f"dsh-sidecar run: TIMEOUT: the run passed {timeout:g} s and was killed", err=True)
    sys.exit(124 if result.timed_out else result.exit_code)


main.add_command(mock_cli, "mock")
main.add_command(subagent_cassette_cli, "subagent-cassette")
main.add_command(tool_cassette_cli, "tool-cassette")
