"""``modelCassette.filters``: the request view filtered before it is written and matched."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.filters import PLACEHOLDER, parse_filters
from dsh_sidecar.python_core.model_cassette import ModelCassetteEngine, Serve
from dsh_sidecar.python_core.model_cassette.config import parse_config
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteMismatch, ModelRulesDiffer
from dsh_sidecar.python_core.model_cassette.store import load, verify_file
from dsh_sidecar.python_core.model_request import filter_view

RULES = ["credentials", {"regex": "hunter2-[a-z0-9]+"}]


def _filtered(kit: Any, path: Path, mode: str = "record", rules: Any = RULES, **kw: Any) -> Any:
    raw = {"mode": mode, "file": path.name, "requestView": "full", "filters": rules, **kw}
    return parse_config(raw, cwd=str(path.parent))


def _record(kit: Any, path: Path, *requests: dict[str, Any]) -> Path:
    cassette = ModelCassetteEngine.open(_filtered(kit, path), cwd=kit.CWD, host_version="0.1.0-rc.8")
    for request in requests:
        decision = cassette.admit(request)
        chunks = kit.text_chunks("sunny")
        cassette.recorded(decision.handle, msgspec.Raw(chunks),  # type: ignore[union-attr]
                          [float(i) for i in range(len(json.loads(chunks)))], complete=True)
    report = cassette.close()
    assert report.published and not report.errors, report.errors
    return path


def _tool_call_message(secret: str) -> dict[str, Any]:
    block = {"type": "tool-call", "id": "c1", "name": "login", "arguments": {"user": "ana", "api_token": secret}}
    return {"id": "m-2", "role": "assistant", "source": {"kind": "model"}, "content": [block]}


def test_the_secret_never_reaches_the_view_and_the_same_request_replays(kit: Any, tmp_path: Path) -> None:
    request = kit.request(extra=[_tool_call_message("tok-0123456789")])
    path = _record(kit, tmp_path / "m.ndjson", request)
    text = path.read_text()
    assert kit.SECRET not in text and "tok-0123456789" not in text
    assert '"api_token":"[redacted]"' in text and f"weather in Paris {PLACEHOLDER}" in text
    assert '"maxTokens":256000' in text  # option names are never filtered, only their values
    assert verify_file(str(path)).error is None
    assert load(str(path)).header.filters is not None
    replay = ModelCassetteEngine.open(_filtered(kit, path, "replay"), cwd=kit.CWD, host_version="0.1.0-rc.8")
    assert isinstance(replay.admit(request), Serve)


def test_requests_differing_only_in_a_filtered_value_are_the_same_request(kit: Any, tmp_path: Path) -> None:
    path = _record(kit, tmp_path / "m.ndjson", kit.request(text="weather in Paris hunter2-aaaa"))
    replay = ModelCassetteEngine.open(_filtered(kit, path, "replay"), cwd=kit.CWD, host_version="0.1.0-rc.8")
    assert isinstance(replay.admit(kit.request(text="weather in Paris hunter2-bbbb")), Serve)
    other = ModelCassetteEngine.open(_filtered(kit, path, "replay"), cwd=kit.CWD, host_version="0.1.0-rc.8")
    with pytest.raises(ModelCassetteMismatch):
        other.admit(kit.request(text="weather in Rome hunter2-aaaa"))


def test_a_replay_with_other_filters_is_refused_by_name(kit: Any, tmp_path: Path) -> None:
    path = _record(kit, tmp_path / "m.ndjson", kit.request())
    with pytest.raises(ModelRulesDiffer) as caught:
        ModelCassetteEngine.open(_filtered(kit, path, "replay", rules=["credentials"]), cwd=kit.CWD,
                           host_version="0.1.0-rc.8")
    assert str(caught.value) == ("MODEL_CASSETTE_RULES_DIFFER: modelCassette.filters differs from the filters "
                                 "recorded in m.ndjson")
    with pytest.raises(ModelRulesDiffer):
        ModelCassetteEngine.open(kit.config(path, "replay", requestView="full"), cwd=kit.CWD, host_version="0.1.0-rc.8")


def test_a_cassette_recorded_without_filters_has_no_filters_member(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    assert '"filters"' not in path.read_text().splitlines()[0]


def test_the_view_keeps_its_structure_whatever_a_filter_names() -> None:
    view = {"provider": "p", "model": "m", "purpose": "title", "system": "s", "options": {"maxTokens": 5},
            "tools": [{"name": "t"}], "messages": [{"role": "user", "content": []}]}
    assert filter_view(view, lambda value: PLACEHOLDER) == {
        "provider": "p", "model": "m", "purpose": "title", "system": PLACEHOLDER, "options": {"maxTokens": PLACEHOLDER},
        "tools": [PLACEHOLDER], "messages": [PLACEHOLDER]}
    assert parse_filters([{"pointer": "/content/0/text"}])  # pointers are relative to one part


@pytest.mark.parametrize(("rule", "message"), [
    ({"key": "a", "tool": "t"}, "INVALID_CONFIG: modelCassette.filters[0].tool: is not a model cassette filter key"),
    ({"call": "m:f"}, "INVALID_CONFIG: modelCassette.filters[0].call: is not a model cassette filter key"),
    ({"key": "a", "in": "args"}, "INVALID_CONFIG: modelCassette.filters[0].in: is not a model cassette filter key: "
                                 "it filters the request view only"),
    ({"regex": "("}, "INVALID_CONFIG: modelCassette.filters[0].regex: is not a valid regular expression"),
])
def test_filter_keys_that_do_not_apply_are_refused_by_field(tmp_path: Path, rule: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"mode": "record", "file": "m.ndjson", "filters": [rule]}, cwd=str(tmp_path))
    assert str(caught.value) == message
