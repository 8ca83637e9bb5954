"""Call-by-call differences of two model cassettes: requests, answers, and metadata apart.

Rule: a chunk array splits into the *answer* (every chunk but ``usage``, with a failure reduced
to its ``code`` and ``status``: text, reasoning, tool calls, finish) and the *metadata* (usage
and cache counters, the failure's message, request id and retry hint, and the chunk timing).
Re-recording the same turn against DeepSeek changes metadata (a cache miss, then a hit) and
keeps the answer, so CI can ignore metadata drift by exit code. Key order is not a difference.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from dsh_sidecar.python_core.canonical import canonical_bytes, digest_bytes
from dsh_sidecar.python_core.model_cassette.errors import short
from dsh_sidecar.python_core.model_cassette.format import CallFrame
from dsh_sidecar.python_core.model_cassette.store import Cassette
from dsh_sidecar.python_core.model_request import compare

__all__ = ["Difference", "diff_cassettes", "split_chunks"]

Kind = Literal["calls", "request", "answer", "metadata"]


class Difference(msgspec.Struct, frozen=True):
    """One difference: its kind (``metadata`` is the only kind CI may ignore) and its line."""

    kind: Kind
    line: str


_FAILURE_ANSWER = ("code", "status")


def split_chunks(chunks: bytes) -> tuple[list[Any], list[Any]]:
    """Return ``(answer, metadata)`` of a chunk array (see the module rule)."""
    answer: list[Any] = []
    metadata: list[Any] = []
    for chunk in msgspec.json.decode(chunks):
        if not isinstance(chunk, dict):
            answer.append(chunk)
        elif chunk.get("type") == "usage":
            metadata.append(chunk.get("usage"))
        elif chunk.get("type") == "finish" and isinstance(chunk.get("reason"), dict) \
                and isinstance(chunk["reason"].get("failure"), dict):
            failure = chunk["reason"]["failure"]
            kept = {k: v for k, v in failure.items() if k in _FAILURE_ANSWER}
            answer.append({**chunk, "reason": {**chunk["reason"], "failure": kept}})
            metadata.append({k: v for k, v in failure.items() if k not in _FAILURE_ANSWER})
        else:
            answer.append(chunk)
    return answer, metadata


def _fields(values: list[Any]) -> set[str]:
    return {k for v in values if isinstance(v, dict) for k in v}


def _column(values: list[Any], key: str) -> list[Any]:
    return [v.get(key) for v in values if isinstance(v, dict)]


def _metadata(x: CallFrame, y: CallFrame, mx: list[Any], my: list[Any]) -> str | None:
    named: list[str] = []
    if canonical_bytes(mx) != canonical_bytes(my):
        fields = sorted(k for k in _fields(mx) | _fields(my) if _column(mx, k) != _column(my, k))
        named.append("usage or failure details" + (f" ({', '.join(fields)})" if fields else ""))
    if x.atMs != y.atMs:
        named.append(f"timing ({x.atMs[-1]} vs {y.atMs[-1]} ms)")
    return "; ".join(named) or None


def diff_cassettes(a: Cassette, b: Cassette) -> list[Difference]:
    """Name every difference between two cassettes call by call, each with its kind."""
    left = {(c.lane, c.position): c for c in a.calls}
    right = {(c.lane, c.position): c for c in b.calls}
    out: list[Difference] = []
    for slot in sorted(set(left) | set(right)):
        name = f"{slot[0]}#{slot[1]}"
        if slot not in right or slot not in left:
            out.append(Difference("calls", f"{name}: only in {'A' if slot in left else 'B'}"))
            continue
        x, y = left[slot], right[slot]
        if x.fingerprint != y.fingerprint:
            named = compare(x.request, y.request) or ["request parts differ"]
            out.append(Difference(
                "request", f"{name}: request {short(x.fingerprint)} vs {short(y.fingerprint)}: {'; '.join(named)}",
            ))
        ax, mx = split_chunks(bytes(x.chunks))
        ay, my = split_chunks(bytes(y.chunks))
        answer_x, answer_y = canonical_bytes(ax), canonical_bytes(ay)
        if answer_x != answer_y:
            out.append(Difference("answer", (
                f"{name}: answer differs ({len(ax)} vs {len(ay)} answer chunks, {x.toolCalls} vs {y.toolCalls} "
                f"tool calls, finish {x.finish} vs {y.finish}, answer {short(digest_bytes(answer_x))} vs "
                f"{short(digest_bytes(answer_y))})"
            )))
        metadata = _metadata(x, y, mx, my)
        if metadata is not None:
            out.append(Difference("metadata", f"{name}: metadata differs: {metadata}"))
    return out
