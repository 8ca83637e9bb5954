"""Record and replay transitions of the model cassette."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ProtocolError
from dsh_sidecar.python_core.model_cassette import Forward, ModelCassette, Pass, Serve
from dsh_sidecar.python_core.model_cassette.errors import (
    ModelCassetteExists,
    ModelCassetteMismatch,
    ModelExtraCall,
    ModelRecordingIncomplete,
    ModelReplayPoisoned,
    ModelUnconsumed,
)


def _replay(kit: Any, path: Path, **kw: object) -> ModelCassette:
    return ModelCassette.open(kit.config(path, "replay", **kw), cwd=kit.CWD, host_version="0.1.0-rc.8")


def test_replay_serves_each_call_at_its_lane_position(kit: Any, make_cassette: Callable[..., Path]) -> None:
    cassette = _replay(kit, make_cassette())
    title = cassette.admit(kit.request(purpose="session-title", tools=()))  # lanes are independent
    first = cassette.admit(kit.request())

    assert isinstance(first, Serve) and isinstance(title, Serve)
    assert json.loads(bytes(first.chunks)) == json.loads(kit.tool_chunks())
    assert first.at_ms is None
    cassette.admit(kit.request(extra=[{"id": "z", "role": "assistant", "source": {"kind": "model"}, "content": []}]))
    report = cassette.close()
    assert report.errors == ()
    assert (report.stats.consumed, report.stats.unconsumed) == (3, 0)


def test_recorded_timing_serves_the_offsets(kit: Any, make_cassette: Callable[..., Path]) -> None:
    decision = _replay(kit, make_cassette(), timing="recorded").admit(kit.request())

    assert isinstance(decision, Serve) and decision.at_ms == (0, 1, 2)


def test_the_mock_route_passes_by_default_and_only_listed_providers_are_captured(
    kit: Any, make_cassette: Callable[..., Path],
) -> None:
    cassette = _replay(kit, make_cassette())
    assert isinstance(cassette.admit({**kit.request(), "provider": "mock"}), Pass)
    listed = _replay(kit, make_cassette(), providers=("other",))
    assert isinstance(listed.admit(kit.request()), Pass)


def test_a_mismatch_fails_closed_names_the_difference_and_poisons(
    kit: Any, make_cassette: Callable[..., Path],
) -> None:
    cassette = _replay(kit, make_cassette())

    with pytest.raises(ModelCassetteMismatch) as caught:
        cassette.admit(kit.request(maxTokens=10))
    assert "model call model#0" in str(caught.value) and "option maxTokens differs" in str(caught.value)
    with pytest.raises(ModelReplayPoisoned):
        cassette.admit(kit.request(purpose="session-title", tools=()))
    report = cassette.close()
    assert report.stats.poisoned and [e.code for e in report.errors] == ["MODEL_CASSETTE_MISMATCH"]


def test_an_extra_call_is_refused(kit: Any, make_cassette: Callable[..., Path]) -> None:
    cassette = _replay(kit, make_cassette([(kit.request(), kit.text_chunks())]))
    cassette.admit(kit.request())

    with pytest.raises(ModelExtraCall, match="model#1: extra call, the cassette holds 1 calls"):
        cassette.admit(kit.request())


def test_unconsumed_calls_fail_the_replay_at_close(kit: Any, make_cassette: Callable[..., Path]) -> None:
    report = _replay(kit, make_cassette()).close()

    assert [type(e) for e in report.errors] == [ModelUnconsumed]
    # The session title the host did not ask for again is a note, not a failure.
    assert "2 recorded model calls not consumed, first model call model#0" in str(report.errors[0])
    assert report.errors[0].hint.startswith("if the new model requests are intended, re-record: delete c0.ndjson")


def test_record_refuses_an_existing_cassette(kit: Any, make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()

    with pytest.raises(ModelCassetteExists):
        ModelCassette.open(kit.config(path), cwd=kit.CWD, host_version="x")


def test_an_unfinished_call_keeps_the_partial_and_publishes_nothing(kit: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.ndjson"
    cassette = ModelCassette.open(kit.config(path), cwd=kit.CWD, host_version="x")
    first = cassette.admit(kit.request())
    assert isinstance(first, Forward)
    cassette.recorded(first.handle, msgspec.Raw(kit.tool_chunks()), [0.0, 1.0, 2.0], complete=True)
    second = cassette.admit(kit.request())
    assert isinstance(second, Forward)
    cassette.recorded(second.handle, msgspec.Raw(b"[]"), [], complete=False)
    report = cassette.close()

    assert not report.published and [type(e) for e in report.errors] == [ModelRecordingIncomplete]
    assert "model call model#1 did not finish" in str(report.errors[0])
    assert sorted(os.listdir(tmp_path)) == ["m.ndjson.partial"]


def test_a_call_still_streaming_at_shutdown_is_incomplete(kit: Any, tmp_path: Path) -> None:
    cassette = ModelCassette.open(kit.config(tmp_path / "m.ndjson"), cwd=kit.CWD, host_version="x")
    cassette.admit(kit.request())

    assert "was still streaming at shutdown" in str(cassette.close().errors[0])


def test_record_keeps_the_view_only_when_asked(kit: Any, make_cassette: Callable[..., Path]) -> None:
    meta = make_cassette().read_text()
    full = make_cassette(requestView="full").read_text()

    assert '"view"' not in meta and "hunter2" in meta  # the answer chunks are the recording itself
    assert '"view"' in full and kit.CWD not in full and "<cwd>" in full


def test_a_report_for_an_unknown_handle_is_a_protocol_error(kit: Any, tmp_path: Path) -> None:
    cassette = ModelCassette.open(kit.config(tmp_path / "m.ndjson"), cwd=kit.CWD, host_version="x")

    with pytest.raises(ProtocolError, match="handle 9, which is not an open recorded call"):
        cassette.recorded(9, msgspec.Raw(kit.text_chunks()), [0.0] * 5, complete=True)
