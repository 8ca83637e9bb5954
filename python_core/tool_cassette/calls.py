"""Per-call summaries of a loaded cassette: what ``inspect`` lists and ``diff`` compares.

Rule: a summary holds structural facts only (ordinal, tool, path, digests, the outcome's kind,
error code and context count), never arguments, values, messages or contexts.
"""

from __future__ import annotations

from typing import Literal

import msgspec
from msgspec import UNSET

from dsh_sidecar.python_core.canonical import digest_bytes
from dsh_sidecar.python_core.tool_cassette.format import ResultFrame, ToolFailure, canonical_outcome, encode
from dsh_sidecar.python_core.tool_cassette.store import Cassette, RecordedCall

__all__ = ["CallSummary", "OutcomeKind", "outcome_json", "summarize"]

OutcomeKind = Literal["value", "error", "cancelled"]


class CallSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded call: identity fingerprints and the class of its outcome.

    ``outcome`` is ``value`` (success), ``error`` (a failure, ``code`` from ``error.info``) or
    ``cancelled`` (a success the caller aborted in the post phase, ``code`` its abort code).
    ``outcomeDigest`` fingerprints the whole recorded outcome, contexts included.
    """

    ordinal: int
    tool: str
    path: str
    argsDigest: str
    outcome: OutcomeKind
    code: str | None
    contexts: int
    outcomeDigest: str


def _code(failure: ToolFailure) -> str | None:
    return None if failure.info is UNSET else failure.info.code


def outcome_json(frame: ResultFrame) -> bytes:
    """Canonical JSON of a result frame's outcome alone (no chain fields, no ordinal)."""
    return encode(msgspec.structs.replace(canonical_outcome(frame), seq=0, prev="", hash=UNSET, ordinal=0))


def _summary(call: RecordedCall) -> CallSummary:
    frame = call.result
    outcome: OutcomeKind
    if frame.isError:
        assert frame.error is not UNSET  # verified: a failure always has an error
        outcome, code = "error", _code(frame.error)
    elif frame.cancellation is not UNSET:
        outcome, code = "cancelled", _code(frame.cancellation.error)
    else:
        outcome, code = "value", None
    contexts = msgspec.json.decode(frame.additionalContexts)
    return CallSummary(
        ordinal=call.ordinal, tool=call.tool, path=call.path, argsDigest=digest_bytes(call.args),
        outcome=outcome, code=code, contexts=len(contexts) if isinstance(contexts, list) else 0,
        outcomeDigest=digest_bytes(outcome_json(frame)),
    )


def summarize(cassette: Cassette) -> list[CallSummary]:
    """Summaries of every call, in ordinal order."""
    return [_summary(call) for call in cassette.calls]
