"""Call identity: what Node sends for a ``subagent/start`` and the keys derived from it.

Rule: identity is computed here from host facts only. ``requestFingerprint`` covers the
unredacted normalized request; ``parentContextFingerprint`` covers the parent's observable,
model-visible state with volatile data (ids, times, tool-call ids, plugin runtime-context
snapshots that embed the cwd) removed, so a replay from another directory or session matches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.canonical import Count, digest
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.subagent_cassette.errors import InvalidStartRequest
from dsh_sidecar.python_core.subagent_cassette.format import (
    FullRequest,
    NonEmpty,
    RequestMetadata,
    check_blocks,
    to_json,
)

__all__ = [
    "ParentEvent",
    "ParentRoute",
    "StartRequest",
    "call_key",
    "fingerprint",
    "parent_context_fingerprint",
    "parent_key",
    "parent_surface",
    "request_fingerprint",
    "request_metadata",
]

ROOT = "root"
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class ParentEvent(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One ``parent.session.events`` entry, as ``{type, data}`` (no seq, time or ids)."""

    type: str
    data: dict[str, Any]


class ParentRoute(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """``parent.options.{provider, model}``: the parent's model route."""

    provider: str | UnsetType = UNSET
    model: str | UnsetType = UNSET


class StartRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``subagent/start`` params: the request as the provider sees it plus parent facts.

    ``request`` is ``ResolvedSubagentStartRequest`` without ``parent``, ``signal`` and
    ``descriptor``; the rest is read from ``request.parent`` (see the format doc).
    """

    request: FullRequest
    parentSessionId: NonEmpty
    parentOrigin: Literal["subagent"] | UnsetType = UNSET
    parentDepth: Count = 0
    parentPreset: str | UnsetType = UNSET
    parentRoute: ParentRoute = ParentRoute()
    parentEvents: list[ParentEvent] = []
    signalAborted: bool = False


def fingerprint(value: Any, location: str) -> str:
    """Return the canonical digest of a wire value.

    Raises:
        InvalidStartRequest: the value has no canonical form (location named).
    """
    try:
        return digest(value)
    except CanonicalJsonError as exc:
        raise InvalidStartRequest(location.rstrip("/") + exc.location, exc.reason) from None
    except UnicodeError:
        raise InvalidStartRequest(location, "lone surrogate in a string") from None
    except RecursionError:
        raise InvalidStartRequest(location, "nesting too deep") from None


def request_fingerprint(start: StartRequest) -> str:
    """Return ``requestFingerprint``: digest of the unredacted normalized request.

    Raises:
        InvalidStartRequest: the prompt is not typed content blocks or not canonical JSON.
    """
    problem = check_blocks(start.request.prompt, "request.prompt")
    if problem is not None:
        raise InvalidStartRequest("request.prompt", problem)
    return fingerprint(to_json(start.request), "request")


def _text(value: Any, location: str) -> Any:
    """Return ``value`` when it is a list, else fail naming ``location``."""
    if not isinstance(value, list):
        raise InvalidStartRequest(location, "content is not an array")
    return value


def _without_call_id(block: Any) -> Any:
    """Drop the model-issued id of a tool-call block (it differs on every run)."""
    if isinstance(block, dict) and block.get("type") == "tool-call":
        return {"type": "tool-call", "name": block.get("name"), "arguments": block.get("arguments")}
    return block


def parent_surface(events: list[ParentEvent]) -> list[dict[str, Any]]:
    """Normalize the parent's model-visible history for fingerprinting.

    Keeps ``user/message``, ``assistant/message`` and ``tool/result`` content in order; drops
    plugin runtime-context snapshots (they embed the workspace path), tool-call ids and
    ``toolCallId`` links. Other event types are ignored.

    The surface ends before the latest ``assistant/message``: that message holds the
    delegating call and its siblings, so keeping it would fold every sibling's request (and
    results of siblings that finished first) into each call's parent context.

    Raises:
        InvalidStartRequest: a kept event lacks its content array.
    """
    surface: list[dict[str, Any]] = []
    last_assistant = max(
        (i for i, event in enumerate(events) if event.type == "assistant/message"), default=len(events)
    )
    for index, event in enumerate(events[:last_assistant]):
        where = f"parentEvents/{index}/data"
        data = event.data
        if event.type == "user/message":
            source = data.get("source")
            source = source if isinstance(source, dict) else {}
            if source.get("kind") == "plugin" and source.get("form") == "snapshot":
                continue
            entry: dict[str, Any] = {"k": "user", "content": _text(data.get("content"), where)}
            if "kind" in source:
                entry["source"] = source["kind"]
            surface.append(entry)
        elif event.type == "assistant/message":
            message = data.get("message")
            content = _text(message.get("content") if isinstance(message, dict) else None, where)
            surface.append(
                {
                    "k": "assistant",
                    "content": [
                        _without_call_id(b) for b in content
                    ],
                }
            )
        elif event.type == "tool/result":
            message = data.get("message")
            content = _text(message.get("content") if isinstance(message, dict) else None, where)
            surface.append(
                {
                    "k": "tool-result",
                    "content": [
                        {"content": b.get("content"), "isError": b.get("isError", False)}
                        if isinstance(b, dict)
                        else b
                        for b in content
                    ],
                }
            )
    return surface


def parent_context_fingerprint(start: StartRequest) -> str:
    """Return ``parentContextFingerprint`` over origin, depth, preset, route and surface.

    Raises:
        InvalidStartRequest: the parent facts are malformed or not canonical JSON.
    """
    context: dict[str, Any] = {
        "depth": start.parentDepth,
        "route": to_json(start.parentRoute),
        "surface": parent_surface(start.parentEvents),
    }
    if not isinstance(start.parentOrigin, UnsetType):
        context["origin"] = start.parentOrigin
    if not isinstance(start.parentPreset, UnsetType):
        context["preset"] = start.parentPreset
    return fingerprint(context, "parentContext")


def parent_key(start: StartRequest, child_keys: Mapping[str, str]) -> str:
    """Return ``parentKey``: the recording child's callKey, ``root``, or ``unknown-subagent@N``."""
    known = child_keys.get(start.parentSessionId)
    if known is not None:
        return known
    if start.parentOrigin == "subagent":
        return f"unknown-subagent@{start.parentDepth}"
    return ROOT


