"""The session-title call the host abandons at exit, byte-kept chunks and the named lifecycle errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.cassette_io import Chain
from dsh_sidecar.python_core.model_cassette import Forward, ModelCassetteEngine, Serve, load, verify_file
from dsh_sidecar.python_core.model_cassette.errors import (
    ModelCallLeftOut,
    ModelCassetteClosed,
    ModelCassetteMismatch,
    ModelReplayPoisoned,
    ModelRequestInvalid,
)
from dsh_sidecar.python_core.model_cassette.format import HeaderFrame, decode_frame

TITLE = {"purpose": "session-title", "tools": ()}


def _open(kit: Any, path: Path, mode: str = "record") -> ModelCassetteEngine:
    return ModelCassetteEngine.open(kit.config(path, mode), cwd=kit.CWD, host_version="0.1.0-rc.8")


def _forward(cassette: ModelCassetteEngine, request: dict[str, Any]) -> int:
    decision = cassette.admit(request)
    assert isinstance(decision, Forward)
    return decision.handle


def _finish(cassette: ModelCassetteEngine, handle: int, chunks: bytes) -> None:
    n = len(json.loads(chunks))
    cassette.recorded(handle, msgspec.Raw(chunks), [float(i) for i in range(n)], complete=True)


def _record_with_title_open(kit: Any, path: Path, *, aborted: bool) -> ModelCassetteEngine:
    """A finished turn whose title call is still streaming (or was aborted) at shutdown."""
    cassette = _open(kit, path)
    title = _forward(cassette, kit.request(**TITLE))
    _finish(cassette, _forward(cassette, kit.request()), kit.text_chunks())
    if aborted:
        cassette.recorded(title, msgspec.Raw(b"[]"), [], complete=False)
    return cassette


@pytest.mark.parametrize("aborted", [False, True])
def test_an_unsettled_title_call_is_left_out_with_one_note_and_the_turn_publishes(
    kit: Any, tmp_path: Path, aborted: bool,
) -> None:
    path = tmp_path / "m.ndjson"
    cassette = _record_with_title_open(kit, path, aborted=aborted)
    report = cassette.close()

    assert report.published and report.errors == ()
    assert cassette.notes() == [
        "model cassette: session-title#0 had not settled at exit (the host does not wait for it); "
        "left out of the recording",
    ]
    assert load(str(path)).left_out == ("session-title#0",)
    assert verify_file(str(path)).lanes == {"model": 1}


@pytest.mark.parametrize("how", ["signal aborted", "aborted finish"])
def test_a_title_call_the_host_aborted_at_exit_is_left_out_even_when_it_streamed_a_finish(
    kit: Any, tmp_path: Path, how: str,
) -> None:
    # At exit rc.8 aborts the title request; whether that abort reaches the stream as a finish
    # before the process exits is a race (seen under load): either way it was not answered.
    path = tmp_path / "m.ndjson"
    cassette = _open(kit, path)
    title = _forward(cassette, kit.request(**TITLE))
    _finish(cassette, _forward(cassette, kit.request()), kit.text_chunks())
    chunks = kit.text_chunks() if how == "signal aborted" else json.dumps(
        [{"type": "finish", "reason": {"kind": "aborted"}}]).encode()
    n = len(json.loads(chunks))
    cassette.recorded(title, msgspec.Raw(chunks), [float(i) for i in range(n)], complete=True,
                      aborted=how == "signal aborted")
    report = cassette.close()
    assert report.published and report.errors == ()
    assert load(str(path)).left_out == ("session-title#0",)
    assert verify_file(str(path)).lanes == {"model": 1}


def test_a_loop_call_that_ended_aborted_is_recorded(kit: Any, tmp_path: Path) -> None:
    path = tmp_path / "m.ndjson"
    cassette = _open(kit, path)
    handle = _forward(cassette, kit.request())
    cassette.recorded(handle, msgspec.Raw(kit.text_chunks()), [float(i) for i in range(5)], complete=True,
                      aborted=True)
    assert cassette.close().published
    assert verify_file(str(path)).lanes == {"model": 1}


def test_an_unsettled_loop_call_still_fails_the_recording(kit: Any, tmp_path: Path) -> None:
    cassette = _open(kit, tmp_path / "m.ndjson")
    _forward(cassette, kit.request())
    report = cassette.close()
    assert not report.published
    assert [e.code for e in report.errors] == ["MODEL_RECORDING_INCOMPLETE"]
    assert "model call model#0 was still streaming at shutdown" in str(report.errors[0])


@pytest.mark.parametrize("asks_for_title", [False, True])
def test_replay_of_a_recording_without_the_title_works_whether_or_not_the_host_asks(
    kit: Any, tmp_path: Path, asks_for_title: bool,
) -> None:
    path = tmp_path / "m.ndjson"
    _record_with_title_open(kit, path, aborted=False).close()
    replay = _open(kit, path, "replay")
    if asks_for_title:
        with pytest.raises(ModelCallLeftOut, match="session-title#0 was left out of the recording"):
            replay.admit(kit.request(**TITLE))
    assert isinstance(replay.admit(kit.request()), Serve)  # not poisoned by the title
    report = replay.close()
    assert report.errors == () and not report.stats.poisoned


def test_a_recorded_title_the_replay_never_asks_for_is_a_note(kit: Any, tmp_path: Path) -> None:
    path = kit.record(tmp_path / "m.ndjson", [(kit.request(**TITLE), kit.text_chunks("T")),
                                              (kit.request(), kit.text_chunks())])
    replay = _open(kit, path, "replay")
    replay.admit(kit.request())
    assert replay.close().errors == ()
    assert replay.notes() == ["model cassette: session-title#0 was not asked for (the host abandons it at exit)"]


def test_a_title_refused_by_a_poisoned_replay_was_asked_for_and_gets_no_note(kit: Any, tmp_path: Path) -> None:
    path = kit.record(tmp_path / "m.ndjson", [(kit.request(), kit.text_chunks()),
                                              (kit.request(**TITLE), kit.text_chunks("T"))])
    replay = _open(kit, path, "replay")
    with pytest.raises(ModelCassetteMismatch):
        replay.admit(kit.request(text="a changed prompt"))
    with pytest.raises(ModelReplayPoisoned):
        replay.admit(kit.request(**TITLE))  # the host did ask for the title

    assert [e.code for e in replay.close().errors] == ["MODEL_CASSETTE_MISMATCH"]
    assert replay.notes() == []


def test_replayed_chunks_are_the_bytes_the_host_sent_key_order_included(kit: Any, tmp_path: Path) -> None:
    chunks = b'[{"type":"usage","usage":{"outputTokens":2,"inputTokens":1}},{"type":"finish","reason":{"kind":"stop"}}]'
    path = kit.record(tmp_path / "m.ndjson", [(kit.request(), chunks)])
    served = _open(kit, path, "replay").admit(kit.request())
    assert isinstance(served, Serve) and bytes(served.chunks) == chunks


def test_endpoints_never_reach_the_file_and_the_failure_keeps_its_code(kit: Any, tmp_path: Path) -> None:
    failure = {"code": "NETWORK", "message": "DeepSeek API stream from http://10.1.2.3:8443/v1 failed: "
               "connect ECONNREFUSED 10.1.2.3:8443", "status": 502}
    chunks = json.dumps([{"type": "finish", "reason": {"kind": "error", "failure": failure}}]).encode()
    path = kit.record(tmp_path / "m.ndjson", [(kit.request(), chunks)])
    data = path.read_bytes()
    assert b"10.1.2.3" not in data and b"8443" not in data
    served = _open(kit, path, "replay").admit(kit.request())
    assert isinstance(served, Serve)
    [finish] = json.loads(bytes(served.chunks))
    # Served as recorded (endpoints scrubbed), with no retry hint added.
    assert finish["reason"]["failure"] == {
        "code": "NETWORK", "message": "DeepSeek API stream from <endpoint> failed: connect ECONNREFUSED <host>",
        "status": 502,
    }


def test_both_timings_serve_a_recorded_failure_as_recorded_with_or_without_a_retry_hint(
    kit: Any, tmp_path: Path,
) -> None:
    # An instant replay used to add providerRetryAfterMs: 1 to a failure without a hint, which
    # the host then wrote into its session log: the replay was not the recording.
    hinted = b'[{"type":"finish","reason":{"kind":"error","failure":{"code":"RATE_LIMIT","message":"429",' \
             b'"providerRetryAfterMs":2000}}}]'
    bare = b'[{"type":"finish","reason":{"kind":"error","failure":{"code":"SERVER","message":"500"}}}]'
    path = kit.record(tmp_path / "m.ndjson", [(kit.request(), hinted), (kit.request(text="two"), bare)])
    instant = _open(kit, path, "replay")
    assert bytes(instant.admit(kit.request()).chunks) == hinted  # type: ignore[union-attr]
    served = bytes(instant.admit(kit.request(text="two")).chunks)  # type: ignore[union-attr]
    assert served == bare
    paced = ModelCassetteEngine.open(kit.config(path, "replay", timing="recorded"), cwd=kit.CWD, host_version="x")
    paced.admit(kit.request())
    assert bytes(paced.admit(kit.request(text="two")).chunks) == bare  # type: ignore[union-attr]


def test_a_version_1_file_with_canonical_chunks_still_replays(kit: Any, tmp_path: Path) -> None:
    v2 = kit.record(tmp_path / "v2.ndjson", [(kit.request(), b'[{"reason":{"kind":"stop"},"type":"finish"}]')])
    chain = Chain()
    lines = []
    for line in v2.read_bytes().splitlines():
        frame = msgspec.structs.replace(decode_frame(line), prev="", hash=msgspec.UNSET)
        if isinstance(frame, HeaderFrame):
            frame = msgspec.structs.replace(frame, version=1)
        lines.append(chain.link(frame)[1])
    v1 = tmp_path / "v1.ndjson"
    v1.write_bytes(b"".join(lines))
    assert verify_file(str(v1)).version == 1
    assert isinstance(_open(kit, v1, "replay").admit(kit.request()), Serve)


@pytest.mark.parametrize(("field", "value", "named"), [
    ("messages", 1, "request.messages is not a list"),
    ("tools", {"a": 1}, "request.tools is not a list"),
    ("messages", [1], "request.messages[0] is not an object"),
    ("purpose", 3, "request.purpose is not a string"),
    ("model", 5, "request.model is not a string"),
])
def test_a_request_of_the_wrong_shape_is_named(kit: Any, tmp_path: Path, field: str, value: Any,
                                               named: str) -> None:
    cassette = _open(kit, tmp_path / "m.ndjson")
    with pytest.raises(ModelRequestInvalid, match=named.replace("[", r"\[").replace("]", r"\]")):
        cassette.admit({**kit.request(), field: value})


def test_hooks_after_close_are_named(kit: Any, tmp_path: Path) -> None:
    cassette = _open(kit, tmp_path / "m.ndjson")
    handle = _forward(cassette, kit.request())
    cassette.close()
    with pytest.raises(ModelCassetteClosed, match="model/request after shutdown") as request:
        cassette.admit(kit.request())
    assert str(request.value).endswith("the model cassette is closed; no provider request was made")
    with pytest.raises(ModelCassetteClosed, match="model/recorded after shutdown") as recorded:
        cassette.recorded(handle, msgspec.Raw(b"[]"), [], complete=False)
    # That call's provider request was made: the message must not say otherwise.
    assert str(recorded.value).endswith("the model cassette is closed, the call is not recorded")


def test_a_deeply_nested_file_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "deep.ndjson"
    path.write_bytes(b'{"a":' * 1000 + b"\n")
    report = verify_file(str(path))
    assert str(report.error) == "MODEL_CASSETTE_INVALID: line 1: nested deeper than 256 levels"
