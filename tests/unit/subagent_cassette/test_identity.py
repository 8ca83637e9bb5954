"""Identity: fingerprints, parent keys, call keys, the StartRequest wire contract."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.canonical import digest
from dsh_sidecar.python_core.subagent_cassette.errors import InvalidStartRequest
from dsh_sidecar.python_core.subagent_cassette.format import to_json
from dsh_sidecar.python_core.subagent_cassette.identity import (
    StartRequest,
    call_key,
    parent_context_fingerprint,
    parent_key,
    request_fingerprint,
    request_metadata,
)

from .conftest import SECRET


def _snapshot(cwd: str) -> dict[str, Any]:
    return {
        "type": "user/message",
        "data": {
            "content": [{"type": "text", "text": f'session workspace: "{cwd}"'}],
            "source": {
                "kind": "plugin",
                "plugin": "@deepseek-ai/dsh-system-prompt",
                "form": "snapshot",
            },
        },
    }


def _assistant(call_id: str) -> dict[str, Any]:
    return {
        "type": "assistant/message",
        "data": {
            "message": {
                "content": [
                    {"type": "tool-call", "id": call_id, "name": "subagent", "arguments": "{}"}
                ]
            }
        },
    }


def _tool_result(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool/result",
        "data": {
            "message": {
                "content": [
                    {"type": "tool-result", "toolCallId": call_id, "content": [], "isError": False}
                ]
            }
        },
    }


def test_runtime_context_snapshot_does_not_change_parent_fingerprint(make_start: Any) -> None:
    here = make_start(events=[_snapshot("/work/a"), _assistant("call_1")])
    there = make_start(events=[_snapshot("/elsewhere/b"), _assistant("call_1")])
    assert parent_context_fingerprint(here) == parent_context_fingerprint(there)


def test_tool_call_ids_and_session_ids_do_not_change_parent_fingerprint(make_start: Any) -> None:
    one = make_start(parent="session-1", events=[_assistant("call_1"), _tool_result("call_1")])
    two = make_start(parent="session-2", events=[_assistant("call_9"), _tool_result("call_9")])
    assert parent_context_fingerprint(one) == parent_context_fingerprint(two)


def test_the_delegating_message_and_its_siblings_do_not_enter_the_parent_context(make_start: Any) -> None:
    def delegating(prompt: str) -> dict[str, Any]:
        arguments = json.dumps({"prompt": prompt})
        call = {"type": "tool-call", "id": "c1", "name": "subagent", "arguments": arguments}
        return {"type": "assistant/message", "data": {"message": {"content": [call]}}}

    one = make_start(events=[_assistant("earlier"), _tool_result("earlier"), delegating("a")])
    two = make_start(events=[_assistant("earlier"), _tool_result("earlier"), delegating("b"), _tool_result("c1")])

    assert parent_context_fingerprint(one) == parent_context_fingerprint(two)


def test_user_text_changes_parent_fingerprint(make_start: Any) -> None:
    plain = make_start()
    other = make_start(
        events=[
            {
                "type": "user/message",
                "data": {
                    "content": [{"type": "text", "text": "other"}],
                    "source": {"kind": "user"},
                },
            }
        ]
    )
    assert parent_context_fingerprint(plain) != parent_context_fingerprint(other)


def test_parent_depth_and_origin_change_parent_fingerprint(make_start: Any) -> None:
    root = make_start()
    nested = msgspec.structs.replace(root, parentOrigin="subagent", parentDepth=1)
    assert parent_context_fingerprint(root) != parent_context_fingerprint(nested)


def test_request_fingerprint_covers_prompt_and_options(make_start: Any) -> None:
    base = request_fingerprint(make_start())
    assert base == request_fingerprint(make_start(parent="session-other"))
    assert base != request_fingerprint(make_start(text="another prompt"))
    assert base != request_fingerprint(make_start(agentOptions={"model": "m"}))


def test_request_with_untyped_prompt_block_is_refused(make_start: Any) -> None:
    bad = msgspec.structs.replace(
        make_start(), request=msgspec.structs.replace(make_start().request, prompt=[{"x": 1}])
    )
    with pytest.raises(InvalidStartRequest) as info:
        request_fingerprint(bad)
    assert str(info.value) == (
        "INVALID_START_REQUEST: request.prompt[0] is not a typed content block at request.prompt"
    )


def test_request_without_canonical_form_names_the_location(make_start: Any) -> None:
    bad = make_start(agentOptions={"maxTokens": float("nan")})
    with pytest.raises(InvalidStartRequest) as info:
        request_fingerprint(bad)
    assert (
        str(info.value)
        == "INVALID_START_REQUEST: NaN or Infinity at request/agentOptions/maxTokens"
    )


def test_malformed_parent_event_is_refused(make_start: Any) -> None:
    bad = make_start(events=[{"type": "assistant/message", "data": {"message": "nope"}}, _assistant("c")])
    with pytest.raises(InvalidStartRequest, match="content is not an array at parentEvents/0/data"):
        parent_context_fingerprint(bad)


def test_start_request_is_closed() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `cwd`"):
        msgspec.convert(
            {"request": {"prompt": []}, "parentSessionId": "s", "cwd": "/x"}, StartRequest
        )


def test_parent_key_uses_recorded_child_then_origin(make_start: Any) -> None:
    start = make_start(parent="child-uuid")
    assert parent_key(start, {"child-uuid": "root/a-1~1"}) == "root/a-1~1"
    assert parent_key(start, {}) == "root"
    nested = msgspec.structs.replace(start, parentOrigin="subagent", parentDepth=2)
    assert parent_key(nested, {}) == "unknown-subagent@2"


def test_call_key_has_the_format_shape_and_slugs_the_label() -> None:
    # <parentKey>/<label>-<first 12 hex of the request fingerprint>~<occurrence>
    rf, pcf = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    assert call_key("root", "audit the/\nthing", rf, 2) == "root/audit-the-thing-aaaaaaaaaaaa~2"
    assert call_key("root", None, rf, 1) == "root/call-aaaaaaaaaaaa~1"
    # Only when that key is taken in the file (same request under another parent context).
    assert call_key("root", "audit", rf, 1, parent_fp=pcf) == "root/audit-aaaaaaaaaaaa.bbbbbbbb~1"


def test_metadata_view_counts_prompt_without_text(make_start: Any) -> None:
    start = make_start(
        text="héllo",
        agentOptions={"provider": "p", "model": "m"},
        persona="secret persona",
        toolFilter={"allow": ["read"]},
    )
    metadata = request_metadata(start.request)
    assert msgspec.to_builtins(metadata) == {
        "label": "audit",
        "promptBlocks": 1,
        "promptBytes": 6,
        "hasOutputSchema": False,
        "maxDepth": 3,
        "childProvider": "p",
        "childModel": "m",
        "toolFilter": {"allow": ["read"]},
        "hasPersona": True,
    }


def test_request_fingerprint_is_the_digest_of_the_full_view_before_redaction(
    record_file: Any, make_start: Any, make_outcome: Any, records_of: Any
) -> None:
    # The normalized request is what the full view stores: with nothing to redact, the stored
    # value's digest is the fingerprint; with a secret, the fingerprint is of the unredacted one.
    plain = make_start(text="nothing secret here")
    secret = make_start(text=f"use {SECRET}")
    records = records_of(record_file([(plain, make_outcome()), (secret, make_outcome())], requestView="full"))
    first, second = records[1], records[2]
    assert first["request"]["redactions"] == 0 and first["requestFingerprint"] == digest(first["request"]["value"])
    assert second["request"]["redactions"] == 1 and second["requestFingerprint"] != digest(second["request"]["value"])
    assert second["requestFingerprint"] == digest(to_json(secret.request))
