"""``dsh-tool-cassette``: verify, inspect, diff and reseal cassette files.

Rule: parse, call the store, print. Exit codes: ``python_core.cli_errors``'s table (0 valid
or equivalent; 1 invalid or unreadable, ``CASSETTE_INVALID``, ``CASSETTE_IO``; 2 usage, or
``diff`` found a difference). Output names structural facts only (line, frame kind, ordinal,
tool, path, fingerprints, JSON pointers, counts), never file content or the absolute path.
"""

from __future__ import annotations

import json
import os
from typing import Any

import click
import msgspec

from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.cli_errors import EXIT_DIFFERENT, EXIT_FAILED, NamedFailure
from dsh_sidecar.python_core.errors import SidecarError, printable
from dsh_sidecar.python_core.json_pointers import describe
from dsh_sidecar.python_core.tool_cassette.calls import CallSummary, summarize
from dsh_sidecar.python_core.tool_cassette.diff import (
    CallChange,
    DiffReport,
    FieldChange,
    diff_cassettes,
    outcome_label,
)
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid, fingerprint
from dsh_sidecar.python_core.tool_cassette.format import PROTOCOL
from dsh_sidecar.python_core.tool_cassette.reseal import reseal_file
from dsh_sidecar.python_core.tool_cassette.store import Cassette, VerifyReport, load, verify_file

__all__ = ["main", "verify_summary"]

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


def _load_or_exit(file: str, label: str = "") -> Cassette:
    try:
        return load(file)
    except CassetteInvalid as error:
        # Nothing of a file that fails verify can be trusted to compare: say how to make it verify.
        fixed = CassetteInvalid(
            f"{_name(file)}: {error.message}; a file that fails verify cannot be compared: if you edited it by "
            f"hand, `dsh-tool-cassette reseal {_name(file)}` makes it verify again (the file is then yours), "
            "else re-record it")
        raise NamedFailure(fixed, context=label) from None
    except SidecarError as error:
        raise NamedFailure(error, context=label) from None


def _json(value: Any) -> str:
    """ASCII-only sorted JSON: no control or separator character is printed raw."""
    return json.dumps(msgspec.to_builtins(value), ensure_ascii=True, sort_keys=True)


def verify_summary(report: VerifyReport) -> str:
    """``verify``'s line for a valid file, after its name."""
    return (
        f"{PROTOCOL} v{report.version}: {report.calls} calls, {len(report.tools)} tools, "
        f"{report.frames} frames, complete tail" + (", imported from a session log (docs/import.md)"
                                                     if report.source == "session-log" else "")
    )


@click.group()
@click.version_option(__version__, message="%(prog)s %(version)s")
def main() -> None:
    """Verify, inspect, diff and reseal dsh tool cassettes."""


def _name(file: str) -> str:
    """A file as results name it: without directories, control characters escaped."""
    return printable(os.path.basename(file.rstrip("/")) or file)


@main.command()
@click.argument("files", metavar="FILE...", nargs=-1, required=True)
def verify(files: tuple[str, ...]) -> None:
    """Check protocol, hash chain, frame pairing, ordinals and tail of each FILE; one line per file,
    naming it; exit 1 if any is invalid or unreadable."""
    failed = False
    for file in files:
        try:
            report = verify_file(file)
        except SidecarError as error:  # unreadable: on stderr, as a named error (it names the file)
            click.echo(str(error), err=True)
            failed = True
            continue
        if report.error is not None:
            click.echo(f"{report.error.code}: {_name(file)}: {report.error.message}")
            failed = True
        else:
            click.echo(f"valid: {_name(file)}: {verify_summary(report)}")
    if failed:
        raise SystemExit(EXIT_FAILED)


def _table(calls: list[CallSummary]) -> list[str]:
    """One row per call: ordinal, tool, path, argument fingerprint, outcome label."""
    rows = [("ordinal", "tool", "path", "args", "outcome")] + [
        (str(c.ordinal), printable(c.tool), printable(c.path), fingerprint(c.argsDigest), outcome_label(c))
        for c in calls
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[4]
            for row in rows]


