"""Endpoints out of recorded failures: URLs, hosts and ports become placeholders.

Rule: a provider failure's text often names where the request went (``DeepSeek API stream
from http://127.0.0.1:PORT failed``, ``connect ECONNREFUSED 10.0.0.5:443``); an internal
gateway's address must not reach a cassette. Only the strings inside a ``finish`` chunk's
``reason.failure`` other than ``code`` are rewritten, so the failure keeps its class and code;
answers (text, tool calls, usage) are never touched. Chunks without such a string keep their
bytes exactly.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

__all__ = ["ENDPOINT", "HOST", "scrub_endpoints", "scrub_text"]

ENDPOINT = "<endpoint>"
HOST = "<host>"

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>()\[\]{}]+(?:\[[^\]\s]*\][^\s\"'<>(){}]*)?")
# An IPv4 address, a bracketed IPv6 address, or a dotted/localhost name followed by a port.
_HOST = re.compile(
    r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b"
    r"|\[[0-9A-Fa-f:.]+\](?::\d{1,5})?"
    r"|\b(?:localhost|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+):\d{1,5}\b"
)


def scrub_text(text: str) -> str:
    """Replace every URL in ``text`` with ``<endpoint>`` and every host (with its port) with ``<host>``."""
    return _HOST.sub(HOST, _URL.sub(ENDPOINT, text))


def _scrub_failure(failure: dict[str, Any]) -> bool:
    changed = False
    for key, value in failure.items():
        if key != "code" and isinstance(value, str):
            clean = scrub_text(value)
            if clean != value:
                failure[key] = clean
                changed = True
    return changed


def scrub_endpoints(chunks: bytes) -> bytes:
    """Return ``chunks`` (a JSON chunk array) with endpoints removed from failures, else unchanged.

    Raises:
        msgspec.DecodeError: ``chunks`` is not JSON.
    """
    if b"failure" not in chunks:
        return chunks
    decoded = msgspec.json.decode(chunks)
    changed = False
    for chunk in decoded if isinstance(decoded, list) else ():
        reason = chunk.get("reason") if isinstance(chunk, dict) and chunk.get("type") == "finish" else None
        failure = reason.get("failure") if isinstance(reason, dict) else None
        if isinstance(failure, dict) and _scrub_failure(failure):
            changed = True
    # msgspec keeps the decoded key order, so an unchanged chunk re-encodes as the host wrote it.
    return msgspec.json.encode(decoded) if changed else chunks
