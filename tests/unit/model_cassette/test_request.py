"""The canonical request view, its parts and the named differences."""

from __future__ import annotations

from typing import Any

from dsh_sidecar.python_core.canonical import canonical_bytes, is_canonical
from dsh_sidecar.python_core.model_request import (
    RequestParts,
    checked_parts,
    compare,
    lane_of,
    normalize,
    parts_of,
)


def _parts(kit: Any, **kw: Any) -> RequestParts:
    return parts_of(normalize(kit.request(**kw), cwd=kit.CWD))


def test_ids_session_and_signal_are_not_part_of_the_view(kit: Any) -> None:
    a = kit.request()
    b = {**kit.request(), "sessionId": "session-other"}
    b["messages"] = [{**b["messages"][0], "id": "m-other"}]

    assert parts_of(normalize(a, cwd=kit.CWD)).fingerprint() == parts_of(normalize(b, cwd=kit.CWD)).fingerprint()
    assert "sessionId" not in normalize(a, cwd=kit.CWD)


def test_the_working_directory_becomes_a_token(kit: Any) -> None:
    view = normalize(kit.request(), cwd=kit.CWD)

    assert view["system"] == "You work in <cwd>."
    moved = {**kit.request(), "system": "You work in /elsewhere."}
    assert parts_of(view) == parts_of(normalize(moved, cwd="/elsewhere"))


def test_a_changed_prompt_names_the_message_index_and_role_only(kit: Any) -> None:
    differences = compare(_parts(kit), _parts(kit, text="weather in Rome"))

    assert differences == ["message 0 (user) differs"]
    assert kit.SECRET not in " ".join(differences)


def test_a_changed_tool_list_names_the_tool_definitions(kit: Any) -> None:
    assert compare(_parts(kit), _parts(kit, tools=("weather_lookup",))) == ["tool echo missing"]
    assert compare(_parts(kit), _parts(kit, tools=("weather_lookup", "echo", "sleepy"))) == ["tool sleepy added"]
    assert compare(_parts(kit), _parts(kit, tools=("echo", "weather_lookup"))) == ["tool order differs"]


def test_a_changed_option_names_the_option(kit: Any) -> None:
    assert compare(_parts(kit), _parts(kit, maxTokens=64)) == ["option maxTokens differs"]
    assert compare(_parts(kit), _parts(kit, temperature=0.5)) == ["option temperature added"]


def test_purpose_picks_the_lane(kit: Any) -> None:
    assert lane_of(None) == "model"
    assert lane_of("session-title") == "session-title"
    assert compare(_parts(kit), _parts(kit, purpose="compaction")) == ["purpose compaction (recorded none)"]


def test_a_missing_message_is_counted(kit: Any) -> None:
    longer = _parts(kit, extra=[{"id": "x", "role": "assistant", "source": {"kind": "model"}, "content": []}])

    assert compare(longer, _parts(kit)) == ["1 messages, recorded 2 (first extra or missing at index 1)"]


def test_the_canonical_glue_check_accepts_the_view_and_rejects_any_other_spelling(kit: Any) -> None:
    view = canonical_bytes(normalize(kit.request(temperature=0.5, purpose="compaction"), cwd=kit.CWD))
    parts, glued = checked_parts(view)

    assert glued and parts == parts_of(normalize(kit.request(temperature=0.5, purpose="compaction"), cwd=kit.CWD))
    spaced = view.replace(b'{"messages":', b'{ "messages":', 1)
    assert spaced != view
    assert checked_parts(spaced) == (parts, False)
    assert not is_canonical(spaced)
