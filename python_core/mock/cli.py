"""``dsh-sidecar mock``: validate and convert replay sources offline.

Exit codes: ``python_core.cli_errors``'s table (0 ok; 1 invalid or unreadable input,
``INVALID_SCRIPT``, ``CONVERSION_MISMATCH``, ``SOURCE_UNREADABLE``; 2 usage). Errors go to
stderr as one ``CODE: message`` line.
"""

from __future__ import annotations

import click

from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.cli_errors import NamedFailure
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.script import encode_script, executable_steps, script_id
from dsh_sidecar.python_core.mock.source import load_source, read_source, source_name_for

__all__ = ["mock"]


@click.group("mock")
@click.version_option(__version__, message="%(prog)s %(version)s")
def mock() -> None:
    """Deterministic mock model: check and convert replay sources."""


@mock.command("validate")
@click.argument("file")
@click.option("--turn", type=click.IntRange(min=1), help="For session logs: check one turn.")
def validate(file: str, turn: int | None) -> None:
    """Check FILE (canonical script, DSH JSONL or zstd JSONL) and summarize it."""
    name = source_name_for(file)
    try:
        kind, script = load_source(
            read_source(file, source=name, follow=True), source_name=name, preserve_timing=True, turn=turn
        )
    except SidecarError as error:
        raise NamedFailure(error) from None
    steps = executable_steps(script)
    calls = sum(len(step.calls) for step in steps)
    waits = sum(1 for step in steps if step.wait_before is not None)
    click.echo(
        f"ok: {name} ({kind}): {len(steps)} executable step(s), {calls} tool call(s), "
        f"{waits} explicit wait(s), script {script_id(script)}"
    )


@mock.command("convert")
@click.argument("session_jsonl")
@click.option(
    "--preserve-timing", is_flag=True, help="Turn reliable model latencies into explicit waits."
)
@click.option("--turn", type=click.IntRange(min=1), help="Convert only this turn.")
def convert(session_jsonl: str, preserve_timing: bool, turn: int | None) -> None:
    """Print the canonical script of SESSION_JSONL (plain or zstd) to stdout."""
    name = source_name_for(session_jsonl)
    try:
        _, script = load_source(
            read_source(session_jsonl, source=name, follow=True),
            source_name=name,
            preserve_timing=preserve_timing,
            turn=turn,
        )
    except SidecarError as error:
        raise NamedFailure(error) from None
    click.echo(encode_script(script).decode())
