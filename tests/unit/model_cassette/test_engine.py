"""Record and replay transitions of the model cassette."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ProtocolError, SidecarError
from dsh_sidecar.python_core.model_cassette import Forward, ModelCassetteEngine, Pass, Serve, verify_file
from dsh_sidecar.python_core.model_cassette.errors import (
    ModelCassetteExists,
    ModelCassetteMismatch,
    ModelExtraCall,
    ModelRecordingIncomplete,
    ModelReplayPoisoned,
    ModelUnconsumed,
)


def _replay(kit: Any, path: Path, **kw: object) -> ModelCassetteEngine:
    return ModelCassetteEngine.open(kit.config(path, "replay", **kw), cwd=kit.CWD, host_version="0.1.0-rc.8")


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
        ModelCassetteEngine.open(kit.config(path), cwd=kit.CWD, host_version="x")


def test_an_unfinished_call_keeps_the_partial_and_publishes_nothing(kit: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.ndjson"
    cassette = ModelCassetteEngine.open(kit.config(path), cwd=kit.CWD, host_version="x")
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
    cassette = ModelCassetteEngine.open(kit.config(tmp_path / "m.ndjson"), cwd=kit.CWD, host_version="x")
    cassette.admit(kit.request())

    assert "was still streaming at shutdown" in str(cassette.close().errors[0])


def test_record_keeps_the_view_only_when_asked(kit: Any, make_cassette: Callable[..., Path]) -> None:
    meta = make_cassette().read_text()
    full = make_cassette(requestView="full").read_text()

    assert '"view"' not in meta and "hunter2" in meta  # the answer chunks are the recording itself
    assert '"view"' in full and kit.CWD not in full and "<cwd>" in full


def test_a_report_for_an_unknown_handle_is_a_protocol_error(kit: Any, tmp_path: Path) -> None:
    cassette = ModelCassetteEngine.open(kit.config(tmp_path / "m.ndjson"), cwd=kit.CWD, host_version="x")

    with pytest.raises(ProtocolError, match="handle 9, which is not an open recorded call"):
        cassette.recorded(9, msgspec.Raw(kit.text_chunks()), [0.0] * 5, complete=True)


def _nested_chunks(depth: int) -> bytes:
    """A text answer whose first chunk carries an array nesting the whole array ``depth`` deep."""
    inner = b"[" * (depth - 2) + b"]" * (depth - 2)  # inside the chunk array and the chunk object
    return (b'[{"type":"text-delta","index":0,"text":"hi","extra":' + inner
            + b'},{"type":"finish","reason":{"kind":"stop"}}]')


@pytest.mark.parametrize(("chunks", "offsets", "code"), [
    (b'[{"type":"finish","type":"finish","reason":{"kind":"stop"}}]', 1, "NON_CANONICAL_JSON"),
    (b'[{"type":"finish","reason":{"kind":"stop"}}]', 2, "PROTOCOL_ERROR"),  # one offset too many
    (b"[1]", 1, "PROTOCOL_ERROR"),
    (_nested_chunks(256), 2, "PROTOCOL_ERROR"),  # its frame line would nest 257 levels
], ids=["duplicate key", "offsets", "not chunks", "too deep for a frame"])
def test_a_refused_model_recorded_keeps_the_recording_from_publishing(
    kit: Any, tmp_path: Path, chunks: bytes, offsets: int, code: str,
) -> None:
    # Published without the refused call, the file would miss lane position 0: verify refuses it.
    path = tmp_path / "m.ndjson"
    cassette = ModelCassetteEngine.open(kit.config(path), cwd=kit.CWD, host_version="x")
    first = cassette.admit(kit.request())
    assert isinstance(first, Forward)
    with pytest.raises(SidecarError) as refused:
        cassette.recorded(first.handle, msgspec.Raw(chunks), [0.0] * offsets, complete=True)
    assert refused.value.code == code
    second = cassette.admit(kit.request())
    assert isinstance(second, Forward)
    cassette.recorded(second.handle, msgspec.Raw(kit.text_chunks()), [0.0] * 5, complete=True)
    report = cassette.close()

    assert not report.published and [type(e) for e in report.errors] == [ModelRecordingIncomplete]
    assert f"model call model#0: its chunks were refused ({code})" in str(report.errors[0])
    assert sorted(os.listdir(tmp_path)) == ["m.ndjson.partial"]


def test_chunks_and_a_full_view_one_level_short_of_the_limit_record_and_verify(kit: Any, tmp_path: Path) -> None:
    deep_view = [[]]
    for _ in range(250):
        deep_view = [deep_view]
    # The view {messages: [{content: ...}]} nests 255 levels; the chunks 255: each line 256.
    request = kit.request(extra=[{"id": "m-2", "role": "user", "source": {"kind": "user"}, "content": deep_view}])
    path = kit.record(tmp_path / "m.ndjson", [(request, _nested_chunks(255))], requestView="full")

    assert verify_file(str(path)).valid


def test_a_full_view_too_deep_for_a_frame_keeps_the_recording_from_publishing(kit: Any, tmp_path: Path) -> None:
    deep_view = [[]]
    for _ in range(251):
        deep_view = [deep_view]
    request = kit.request(extra=[{"id": "m-2", "role": "user", "source": {"kind": "user"}, "content": deep_view}])
    cassette = ModelCassetteEngine.open(kit.config(tmp_path / "m.ndjson", requestView="full"), cwd=kit.CWD,
                                  host_version="x")
    decision = cassette.admit(request)  # the view itself nests 256 levels: within the limit
    assert isinstance(decision, Forward)
    cassette.recorded(decision.handle, msgspec.Raw(kit.text_chunks()), [0.0] * 5, complete=True)
    report = cassette.close()

    assert not report.published and [type(e) for e in report.errors] == [ModelRecordingIncomplete]
    assert "model call model#0: its request view nests deeper than 255 levels" in str(report.errors[0])
    assert sorted(os.listdir(tmp_path)) == ["m.ndjson.partial"]
