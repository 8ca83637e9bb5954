"""The verdict per test at the end of a pytest run: what each dsh test's runs were served from.

A row per test that called ``dsh.run``: its tool calls, the calls its cassettes served, the
calls they recorded, the tool calls that ran for real (live: neither served nor refused by a
cassette), the calls a replay could not match (mismatched) and the records it left
(unconsumed), and the tools stood up from a cassette. The totals add the model calls that reached
a provider: a model cassette's recorded calls, or without one the steps and titles of a route
other than the mock (a replay makes none).
The counts travel from an xdist worker to the controller as one ``user_properties`` entry of
plain ints, so the table is the same with ``-n 2`` as in one process.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from dsh_sidecar.bridge.api.types import CassetteSummary, RunResult

__all__ = ["COLUMNS", "PROPERTY", "counts", "table"]

PROPERTY = "dsh_verdict"
COLUMNS = ("runs", "calls", "served", "recorded", "live", "mismatched", "unconsumed", "stood_up")
PROVIDER = "provider_requests"
"""Counted per test and totalled, not a column: an offline suite's line says 0."""
# A tool call the sidecar answered with one of these did not run: it was refused in its place.
_MISMATCH = frozenset({"CASSETTE_MISMATCH", "CASSETTE_EXTRA_CALL"})


def _refused(code: str | None) -> bool:
    return code is not None and (code.startswith("CASSETTE_") or code == "LIVE_TOOL_BLOCKED")


def _summaries(result: RunResult) -> list[CassetteSummary]:
    return [s for s in (result.tool_cassette, result.subagent_cassette, result.model_cassette) if s is not None]


def counts(runs: Sequence[RunResult]) -> dict[str, int]:
    """One test's counts over its runs (``COLUMNS``)."""
    out = dict.fromkeys((*COLUMNS, PROVIDER), 0)
    for result in runs:
        out[PROVIDER] += _provider_requests(result)
        out["runs"] += 1
        out["calls"] += len(result.tool_calls)
        for summary in _summaries(result):
            out["served"] += summary.consumed if summary.mode == "replay" else 0
            out["recorded"] += summary.recorded if summary.mode == "record" else 0
            out["mismatched"] += summary.missed if summary.kind != "tool" else 0
            out["unconsumed"] += summary.unconsumed
            out["stood_up"] += len(summary.stood_up)
        refused = [r.error_code for r in result.tool_results if _refused(r.error_code)]
        out["mismatched"] += sum(code in _MISMATCH for code in refused)
        tool = result.tool_cassette
        served = 0 if tool is None else tool.consumed if tool.mode == "replay" else 0
        out["live"] += max(len(result.tool_calls) - served - len(refused), 0)
    return out


def _provider_requests(result: RunResult) -> int:
    """The model calls of a run that went to a provider (none was served by a cassette or the mock)."""
    model = result.model_cassette
    if model is not None:
        return model.recorded if model.mode == "record" else 0
    steps = 0
    for event in result.events:
        data = event.get("data")
        if not isinstance(data, dict):
            continue
        if event.get("type") == "assistant/message":
            source = data.get("message", {}).get("source") if isinstance(data.get("message"), dict) else None
            steps += isinstance(source, dict) and source.get("provider") not in (None, "mock")
        elif event.get("type") == "session/title-llm-request":
            route = data.get("route")
            steps += isinstance(route, dict) and route.get("provider") not in (None, "mock")
    return steps


def table(rows: Iterable[tuple[str, str, dict[str, int], str | None]]) -> list[str]:
    """The verdict lines: a header, a row per (nodeid, outcome, counts, trace page), and the totals.

    The ``trace`` column is there only when a test wrote a trace (its path, relative to the rootdir).
    """
    rows = list(rows)
    if not rows:
        return []
    width = max(len("test"), *(len(nodeid) for nodeid, _, _, _ in rows))
    heads = ("outcome", *COLUMNS[1:])
    traced = any(page is not None for _, _, _, page in rows)
    lines = ["  ".join(["test".ljust(width), *(h.replace("_", " ").rjust(max(len(h), 7)) for h in heads),
                        *(["trace"] if traced else [])])]
    totals = dict.fromkeys((*COLUMNS, PROVIDER), 0)
    for nodeid, outcome, values, page in rows:
        cells = [outcome.rjust(7), *(str(values.get(c, 0)).rjust(max(len(c), 7)) for c in COLUMNS[1:])]
        lines.append("  ".join([nodeid.ljust(width), *cells, *([page or "-"] if traced else [])]))
        for column in totals:
            totals[column] += values.get(column, 0)
    lines.append(
        f"{len(rows)} dsh tests · {totals['runs']} runs · {totals['calls']} tool calls · {totals['served']} served · "
        f"{totals['recorded']} recorded · {totals['live']} live · {totals['mismatched']} mismatched · "
        f"{totals['unconsumed']} unconsumed · {totals['stood_up']} stood up · {totals[PROVIDER]} provider requests"
    )
    return lines
