"""What the transport needs to answer a JSON-RPC line its decoder cannot take.

Rule: a request the peer sent must get an answer with its id, even when the line as a whole
cannot be decoded. Two inputs made the decoder fail where the caller could not be told why or
answered at all: nesting past the recursion limit (the process died) and a lone-surrogate
``\\uXXXX`` escape (msgspec reports "truncated", so the line read as not JSON, ``id: null``).
``line_error`` names those failures before decoding and ``request_id`` finds the top-level
``id`` without decoding the rest. Pure functions: the transport (bridge) calls them.
"""

from __future__ import annotations

import re

import msgspec

from python_core.canonical import DEPTH_REASON, too_deep
from python_core.errors import CanonicalJsonError

__all__ = ["line_error", "request_id"]

_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_TOKEN = re.compile(rb"\s*(" + _STRING + rb"|[\[\]{}:,]|[^\s\[\]{}:,\"]+)")
# A high surrogate escape not followed by a low one, or a low one not preceded by a high one;
# the escaped backslash pairs before it are consumed first so `\\ud800` (text) is not matched.
_LONE = re.compile(
    rb"(?<!\\)(?:\\\\)*\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})(?<!\\)(?:\\\\)*\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_ID = msgspec.json.Decoder(int | str)


def line_error(line: bytes) -> CanonicalJsonError | None:
    """Return the named error a JSON text line carries before any decoder sees it, or ``None``.

    Too deep: ``nested deeper than 256 levels at /``. A lone surrogate escape in any string
    (key or value): ``lone surrogate in a string at /``.
    """
    if too_deep(line):
        return CanonicalJsonError("/", DEPTH_REASON)
    if b"\\u" in line and _LONE.search(line) is not None:
        return CanonicalJsonError("/", "lone surrogate in a string")
    return None


def request_id(line: bytes) -> int | str | None:
    """Return the top-level ``"id"`` of a JSON object line, reading nothing else; ``None`` if absent.

    Works on lines a decoder refuses as a whole (too deep, lone surrogates elsewhere, unknown
    shapes): only the tokens before the ``id`` member are scanned.
    """
    depth = 0
    expect_key = False
    key: bytes | None = None
    for match in _TOKEN.finditer(line):
        token = match.group(1)
        if token in (b"{", b"["):
            if depth == 1 and key == b'"id"':
                return None  # an id that is an object or array is no id
            depth += 1
            expect_key = token == b"{" and depth == 1
            key = None
        elif token in (b"}", b"]"):
            depth -= 1
            if depth <= 0:
                return None
        elif depth == 1:
            if token == b",":
                expect_key, key = True, None
            elif token == b":":
                expect_key = False
            elif expect_key:
                key = token
            elif key == b'"id"':
                try:
                    return _ID.decode(token)
                except msgspec.DecodeError:
                    return None
    return None