@main.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def inspect(file: str, as_json: bool) -> None:
    """Show protocol version, tools, integrity and every call (ordinal, tool, path,
    argument fingerprint, outcome kind) of FILE."""
    report = _report_or_exit(file)
    integrity = "valid" if report.error is None else str(report.error)
    calls = [] if report.error is not None else summarize(_load_or_exit(file))
    if as_json:
        click.echo(_json({
            "protocol": PROTOCOL,
            "version": report.version,
            "calls": report.calls,
            "frames": report.frames,
            "tools": report.tools,
            "definitions": report.definitions,
            "valid": report.error is None,
            "source": report.source or "recording",
            "integrity": integrity,
            "consumption": _CONSUMPTION,
            "records": calls,
        }))
    else:
        click.echo(f"protocol: {PROTOCOL} v{report.version if report.version else '?'}")
        click.echo(f"calls: {report.calls}")
        if report.source == "session-log":
            # Served as the log showed them, by stand-ins even where a plugin registers the tool.
            click.echo("source: imported from a session log (docs/import.md)")
        click.echo(f"tools: {len(report.tools)}")
        for tool, count in report.tools.items():
            click.echo(f"  {printable(tool)}: {count}")
        if report.version is not None and report.version >= 3:
            # What a replay can stand up when no plugin registers the tool.
            click.echo(f"definitions: {report.definitions}")
        click.echo(f"integrity: {integrity}")
        click.echo(f"consumption: {_CONSUMPTION}")
        if calls:
            click.echo("records:")
            for line in _table(calls):
                click.echo(line.rstrip())
    if report.error is not None:
        raise SystemExit(EXIT_FAILED)


def _field_line(change: FieldChange) -> str:
    if change.field in ("tool", "path"):
        before, after = printable(change.before), printable(change.after)
    elif change.before.startswith("sha256:"):
        before, after = fingerprint(change.before), fingerprint(change.after)
    else:
        before, after = change.before, change.after
    where = describe(list(change.pointers))
    return f"{change.field} {before} -> {after}" + (f": {where}" if where else "")


def _change_lines(change: CallChange) -> list[str]:
    marker = {"added": "+", "removed": "-", "changed": "~"}[change.kind]
    head = f"  {marker} #{change.ordinal} {printable(change.tool)} at {printable(change.path)}"
    if change.kind != "changed":
        return [f"{head} ({'only in B' if change.kind == 'added' else 'only in A'})"]
    return [head] + [f"      {_field_line(field)}" for field in change.fields]


def _print_diff(report: DiffReport) -> None:
    counts = {kind: sum(1 for c in report.changes if c.kind == kind) for kind in ("changed", "added", "removed")}
    verdict = "equivalent" if report.equivalent else "different"
    click.echo(
        f"{verdict}: {report.callsA} -> {report.callsB} calls, {report.unchanged} unchanged, "
        f"{counts['changed']} changed, {counts['added']} added, {counts['removed']} removed"
    )
    if report.includeDiffers:
        click.echo("  ! include differs (replay with one file's include refuses the other)")
    for change in report.changes:
        for line in _change_lines(change):
            click.echo(line)
    for contract in report.contracts:
        marker = {"added": "+", "removed": "-", "changed": "~"}[contract.kind]
        what = ("only in B" if contract.kind == "added" else "only in A" if contract.kind == "removed"
                else ", ".join(contract.fields) + " changed")
        if not contract.called:
            what += "; offered to the model, called in neither file"
        click.echo(f"  {marker} tool contract {printable(contract.tool)} ({what})")


@main.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def diff(a: str, b: str, as_json: bool) -> None:
    """Compare A and B record by record: exit 0 equivalent, 2 different, 1 unreadable or invalid."""
    report = diff_cassettes(_load_or_exit(a, "A: "), _load_or_exit(b, "B: "))
    if as_json:
        click.echo(_json(report))
    else:
        _print_diff(report)
    if not report.equivalent:
        raise SystemExit(EXIT_DIFFERENT)


@main.command()
@click.argument("file")
def reseal(file: str) -> None:
    """Recompute chain, digests and tail of a hand-edited FILE, atomically.

    Every line must still be a canonical frame; anything it cannot vouch for is refused and
    the file left untouched. Resealing makes the file yours: integrity then proves only that
    nothing changed since the reseal.
    """
    try:
        report = reseal_file(file)
    except SidecarError as error:
        raise NamedFailure(error) from None
    click.echo(report.summary())
