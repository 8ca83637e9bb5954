"""``dsh-sidecar``: set up the host, install the plugin, and the feature CLIs.

Exit codes: 0 ok, 1 the thing checked is broken or invalid, 2 usage or environment error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from bridge.hostenv import HostError, ensure_host, find_node, host_env
from bridge.install import PACKAGE, install_package, install_plugin
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


def _fail(error: SidecarError, hint_exit: int = 2) -> None:
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


main.add_command(mock_cli, "mock")
main.add_command(subagent_cassette_cli, "subagent-cassette")
main.add_command(tool_cassette_cli, "tool-cassette")
