"""Metadata-only comparison of two validated cassettes.

Rule: interactions align on ``(parentKey, parentContextFingerprint, requestFingerprint,
occurrence)``; a pair differs when its canonical outcome, publication or locality differs.
Header policy differences are drift; timing is informational. Reports carry keys,
fingerprints, counts and projected stop reasons only, never prompts, bodies or raw reasons.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET

from dsh_sidecar.python_core.subagent_cassette.errors import NotComparable
from dsh_sidecar.python_core.subagent_cassette.format import (
    Cassette,
    Header,
    Interaction,
    ambiguous_groups,
    outcome_fingerprint,
    project_stop_reason,
    to_json,
)

__all__ = ["Change", "DiffReport", "diff_cassettes"]

AlignKey = tuple[str, str, str, int]


class Change(msgspec.Struct, frozen=True, kw_only=True):
    """One aligned identity present in only one file, or with a different outcome."""

    kind: str
    parentKey: str
    parentContextFingerprint: str
    requestFingerprint: str
    occurrence: int
    callKey: str
    before: str | None
    after: str | None


class DiffReport(msgspec.Struct, frozen=True, kw_only=True):
    """Result of ``diff_cassettes``; ``equivalent`` drives exit code 0 vs 2."""

    equivalent: bool
    interactionsA: int
    interactionsB: int
    unchanged: int
    added: tuple[Change, ...]
    removed: tuple[Change, ...]
    outcomeChanged: tuple[Change, ...]
    policyDrift: tuple[str, ...]
    ambiguousGroupsA: int
    ambiguousGroupsB: int
    durationMsA: float
    durationMsB: float


def _policy(header: Header) -> dict[str, Any]:
    """Return the header facts whose difference is policy drift."""
    provider = header.provider
    return {
        "version": header.version,
        "target.dshSubagent": header.target.dshSubagent,
        "provider.cassette": provider.cassette,
        "provider.upstream": provider.upstream,
        "provider.capabilities": to_json(provider.capabilities),
        "provider.inheritsParentContext": provider.inheritsParentContext,
        "provider.continuable": provider.continuable,
        "requestStorage": header.requestStorage,
        "redactSecrets": header.redactSecrets,
        "redactionPatterns": header.redactionPatterns,
    }


def _policy_drift(a: Header, b: Header) -> tuple[str, ...]:
    left, right = _policy(a), _policy(b)
    if UNSET in (left["provider.continuable"], right["provider.continuable"]):
        # A v1 header does not say; unknown is not a difference.
        del left["provider.continuable"], right["provider.continuable"]
    return tuple(field for field in left if left[field] != right[field])


def _index(cassette: Cassette) -> dict[AlignKey, Interaction]:
    return {
        (r.parentKey, r.parentContextFingerprint, r.requestFingerprint, r.occurrence): r
        for r in cassette.interactions
    }


def _signature(record: Interaction) -> tuple[str, bool, bool]:
    return outcome_fingerprint(record.outcome), record.published, record.local


def _change(kind: str, record: Interaction, before: str | None, after: str | None) -> Change:
    return Change(
        kind=kind,
        parentKey=record.parentKey,
        parentContextFingerprint=record.parentContextFingerprint,
        requestFingerprint=record.requestFingerprint,
        occurrence=record.occurrence,
        callKey=record.callKey,
        before=before,
        after=after,
    )


def diff_cassettes(a: Cassette, b: Cassette) -> DiffReport:
    """Compare two loaded cassettes.

    Raises:
        NotComparable: the cassettes target different DSH subagent versions.
    """
    if a.header.version == b.header.version and a.header.target.dshSubagent != b.header.target.dshSubagent:
        # Across versions the targets may differ (v1 is mostly rc.7) and the identities
        # still align; within one version another target means another contract.
        raise NotComparable("target.dshSubagent")
    left, right = _index(a), _index(b)
    added = tuple(
        _change("added", record, None, project_stop_reason(record.outcome))
        for key, record in sorted(right.items(), key=lambda kv: kv[1].sequence)
        if key not in left
    )
    removed = tuple(
        _change("removed", record, project_stop_reason(record.outcome), None)
        for key, record in sorted(left.items(), key=lambda kv: kv[1].sequence)
        if key not in right
    )
    changed: list[Change] = []
    unchanged = 0
    for key, record in sorted(left.items(), key=lambda kv: kv[1].sequence):
        other = right.get(key)
        if other is None:
            continue
        if _signature(record) == _signature(other):
            unchanged += 1
        else:
            changed.append(
                _change(
                    "outcome-changed",
                    other,
                    project_stop_reason(record.outcome),
                    project_stop_reason(other.outcome),
                )
            )
    drift = _policy_drift(a.header, b.header)
    return DiffReport(
        equivalent=not (added or removed or changed or drift),
        interactionsA=a.count,
        interactionsB=b.count,
        unchanged=unchanged,
        added=added,
        removed=removed,
        outcomeChanged=tuple(changed),
        policyDrift=drift,
        ambiguousGroupsA=len(ambiguous_groups(a.interactions)),
        ambiguousGroupsB=len(ambiguous_groups(b.interactions)),
        durationMsA=round(sum(r.timing.durationMs for r in a.interactions), 3),
        durationMsB=round(sum(r.timing.durationMs for r in b.interactions), 3),
    )
