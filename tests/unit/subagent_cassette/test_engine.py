"""Engine: record/replay transitions, misses, poison, ambiguity, timing, close reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.subagent_cassette.config import parse_fields
from dsh_sidecar.python_core.subagent_cassette.engine import (
    Forward,
    Miss,
    Replay,
    SubagentCassetteEngine,
    Upstream,
)
from dsh_sidecar.python_core.subagent_cassette.errors import (
    AmbiguousCassette,
    AppendIncompatible,
    CassetteStateError,
    InvalidStartRequest,
    TargetMismatch,
)
from dsh_sidecar.python_core.subagent_cassette.format import (
    ResultErrorOutcome,
    ResultOutcome,
    StartErrorOutcome,
)
from dsh_sidecar.python_core.subagent_cassette.store import load

from .conftest import BODY, PROMPT, SECRET, UPSTREAM

Open = Callable[..., SubagentCassetteEngine]


def _forward(cassette: SubagentCassetteEngine, start: Any) -> Forward:
    decision = cassette.on_start(start)
    assert isinstance(decision, Forward)
    return decision


def _text(decision: Any) -> str:
    assert isinstance(decision, Replay) and isinstance(decision.outcome, ResultOutcome)
    return str(decision.outcome.result["output"][0]["text"])


def test_record_then_replay_returns_the_recorded_result(
    record_file: Any, open_cassette: Open, make_start: Any
) -> None:
    path = record_file()
    replay = open_cassette(path, mode="replay")
    decision = replay.on_start(make_start(parent="session-other"))
    assert _text(decision) == BODY
    report = replay.close()
    assert (report.errors, report.stats.replayed) == ((), 1)


def test_concurrent_siblings_finishing_in_reverse_keep_their_outcomes(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = tmp_path / "siblings.cassette.jsonl"
    record = open_cassette(path)
    first = _forward(record, make_start(label="first", text="one"))
    second = _forward(record, make_start(label="second", text="two"))
    record.on_outcome(second.handle, make_outcome(text="answer two"))
    record.on_outcome(first.handle, make_outcome(text="answer one"))
    record.close()
    assert [r.sequence for r in load(path).interactions] == [2, 1]
    replay = open_cassette(path, mode="replay")
    assert _text(replay.on_start(make_start(label="second", text="two"))) == "answer two"
    assert _text(replay.on_start(make_start(label="first", text="one"))) == "answer one"
    assert replay.close().errors == ()


@pytest.mark.parametrize(
    ("change", "differed"),
    [
        ({"text": "changed prompt"}, "request differed"),
        ({"events": []}, "parent context differed"),
        ({"events": [], "text": "changed"}, "parent context, request differed"),
    ],
)
def test_miss_names_what_differed_without_content(
    record_file: Any, open_cassette: Open, make_start: Any, change: dict[str, Any], differed: str
) -> None:
    replay = open_cassette(record_file(), mode="replay")
    decision = replay.on_start(make_start(**change))
    assert isinstance(decision, Miss) and decision.diagnostic is not None
    assert str(decision.error).startswith("CASSETTE_MISS: no recorded interaction for root/audit-")
    assert str(decision.error).endswith(f": {differed}")
    assert PROMPT not in str(decision) and "changed" not in str(decision.error)


def test_miss_on_parent_key_and_occurrence(
    record_file: Any, open_cassette: Open, make_start: Any
) -> None:
    replay = open_cassette(record_file(), mode="replay")
    nested = msgspec.structs.replace(make_start(), parentOrigin="subagent", parentDepth=0)
    # a subagent-origin parent changes both the key and the context fingerprint
    decision = replay.on_start(nested)
    assert isinstance(decision, Miss) and decision.diagnostic is not None
    assert decision.diagnostic.differed == ("parent key", "parent context", "request")
    replay2 = open_cassette(record_file(name="b.cassette.jsonl"), mode="replay")
    assert isinstance(replay2.on_start(make_start()), Replay)
    second = replay2.on_start(make_start())
    assert isinstance(second, Miss) and second.diagnostic is not None
    assert second.diagnostic.differed == ("occurrence",)


def test_first_miss_poisons_every_later_start(
    record_file: Any, open_cassette: Open, make_start: Any
) -> None:
    replay = open_cassette(record_file(), mode="replay")
    assert isinstance(replay.on_start(make_start(text="other")), Miss)
    later = replay.on_start(make_start())
    assert isinstance(later, Miss)
    assert str(later.error) == "REPLAY_POISONED: replay stopped after an earlier CASSETTE_MISS"
    report = replay.close()
    assert [e.code for e in report.errors] == ["CASSETTE_MISS", "CASSETTE_UNCONSUMED"]


def test_unconsumed_interactions_fail_close(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file(
        [(make_start(label="a"), make_outcome()), (make_start(label="b"), make_outcome())]
    )
    replay = open_cassette(path, mode="replay")
    replay.on_start(make_start(label="a"))
    report = replay.close()
    assert str(report.errors[0]).startswith(
        "CASSETTE_UNCONSUMED: 1 recorded interaction(s) not replayed: root/b-"
    )
    relaxed = open_cassette(path, mode="replay", assertConsumed=False)
    assert relaxed.close().errors == ()


def test_nested_interactions_of_a_replayed_child_are_tolerated(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = tmp_path / "nested.cassette.jsonl"
    record = open_cassette(path)
    child = _forward(record, make_start(label="child"))
    record.on_published(child.handle, "child-session")
    grandchild_start = msgspec.structs.replace(
        make_start(label="grandchild", parent="child-session"),
        parentOrigin="subagent",
        parentDepth=1,
    )
    grandchild = _forward(record, grandchild_start)
    assert grandchild.handle.call_key.startswith(child.handle.call_key + "/grandchild-")
    record.on_outcome(grandchild.handle, make_outcome())
    record.on_outcome(child.handle, make_outcome())
    record.close()
    replay = open_cassette(path, mode="replay")
    assert isinstance(replay.on_start(make_start(label="child")), Replay)
    report = replay.close()
    assert report.errors == ()
    assert (report.stats.unconsumed, report.stats.nested_unreachable) == (0, 1)


def _ambiguous(open_cassette: Open, tmp_path: Path, make_start: Any, make_outcome: Any) -> Path:
    path = tmp_path / "amb.cassette.jsonl"
    record = open_cassette(path)
    for text in ("first answer", "second answer"):
        record.on_outcome(_forward(record, make_start()).handle, make_outcome(text=text))
    record.close()
    return path


def test_ambiguous_group_is_rejected_by_default(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = _ambiguous(open_cassette, tmp_path, make_start, make_outcome)
    with pytest.raises(AmbiguousCassette) as info:
        open_cassette(path, mode="replay")
    assert str(info.value).startswith("AMBIGUOUS_CASSETTE: group root request sha256:")
    assert str(info.value).endswith(
        "has 2 different outcomes; set duplicatePolicy: sequence to replay them in order"
    )


def test_sequence_policy_replays_an_ambiguous_group_in_occurrence_order(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = _ambiguous(open_cassette, tmp_path, make_start, make_outcome)
    replay = open_cassette(path, mode="replay", duplicatePolicy="sequence")
    assert [_text(replay.on_start(make_start())) for _ in range(2)] == [
        "first answer",
        "second answer",
    ]


def test_identical_duplicates_are_not_ambiguous(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file([(make_start(), make_outcome()), (make_start(), make_outcome())])
    replay = open_cassette(path, mode="replay")
    assert [_text(replay.on_start(make_start())) for _ in range(2)] == [BODY, BODY]


def test_redacted_results_are_refused_unless_allowed(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file([(make_start(), make_outcome(text=f"key {SECRET}"))])
    assert SECRET.encode() not in path.read_bytes()
    refused = open_cassette(path, mode="replay").on_start(make_start())
    assert isinstance(refused, Miss)
    assert str(refused.error).endswith(
        "recorded result has 1 redaction(s); set allowRedactedReplay to replay it"
    )
    allowed = open_cassette(path, mode="replay", allowRedactedReplay=True)
    assert _text(allowed.on_start(make_start())) == "key [REDACTED]"


def test_prompt_secret_changes_nothing_in_matching_but_is_not_stored(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    start = make_start(text=f"use {SECRET}")
    path = record_file([(start, make_outcome())], requestView="full")
    assert SECRET.encode() not in path.read_bytes()
    assert isinstance(open_cassette(path, mode="replay").on_start(start), Replay)


def test_recorded_timing_scales_with_speed(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file([(make_start(), make_outcome(duration=40.0))])
    replay = open_cassette(path, mode="replay", timing="recorded", speed=2)
    decision = replay.on_start(make_start())
    assert isinstance(decision, Replay)
    assert (decision.start_delay_ms, decision.delay_ms) == (2.0, 20.0)
    instant = open_cassette(path, mode="replay").on_start(make_start())
    assert isinstance(instant, Replay) and (instant.start_delay_ms, instant.delay_ms) == (0, 0)


def test_unrepresentable_delay_is_invalid_config(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file([(make_start(), make_outcome(duration=1.7e308))])
    replay = open_cassette(path, mode="replay", timing="recorded", speed=0.001)
    with pytest.raises(ConfigError, match="speed: scaled replay delay is not representable"):
        replay.on_start(make_start())


def test_timing_is_stored_at_microsecond_precision(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any, records_of: Any
) -> None:
    # The host measures with performance.now(); the format stores ms rounded to 3 decimals.
    path = tmp_path / "timing.cassette.jsonl"
    record = open_cassette(path)
    settled = make_outcome()
    timing = msgspec.structs.replace(
        settled.timing, startLatencyMs=4.00049999, durationMs=40.1234567,
        signalAbortedAtMs=1.2345678, disposeCalledAtMs=0.0000004,
    )
    record.on_outcome(_forward(record, make_start()).handle, msgspec.structs.replace(settled, timing=timing))
    assert record.close().errors == ()
    stored = records_of(path)[1]["timing"]
    assert (stored["startLatencyMs"], stored["durationMs"]) == (4.0, 40.123)
    assert (stored["signalAbortedAtMs"], stored["disposeCalledAtMs"]) == (1.235, 0)


def test_unrepresentable_delay_consumes_nothing(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file([(make_start(), make_outcome(duration=1.7e308))])
    replay = open_cassette(path, mode="replay", timing="recorded", speed=0.001)
    with pytest.raises(ConfigError):
        replay.on_start(make_start())
    stats = replay.close().stats
    assert (stats.replayed, stats.unconsumed) == (0, 1)


def test_error_messages_are_redacted_when_recorded(
    record_file: Any, make_start: Any, make_outcome: Any, records_of: Any
) -> None:
    path = record_file([
        (make_start(label="a"), make_outcome(kind="start-error", published=False, local=False,
                                              text=f"auth failed for {SECRET}")),
        (make_start(label="b"), make_outcome(kind="result-error", text=f"lost {SECRET}")),
    ])
    assert SECRET.encode() not in path.read_bytes()
    errors = [r["outcome"] for r in records_of(path)[1:]]
    assert [e["error"]["message"] for e in errors] == ["auth failed for [REDACTED]", "lost [REDACTED]"]
    # This version records no error-redaction count.
    assert all(set(e) == {"kind", "error"} for e in errors)


def test_a_result_with_no_canonical_form_is_recorded_as_a_result_error(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any, records_of: Any
) -> None:
    # A post-publication serialization failure is the format's result-error: the recording
    # goes on (the live caller keeps its result) and replay rejects the run's result.
    path = tmp_path / "unsafe.cassette.jsonl"
    record = open_cassette(path)
    handle = _forward(record, make_start()).handle
    record.on_outcome(handle, make_outcome(structured={"id": 2**60}))
    assert record.close().errors == ()
    stored = records_of(path)[1]
    assert (stored["published"], stored["outcome"]) == (True, {"kind": "result-error", "error": {
        "name": "CassetteSerializationError",
        "message": "the result has no canonical JSON form: integer outside +-(2^53-1) at /structured/id",
    }})
    replayed = open_cassette(path, mode="replay").on_start(make_start())
    assert isinstance(replayed, Replay) and isinstance(replayed.outcome, ResultErrorOutcome)


def test_call_keys_have_the_format_shape_and_stay_unique(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any, records_of: Any
) -> None:
    # The same request again after the parent's history grew: another parent context, so
    # occurrence 1 of another group; its key takes the parent context digest to stay unique.
    first = make_start()
    retry = make_start(events=[*first.parentEvents, *first.parentEvents])
    path = tmp_path / "keys.cassette.jsonl"
    record = open_cassette(path)
    for start in (first, retry, first):
        record.on_outcome(_forward(record, start).handle, make_outcome())
    assert record.close().errors == ()
    keys = [r["callKey"] for r in records_of(path)[1:]]
    rf = records_of(path)[1]["requestFingerprint"][7:19]
    pcf = records_of(path)[2]["parentContextFingerprint"][7:15]
    assert keys == [f"root/audit-{rf}~1", f"root/audit-{rf}.{pcf}~1", f"root/audit-{rf}~2"]
    appended = open_cassette(path, writeMode="append")
    appended.on_outcome(_forward(appended, retry).handle, make_outcome())
    assert appended.close().errors == ()
    assert records_of(path)[4]["callKey"] == f"root/audit-{rf}.{pcf}~2"
    assert load(path).count == 4


def test_start_error_is_recorded_unpublished_and_replayed(
    record_file: Any, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    path = record_file(
        [
            (
                make_start(),
                make_outcome(
                    kind="start-error", published=False, local=False, text="provider offline"
                ),
            )
        ]
    )
    decision = open_cassette(path, mode="replay").on_start(make_start())
    assert isinstance(decision, Replay) and isinstance(decision.outcome, StartErrorOutcome)
    assert decision.outcome.error.code == "OFFLINE"


def test_record_without_any_start_writes_nothing_and_says_so(
    tmp_path: Path, open_cassette: Open
) -> None:
    path = tmp_path / "empty.cassette.jsonl"
    report = open_cassette(path).close()
    assert [str(e) for e in report.errors] == [
        "NOTHING_RECORDED: no subagent start() reached the cassette; empty.cassette.jsonl was "
        "not written (continuable delegations bypass start(): use backgroundMode one-shot)"
    ]
    assert not path.exists()
    assert not path.with_name(path.name + ".writer.lock").exists()


def test_unsettled_runs_are_written_as_abandoned(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any, clock: Any
) -> None:
    path = tmp_path / "cut.cassette.jsonl"
    record = open_cassette(path)
    hanging = _forward(record, make_start(label="hang"))
    record.on_published(hanging.handle, "child-1")
    done = _forward(record, make_start(label="done"))
    record.on_outcome(done.handle, make_outcome())
    clock.now += 2.5
    report = record.close()
    assert [str(e) for e in report.errors] == [
        "UNSETTLED_CALLS: 1 run(s) had not settled at close; recorded as abandoned"
    ]
    abandoned = load(path).interactions[1]
    assert isinstance(abandoned.outcome, ResultErrorOutcome)
    assert (abandoned.sequence, abandoned.outcome.error.name, abandoned.timing.durationMs) == (
        1,
        "CassetteAbandoned",
        2500.0,
    )


def test_invalid_outcome_leaves_the_run_in_flight(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    record = open_cassette(tmp_path / "bad.cassette.jsonl")
    handle = _forward(record, make_start()).handle
    with pytest.raises(Exception, match="published must be true for a result outcome"):
        record.on_outcome(handle, make_outcome(published=False, local=False))
    record.on_outcome(handle, make_outcome())
    assert record.close().errors == ()


def test_start_before_upstream_facts_is_illegal(
    tmp_path: Path, clock: Any, make_start: Any
) -> None:
    cassette = SubagentCassetteEngine.open(
        parse_fields({"mode": "record", "file": str(tmp_path / "x.jsonl")}),
        host_version="0.1.0-rc.8",
        clock=clock,
    )
    with pytest.raises(CassetteStateError) as info:
        cassette.on_start(make_start())
    assert str(info.value) == (
        "CASSETTE_STATE: start is not allowed while waiting for the upstream provider facts"
    )
    cassette.close()
    with pytest.raises(CassetteStateError, match="close is not allowed while closed"):
        cassette.close()


def test_outcome_for_an_unknown_handle_changes_nothing(
    tmp_path: Path, open_cassette: Open, make_start: Any, make_outcome: Any
) -> None:
    record = open_cassette(tmp_path / "x.cassette.jsonl")
    handle = _forward(record, make_start()).handle
    with pytest.raises(CassetteStateError):
        record.on_outcome(msgspec.structs.replace(handle, sequence=9), make_outcome())
    record.on_outcome(handle, make_outcome())
    assert record.close().stats.recorded == 1


def test_invalid_start_request_admits_nothing(
    tmp_path: Path, open_cassette: Open, make_start: Any
) -> None:
    record = open_cassette(tmp_path / "x.cassette.jsonl")
    with pytest.raises(InvalidStartRequest):
        record.on_start(make_start(agentOptions={"n": float("inf")}))
    assert record.close().stats.started == 0


def test_other_upstream_name_is_invalid_config(tmp_path: Path, open_cassette: Open) -> None:
    record = open_cassette(tmp_path / "x.cassette.jsonl")
    with pytest.raises(ConfigError, match=r"provider\.upstream: differs from the host"):
        record.on_upstream(msgspec.structs.replace(UPSTREAM, name="fork"))


def test_append_with_other_upstream_facts_is_refused(record_file: Any, open_cassette: Open) -> None:
    path = record_file()
    cassette = SubagentCassetteEngine.open(
        parse_fields({"mode": "record", "file": str(path), "writeMode": "append"}),
        host_version="0.1.0-rc.8",
        clock=lambda: 0.0,
    )
    facts = Upstream(
        name="spawn",
        capabilities=UPSTREAM.capabilities,
        inherits_parent_context=True,
        continuable=True,
    )
    with pytest.raises(AppendIncompatible, match="header provider differs"):
        cassette.on_upstream(facts)
    cassette.close()


def test_replay_refuses_another_host_version(record_file: Any, clock: Any) -> None:
    with pytest.raises(TargetMismatch, match=r"this host runs 0\.1\.0-rc\.8"):
        SubagentCassetteEngine.open(
            parse_fields({"mode": "replay", "file": "x"}), host_version="0.1.0-rc.7", clock=clock
        )


def test_the_header_keeps_the_upstream_provider_facts(record_file: Any) -> None:
    facts = load(record_file()).header.provider
    assert (facts.upstream, facts.continuable, facts.inheritsParentContext) == ("spawn", True, False)


def test_deferred_the_engine_writes_nothing_and_hands_over_the_lines(
    tmp_path: Path, clock: Any, ids: Any, make_start: Any, make_outcome: Any
) -> None:
    path = tmp_path / "d.cassette.jsonl"
    config = parse_fields({"mode": "record", "file": str(path)})
    cassette = SubagentCassetteEngine.open(config, host_version="0.1.0-rc.8", clock=clock, make_id=ids, deferred=True)
    cassette.on_upstream(UPSTREAM)
    decision = _forward(cassette, make_start())
    header = cassette.take_writes()
    cassette.on_outcome(decision.handle, make_outcome())
    interaction = cassette.take_writes()
    assert (len(header), len(interaction), path.exists()) == (1, 1, False)
    assert cassette.writer is not None
    cassette.writer.write_lines(header + interaction)
    report = cassette.close()
    cassette.writer.close()
    assert report.errors == () and load(path).count == 1


def test_deferred_a_lost_line_is_the_first_error_at_close(
    tmp_path: Path, clock: Any, ids: Any, make_start: Any, make_outcome: Any
) -> None:
    config = parse_fields({"mode": "record", "file": str(tmp_path / "d.cassette.jsonl")})
    cassette = SubagentCassetteEngine.open(config, host_version="0.1.0-rc.8", clock=clock, make_id=ids, deferred=True)
    cassette.on_upstream(UPSTREAM)
    decision = _forward(cassette, make_start())
    cassette.on_outcome(decision.handle, make_outcome())
    lost = ConfigError("disk", "full")
    cassette.write_failed(lost)
    report = cassette.close()
    assert cassette.writer is not None
    cassette.writer.close()
    assert report.errors[0] is lost
