"""``subagent-cassette`` commands: verify, inspect, diff, reseal (mounted under ``dsh-sidecar``).

Rule: parse, call store/diff, print. Output is metadata only (keys, fingerprints, counts,
projected stop reasons) with control characters escaped. Exit codes: ``python_core.cli_errors``'s
table (0 ok/equivalent; 1 invalid or unreadable; 2 usage, or ``diff`` found the files different
or not comparable).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from typing import Any

import click
import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.cli_errors import EXIT_DIFFERENT, NamedFailure, NotComparableFailure
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.subagent_cassette.diff import Change, DiffReport, diff_cassettes
from dsh_sidecar.python_core.subagent_cassette.errors import NotComparable, escape
from dsh_sidecar.python_core.subagent_cassette.format import Cassette, project_stop_reason, to_json
from dsh_sidecar.python_core.subagent_cassette.host import ONE_SHOT_PATCH
from dsh_sidecar.python_core.subagent_cassette.reseal import reseal_file
from dsh_sidecar.python_core.subagent_cassette.store import load, verify_file

__all__ = ["cli"]


def _json(value: Any) -> str:
    """Encode as ASCII-only sorted JSON, so no control or separator character is printed raw."""
    return json.dumps(msgspec.to_builtins(value), ensure_ascii=True, sort_keys=True)


@click.group(name="subagent-cassette")
@click.version_option(__version__, message="%(prog)s %(version)s")
def cli() -> None:
    """Verify, inspect, diff and reseal subagent cassettes (metadata only)."""


@cli.command()
@click.argument("file")
def verify(file: str) -> None:
    """Validate FILE: schema, canonical JSON, hash chain, sequences, occurrences."""
    try:
        cassette = verify_file(file)
    except SidecarError as error:
        raise NamedFailure(error) from None
    click.echo(
        f"ok: {escape(cassette.name)}: {cassette.count} interaction(s), chain intact, "
        f"target dsh-subagent {escape(cassette.header.target.dshSubagent, 40)}"
    )


def _summary(cassette: Cassette) -> dict[str, Any]:
    header = cassette.header
    outcomes = Counter(project_stop_reason(r.outcome) for r in cassette.interactions)
    return {
        "file": cassette.name,
        "version": header.version,
        "interactions": cassette.count,
        "target": header.target.dshSubagent,
        "provider": to_json(header.provider),
        "requestStorage": header.requestStorage,
        "redactSecrets": header.redactSecrets,
        "redactionPatterns": len(header.redactionPatterns),
        "outcomes": dict(sorted(outcomes.items())),
        "redactedResults": sum(
            1 for r in cassette.interactions if getattr(r.outcome, "redactions", 0) > 0
        ),
    }


def _continuable(value: bool | UnsetType) -> str:
    return "unknown (format v1)" if value is UNSET else str(value).lower()


def _call(record: Any) -> dict[str, Any]:
    return {
        "sequence": record.sequence,
        "callKey": record.callKey,
        "parentKey": record.parentKey,
        "occurrence": record.occurrence,
        "outcome": project_stop_reason(record.outcome),
        "published": record.published,
        "local": record.local,
        "durationMs": record.timing.durationMs,
    }


@cli.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--show-calls", is_flag=True, help="List every interaction (keys, outcome class).")
def inspect(file: str, as_json: bool, show_calls: bool) -> None:
    """Summarize FILE without printing prompts, results or error messages."""
    try:
        cassette = load(file)
    except SidecarError as error:
        raise NamedFailure(error) from None
    summary = _summary(cassette)
    calls = [_call(r) for r in sorted(cassette.interactions, key=lambda r: r.sequence)]
    if as_json:
        if show_calls:
            summary["calls"] = calls
        click.echo(_json(summary))
        return
    provider = cassette.header.provider
    click.echo(f"{escape(cassette.name)}: {cassette.count} interaction(s)")
    click.echo(f"  target      dsh-subagent {escape(summary['target'], 40)}")
    click.echo(
        f"  provider    {escape(provider.cassette, 40)} -> {escape(provider.upstream, 40)}"
        f" (continuable={_continuable(provider.continuable)},"
        f" inheritsParentContext={str(provider.inheritsParentContext).lower()})"
    )
    click.echo(f"  requests    {summary['requestStorage']} view")
    click.echo(
        f"  redaction   secrets={str(summary['redactSecrets']).lower()},"
        f" {summary['redactionPatterns']} pattern(s),"
        f" {summary['redactedResults']} redacted result(s)"
    )
    outcomes = ", ".join(f"{k}={v}" for k, v in summary["outcomes"].items()) or "none"
    click.echo(f"  outcomes    {outcomes}")
    if show_calls:
        for call in calls:
            click.echo(
                f"  #{call['sequence']} {escape(call['callKey'])} {call['outcome']}"
                f" {call['durationMs']}ms{' local' if call['local'] else ''}"
            )


def _change_line(change: Change) -> str:
    if change.kind == "added":
        marker, detail = "+", f"{change.after}"
    elif change.kind == "removed":
        marker, detail = "-", f"{change.before}"
    else:
        marker, detail = "~", f"{change.before} -> {change.after}"
    return (
        f"  {marker} {escape(change.parentKey)} request {change.requestFingerprint[:19]}"
        f" context {change.parentContextFingerprint[:19]} #{change.occurrence}: {detail}"
    )


def _print_diff(report: DiffReport) -> None:
    verdict = "equivalent" if report.equivalent else "different"
    click.echo(
        f"{verdict}: {report.unchanged} unchanged, {len(report.added)} added,"
        f" {len(report.removed)} removed, {len(report.outcomeChanged)} outcome changed,"
        f" {len(report.policyDrift)} policy drift"
    )
    for field in report.policyDrift:
        click.echo(f"  ! policy {field} differs")
    for change in (*report.removed, *report.added, *report.outcomeChanged):
        click.echo(_change_line(change))
    click.echo(
        f"  timing (informational): {report.durationMsA}ms -> {report.durationMsB}ms total"
    )
    if report.ambiguousGroupsA or report.ambiguousGroupsB:
        click.echo(
            f"  ambiguous groups: {report.ambiguousGroupsA} -> {report.ambiguousGroupsB}"
            " (occurrence order decides alignment)"
        )


@cli.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
def diff(a: str, b: str, as_json: bool) -> None:
    """Compare A and B by identity: exit 0 equivalent, 2 different or not comparable, 1 error."""
    try:
        report = diff_cassettes(load(a), load(b))
    except NotComparable as error:
        raise NotComparableFailure(error) from None
    except SidecarError as error:
        raise NamedFailure(error) from None
    if as_json:
        click.echo(_json(report))
    else:
        _print_diff(report)
    if not report.equivalent:
        click.get_current_context().exit(EXIT_DIFFERENT)


@cli.command()
@click.argument("file")
def reseal(file: str) -> None:
    """Recompute the hash chain of a hand-edited FILE, atomically, under its writer lock.

    Every line must still be a canonical record; anything the parser refuses is refused and
    the file left untouched. Resealing makes the file yours: integrity then proves only that
    nothing changed since the reseal.
    """
    try:
        report = reseal_file(file, owner=str(uuid.uuid4()))
    except SidecarError as error:
        raise NamedFailure(error) from None
    click.echo(report.summary(calls="interactions", frames="records"))




@cli.command("one-shot-patch")
def one_shot_patch() -> None:
    """Print the profile patch that switches the delegation tools to one-shot mode."""
    click.echo(ONE_SHOT_PATCH, nl=False)