def call_key(
    parent: str, label: str | None, request_fp: str, occurrence: int, *, parent_fp: str | None = None
) -> str:
    """Return the diagnostic ``callKey`` ``<parent>/<label>-<rf12>~<occurrence>``.

    With ``parent_fp`` (the caller found that key taken: the same request under another
    parent context, whose occurrences count from 1 again) it is ``<label>-<rf12>.<pcf8>~<n>``.
    """
    slug = _SLUG.sub("-", label or "").strip("-")[:32] or "call"
    context = "" if parent_fp is None else f".{parent_fp[7:15]}"
    return f"{parent}/{slug}-{request_fp[7:19]}{context}~{occurrence}"


def request_metadata(request: FullRequest) -> RequestMetadata:
    """Project a request onto the metadata view (no prompt text, schema or persona)."""
    prompt_bytes = sum(
        len(block["text"].encode("utf-8", "surrogatepass"))
        for block in request.prompt
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    )
    options = request.agentOptions if isinstance(request.agentOptions, dict) else {}
    provider = options.get("provider")
    model = options.get("model")
    return RequestMetadata(
        label=request.label,
        promptBlocks=len(request.prompt),
        promptBytes=prompt_bytes,
        hasOutputSchema=not isinstance(request.outputSchema, UnsetType),
        maxDepth=request.maxDepth,
        childProvider=provider if isinstance(provider, str) else UNSET,
        childModel=model if isinstance(model, str) else UNSET,
        toolFilter=request.toolFilter,
        hasPersona=not isinstance(request.persona, UnsetType),
    )
