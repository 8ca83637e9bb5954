"""``dsh-sidecar model-cassette``: verify, inspect, diff and reseal model cassettes.

Rule: parse, call the store, print. Output names structural facts only (line, frame kind, lane
and position, provider/model route, fingerprints, counts, finish kinds, message indexes, tool
and option names), never prompt or answer text or the absolute path. Exit codes:
``python_core.cli_errors``'s table (0 valid/equivalent, 1 invalid or unreadable, 2 usage or
``diff`` found a request or answer difference, 3 ``diff`` found metadata differences only).
"""

from __future__ import annotations

import json

import click
import msgspec

from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.cli_errors import EXIT_DIFFERENT, EXIT_FAILED, EXIT_METADATA, EXIT_OK, NamedFailure
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.model_cassette.diff import diff_cassettes
from dsh_sidecar.python_core.model_cassette.errors import short
from dsh_sidecar.python_core.model_cassette.format import IMPORTED, PROTOCOL, CallFrame
from dsh_sidecar.python_core.model_cassette.reseal import reseal_file
from dsh_sidecar.python_core.model_cassette.store import Cassette, VerifyReport, load, verify_file

__all__ = ["IMPORTED_NOTE", "cli", "diff_cassettes"]

IMPORTED_NOTE = ", imported from a session log (docs/import.md)"


def _verify_or_exit(file: str) -> VerifyReport:
    try:
        return verify_file(file)
    except SidecarError as error:
        raise NamedFailure(error) from None


@click.group()
@click.version_option(__version__, message="%(prog)s %(version)s")
def cli() -> None:
    """Verify, inspect, diff and reseal dsh model cassettes."""


@cli.command()
@click.argument("file")
def verify(file: str) -> None:
    """Check protocol, hash chain, fingerprints, chunk summaries, lane positions and tail of FILE."""
    report = _verify_or_exit(file)
    if report.error is not None:
        click.echo(str(report.error))
        raise SystemExit(EXIT_FAILED)
    lanes = ", ".join(f"{lane} {count}" for lane, count in report.lanes.items()) or "none"
    click.echo(f"valid: {PROTOCOL} v{report.version}: {report.calls} calls ({lanes}), {report.frames} frames, "
               f"complete tail{IMPORTED_NOTE if report.imported else ''}")


def _call_row(call: CallFrame) -> dict[str, object]:
    return {
        "ordinal": call.ordinal, "lane": call.lane, "position": call.position,
        "provider": call.request.provider, "model": call.request.model, "fingerprint": call.fingerprint,
        "chunks": len(call.atMs), "toolCalls": call.toolCalls, "finish": call.finish,
        "messages": len(call.request.messages), "tools": len(call.request.tools),
        "durationMs": call.atMs[-1],
    }


@cli.command()
@click.argument("file")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def inspect(file: str, as_json: bool) -> None:
    """Per call: position, provider/model, request fingerprint, chunk and tool-call counts, finish."""
    report = _verify_or_exit(file)
    if report.error is not None:
        click.echo(str(report.error))
        raise SystemExit(EXIT_FAILED)
    cassette = load(file)
    rows = [_call_row(c) for c in sorted(cassette.calls, key=lambda c: (c.lane, c.position))]
    if as_json:
        click.echo(json.dumps({
            "protocol": PROTOCOL, "version": cassette.header.version, "requestView": cassette.header.requestView,
            "host": cassette.header.host, "calls": rows, "valid": True,
        }, sort_keys=True))
        return
    source = IMPORTED_NOTE[2:] if cassette.header.host == IMPORTED else f"recorded with dsh-llm {cassette.header.host}"
    click.echo(f"protocol: {PROTOCOL} v{cassette.header.version}, requestView {cassette.header.requestView}, {source}")
    click.echo(f"calls: {len(rows)}")
    for r in rows:
        click.echo(
            f"  {r['lane']}#{r['position']} (call {r['ordinal']}): {r['provider']}/{r['model']} "
            f"request {short(str(r['fingerprint']))} ({r['messages']} messages, {r['tools']} tools), "
            f"{r['chunks']} chunks, {r['toolCalls']} tool calls, finish {r['finish']}, {r['durationMs']} ms"
        )
    click.echo("integrity: valid")


@cli.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--ignore-metadata", is_flag=True,
              help="Leave usage, cache counters, failure details and timing out (exit 0 if only they differ).")
def diff(a: str, b: str, as_json: bool, ignore_metadata: bool) -> None:
    """Compare two cassettes call by call: 0 equivalent, 2 answers differ, 3 only metadata, 1 unreadable."""
    loaded: list[Cassette] = []
    for label, file in (("A", a), ("B", b)):
        try:
            loaded.append(load(file))
        except SidecarError as error:
            raise NamedFailure(error, context=f"{label}: ") from None
    differences = [d for d in diff_cassettes(*loaded) if not (ignore_metadata and d.kind == "metadata")]
    answers = [d for d in differences if d.kind != "metadata"]
    code = EXIT_DIFFERENT if answers else EXIT_METADATA if differences else EXIT_OK
    if as_json:
        click.echo(msgspec.json.encode({
            "equivalent": not differences, "answersEqual": not answers,
            "differences": [d.line for d in differences], "kinds": [d.kind for d in differences],
        }).decode())
    elif answers:
        click.echo(f"different: {len(differences)} difference(s)")
    elif differences:
        click.echo(f"metadata only: {len(differences)} difference(s), same requests and answers")
    else:
        click.echo(f"equivalent: {len(loaded[0].calls)} calls, same requests and answers")
    if not as_json:
        for d in differences:
            click.echo(f"  {d.line}")
    raise SystemExit(code)


@cli.command()
@click.argument("file")
def reseal(file: str) -> None:
    """Recompute chain, fingerprints, chunk summaries and tail of a hand-edited FILE, atomically.

    Anything it cannot vouch for is refused and the file left untouched. Resealing makes the
    file yours: integrity then proves only that nothing changed since the reseal.
    """
    try:
        report = reseal_file(file)
    except SidecarError as error:
        raise NamedFailure(error) from None
    click.echo(report.summary())
