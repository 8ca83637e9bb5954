"""What ``timing: instant`` changes in a replayed failure so that nothing waits for recorded time.

Rule: rc.8's ``dsh-llm-retry`` waits, after a retryable failure, ``failure.providerRetryAfterMs``
when the provider sent one (and it is within the policy's ``maxDelayMs``), else its own jittered
backoff (500 ms doubling to 10 s by default). The backoff is the host's, not a recorded time,
but it is the only wait left in an instant replay, and the public way to shorten it is that
same field: a replayed failure *without* a provider hint gets ``providerRetryAfterMs: 1``, so
the retry waits 1 ms. A failure *with* a recorded hint keeps it (and the retry waits it): the
policy's ``maxDelayMs``, which decides whether the host retries at all, is invisible here, so
shortening the hint could turn a refused retry into an extra call. Chunks without a failure
keep their bytes.
"""

from __future__ import annotations

import msgspec

__all__ = ["INSTANT_RETRY_AFTER_MS", "instant_failures"]

INSTANT_RETRY_AFTER_MS = 1


def instant_failures(chunks: bytes) -> bytes:
    """Return ``chunks`` with ``providerRetryAfterMs: 1`` added to failures that carry no hint.

    Raises:
        msgspec.DecodeError: ``chunks`` is not JSON.
    """
    if b'"failure"' not in chunks:
        return chunks
    decoded = msgspec.json.decode(chunks)
    changed = False
    for chunk in decoded if isinstance(decoded, list) else ():
        reason = chunk.get("reason") if isinstance(chunk, dict) and chunk.get("type") == "finish" else None
        failure = reason.get("failure") if isinstance(reason, dict) else None
        if isinstance(failure, dict) and "providerRetryAfterMs" not in failure:
            failure["providerRetryAfterMs"] = INSTANT_RETRY_AFTER_MS
            changed = True
    return msgspec.json.encode(decoded) if changed else chunks
