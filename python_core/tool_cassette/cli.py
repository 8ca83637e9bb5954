"""``dsh-tool-cassette``: verify and inspect cassette files.

Rule: parse, call the store, print. Exit codes: ``python_core.cli_errors``'s table (0 valid;
1 invalid or unreadable, ``CASSETTE_INVALID``, ``CASSETTE_IO``; 2 usage). Output names
structural facts only (line, frame kind, ordinal, tool, counts), never file content or the
absolute path.
"""

from __future__ import annotations

import json

import click

from python_core.cli_errors import EXIT_FAILED, NamedFailure
from python_core.errors import SidecarError
from python_core.tool_cassette.format import PROTOCOL
from python_core.tool_cassette.store import VerifyReport, verify_file

__all__ = ["main"]

_CONSUMPTION = (
    "replay serves each record once, in start order, matching path, tool, canonical args "
    "and ordinal; consumption lives in the replaying process only and the file is never "
    "modified"
)


def _report_or_exit(file: str) -> VerifyReport:
    try:
        return verify_file(file)
    except SidecarError as error:
        raise NamedFailure(error) from None


def _summary(report: VerifyReport) -> str:
    return (
        f"{PROTOCOL} v{report.version}: {report.calls} calls, {len(report.tools)} tools, "
        f"{report.frames} frames, complete tail"
    )


@click.group()
def main() -> None:
    """Verify and inspect dsh tool cassettes."""


@main.command()
@click.argument("file")
def verify(file: str) -> None:
    """Check protocol, hash chain, frame pairing, ordinals and tail of FILE."""
    report = _report_or_exit(file)
    if report.error is not None:
        click.echo(str(report.error))
        raise SystemExit(EXIT_FAILED)
    click.echo(f"valid: {_summary(report)}")


@main.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def inspect(file: str, as_json: bool) -> None:
    """Show protocol version, tools, calls, integrity and consumption notes of FILE."""
    report = _report_or_exit(file)
    integrity = "valid" if report.error is None else str(report.error)
    if as_json:
        click.echo(json.dumps({
            "protocol": PROTOCOL,
            "version": report.version,
            "calls": report.calls,
            "frames": report.frames,
            "tools": report.tools,
            "valid": report.error is None,
            "integrity": integrity,
            "consumption": _CONSUMPTION,
        }, sort_keys=True))
    else:
        click.echo(f"protocol: {PROTOCOL} v{report.version if report.version else '?'}")
        click.echo(f"calls: {report.calls}")
        click.echo(f"tools: {len(report.tools)}")
        for tool, count in report.tools.items():
            click.echo(f"  {tool}: {count}")
        click.echo(f"integrity: {integrity}")
        click.echo(f"consumption: {_CONSUMPTION}")
    if report.error is not None:
        raise SystemExit(EXIT_FAILED)
