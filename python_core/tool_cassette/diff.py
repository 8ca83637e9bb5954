"""Structural comparison of two verified tool cassettes, for the ``diff`` drift gate.

Rule: records align by ordinal (the order replay consumes them). A pair differs in ``tool``,
``path``, ``args`` or ``outcome``; arguments and outcomes are compared by their canonical
bytes and reported as fingerprints plus the JSON pointers that differ, never as values. An
ordinal held by one file only is ``added`` (only in B) or ``removed`` (only in A). Another
``include`` list in the headers is drift too: replay refuses a cassette recorded with other
patterns. So is a tool contract (version 3 ``tool`` frames) added, removed or changed: a replay
that stands the tool up offers the model that contract.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from dsh_sidecar.python_core.json_pointers import PointerChange, differing_pointers
from dsh_sidecar.python_core.tool_cassette.calls import CallSummary, outcome_json, summarize
from dsh_sidecar.python_core.tool_cassette.config import same_selection
from dsh_sidecar.python_core.tool_cassette.format import canonical_definition
from dsh_sidecar.python_core.tool_cassette.store import Cassette, RecordedCall

__all__ = ["CallChange", "ContractChange", "DiffReport", "FieldChange", "diff_cassettes", "outcome_label"]

Field = Literal["tool", "path", "args", "outcome"]


class FieldChange(msgspec.Struct, frozen=True, kw_only=True):
    """One identity field or the outcome of an aligned pair, A's form then B's.

    ``tool`` and ``path`` are shown as they are (structural names); ``args`` as digests and
    ``outcome`` as its label (``value``, ``error CODE``, …) or, when the labels are equal, as
    digests. ``pointers`` names where the JSON differs (``args`` and ``outcome`` only).
    """

    field: Field
    before: str
    after: str
    pointers: tuple[PointerChange, ...] = ()


class CallChange(msgspec.Struct, frozen=True, kw_only=True):
    """One ordinal that differs: present in one file only, or with changed fields."""

    ordinal: int
    kind: Literal["added", "removed", "changed"]
    tool: str
    path: str
    fields: tuple[FieldChange, ...] = ()


class ContractChange(msgspec.Struct, frozen=True, kw_only=True):
    """A tool whose recorded contract is in one file only, or differs in ``fields``.

    ``called`` says whether either file records a call of the tool: a recording keeps the
    contract of every selected tool the host registered, called or not (the model was offered
    all of them), so a contract change of a tool never called changes what the model is offered
    and nothing the cassette serves.
    """

    tool: str
    kind: Literal["added", "removed", "changed"]
    fields: tuple[str, ...] = ()
    called: bool = True


class DiffReport(msgspec.Struct, frozen=True, kw_only=True):
    """Result of ``diff_cassettes``; ``equivalent`` drives exit code 0 versus 2."""

    equivalent: bool
    callsA: int
    callsB: int
    unchanged: int
    includeDiffers: bool
    changes: tuple[CallChange, ...]
    contracts: tuple[ContractChange, ...] = ()


def outcome_label(call: CallSummary) -> str:
    """``value``, ``error``, ``error CODE``, ``cancelled CODE``, plus ``+N contexts``."""
    label = call.outcome if call.code is None else f"{call.outcome} {call.code}"
    return label if not call.contexts else f"{label} +{call.contexts} contexts"


def _pointers(before: bytes, after: bytes) -> tuple[PointerChange, ...]:
    return tuple(differing_pointers(msgspec.json.decode(before), msgspec.json.decode(after)))


def _fields(a: RecordedCall, b: RecordedCall, x: CallSummary, y: CallSummary) -> tuple[FieldChange, ...]:
    out: list[FieldChange] = []
    if x.tool != y.tool:
        out.append(FieldChange(field="tool", before=x.tool, after=y.tool))
    if x.path != y.path:
        out.append(FieldChange(field="path", before=x.path, after=y.path))
    if x.argsDigest != y.argsDigest:
        out.append(FieldChange(field="args", before=x.argsDigest, after=y.argsDigest,
                               pointers=_pointers(a.args, b.args)))
    if x.outcomeDigest != y.outcomeDigest:
        before, after = outcome_label(x), outcome_label(y)
        if before == after:
            before, after = x.outcomeDigest, y.outcomeDigest
        out.append(FieldChange(field="outcome", before=before, after=after,
                               pointers=_pointers(outcome_json(a.result), outcome_json(b.result))))
    return tuple(out)


def diff_cassettes(a: Cassette, b: Cassette) -> DiffReport:
    """Compare two loaded cassettes ordinal by ordinal."""
    left, right = summarize(a), summarize(b)
    changes: list[CallChange] = []
    unchanged = 0
    for index in range(max(len(left), len(right))):
        if index >= len(right):
            x = left[index]
            changes.append(CallChange(ordinal=index, kind="removed", tool=x.tool, path=x.path))
        elif index >= len(left):
            y = right[index]
            changes.append(CallChange(ordinal=index, kind="added", tool=y.tool, path=y.path))
        else:
            x, y = left[index], right[index]
            fields = _fields(a.calls[index], b.calls[index], x, y)
            if fields:
                changes.append(CallChange(ordinal=index, kind="changed", tool=y.tool, path=y.path,
                                          fields=fields))
            else:
                unchanged += 1
    include_differs = not same_selection(a.header.include, b.header.include)
    contracts = _contracts(a, b, {call.tool for call in left} | {call.tool for call in right})
    return DiffReport(
        equivalent=not changes and not include_differs and not contracts, callsA=len(left), callsB=len(right),
        unchanged=unchanged, includeDiffers=include_differs, changes=tuple(changes), contracts=contracts,
    )


_CONTRACT_FIELDS = ("description", "parameters", "output", "presentationMeta", "timeoutMs")


def _contracts(a: Cassette, b: Cassette, called: set[str]) -> tuple[ContractChange, ...]:
    """The recorded tool contracts that differ, by tool name (a file before version 3 has none)."""
    out: list[ContractChange] = []
    for tool in sorted(a.definitions.keys() | b.definitions.keys()):
        x, y = a.definitions.get(tool), b.definitions.get(tool)
        if x is None or y is None:
            out.append(ContractChange(tool=tool, kind="added" if x is None else "removed", called=tool in called))
            continue
        x, y = canonical_definition(x), canonical_definition(y)  # key order is not a change
        fields = tuple(f for f in _CONTRACT_FIELDS if getattr(x, f) != getattr(y, f))
        if fields:
            out.append(ContractChange(tool=tool, kind="changed", fields=fields, called=tool in called))
    return tuple(out)
