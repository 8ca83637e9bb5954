"""The host's raw parent facts become a start's identity facts in Python, not in the shim."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.subagent_cassette.format import FullRequest
from dsh_sidecar.python_core.subagent_cassette.host import (
    ABORTED_RESULT,
    PARENT_EVENT_TYPES,
    ParentFacts,
    start_request,
)
from dsh_sidecar.python_core.subagent_cassette.identity import ParentRoute, parent_context_fingerprint

REQUEST = msgspec.convert({"prompt": [{"type": "text", "text": "go"}], "maxDepth": 3}, FullRequest)


def _facts(**fields: Any) -> ParentFacts:
    return msgspec.convert({"sessionId": "s-1", **fields}, ParentFacts)


@pytest.mark.parametrize(
    ("header", "option", "depth"),
    [(None, None, 0), (2, None, 2), (None, 3, 3), (1, 4, 4), (5, 2, 5)],
)
def test_depth_is_the_larger_of_the_header_count_and_the_option(
    header: int | None, option: int | None, depth: int
) -> None:
    fields = {k: v for k, v in {"delegationDepth": header, "subagentDepth": option}.items() if v is not None}

    assert start_request(REQUEST, _facts(**fields), signal_aborted=False).parentDepth == depth


def test_only_a_subagent_origin_counts() -> None:
    assert start_request(REQUEST, _facts(origin="subagent"), signal_aborted=False).parentOrigin == "subagent"
    assert start_request(REQUEST, _facts(origin="fork"), signal_aborted=False).parentOrigin is msgspec.UNSET
    assert start_request(REQUEST, _facts(), signal_aborted=False).parentOrigin is msgspec.UNSET


def test_only_model_visible_events_are_kept_in_order() -> None:
    events = [
        {"type": "user/message", "data": {"content": [{"type": "text", "text": "hi"}]}},
        {"type": "assistant/chunk", "data": {"chunk": {}}},
        {"type": "tool/result", "data": {"message": {"content": []}}},
        {"type": "turn/start", "data": {"turn": 1}},
    ]

    start = start_request(REQUEST, _facts(events=events), signal_aborted=True)

    assert [e.type for e in start.parentEvents] == ["user/message", "tool/result"]
    assert start.signalAborted is True
    assert set(PARENT_EVENT_TYPES) == {"user/message", "assistant/message", "tool/result"}


def test_unsent_and_irrelevant_facts_leave_the_identity_unchanged() -> None:
    plain = start_request(REQUEST, _facts(route={"provider": "mock", "model": "m"}), signal_aborted=False)
    noisy = start_request(
        REQUEST,
        _facts(route={"provider": "mock", "model": "m"}, origin="other", delegationDepth=0,
               events=[{"type": "assistant/chunk", "data": {}}]),
        signal_aborted=False,
    )

    assert plain.parentRoute == ParentRoute(provider="mock", model="m")
    assert parent_context_fingerprint(plain) == parent_context_fingerprint(noisy)


def test_parent_facts_are_closed_and_counts_non_negative() -> None:
    with pytest.raises(msgspec.ValidationError, match="unknown field `cwd`"):
        _facts(cwd="/x")
    with pytest.raises(msgspec.ValidationError, match=r"\$.delegationDepth"):
        _facts(delegationDepth=-1)


def test_an_aborted_replayed_run_settles_as_rc8_aborted_result() -> None:
    assert msgspec.json.decode(ABORTED_RESULT) == {"output": [], "stopReason": "aborted"}
