"""Test logic in Python (docs/test-logic.md) against real headless DSH rc.8.

Filters keep a secret out of the recorded file while replay still matches; matching rules
ignore chosen argument pointers; a fault overlay fails a replayed call by name; a hand-edited
cassette resealed with ``dsh-tool-cassette reseal`` verifies and replays; a stub serves a tool
from Python with no real body.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filter_canary
import msgspec
import pytest
import stub_weather
from dshrun import ROOT, Dsh, tool_bodies

from dsh_sidecar.bridge.api.run import Row, RunResult, ToolCassette, WarmPool
from dsh_sidecar.bridge.api.run import run as run_cold

# This module's runs are sessions of one warm host (docs/warm-host.md): the logic under test is
# the sidecar's, per session; the host's boot is paid once.
POOL = WarmPool()


def run(task: str | None = None, **options: Any) -> RunResult:
    """``bridge.api.run.run`` as a session of this module's warm host."""
    return run_cold(task, warm=POOL, **options)


@pytest.fixture(scope="module", autouse=True)
def _warm_host() -> Iterator[None]:
    yield
    POOL.close()

CANARY = "sk-canary0123456789"
SCRIPT_TWO_CALLS: dict[str, Any] = {"type": "dsh-mock-script", "version": 1, "steps": [
    {"tool": "echo", "args": {"text": "one"}}, {"tool": "echo", "args": {"text": "two"}},
    {"tool": "echo", "args": {"text": "three"}}]}
TOOL_CASSETTE_CLI = ROOT / ".venv" / "bin" / "dsh-tool-cassette"


def _tools() -> list[Row]:
    # Port 9 (discard) on loopback: nothing answers, so a real body that runs fails loudly.
    return [Row("example-tools", "dsh-example-tools", {"weatherUrl": "http://127.0.0.1:9"})]


def _assert_trace_hides_the_canary(page: Path) -> None:
    """The run's trace shows the call, its filtered arguments, and the canary nowhere (page or JSON)."""
    document = json.loads(page.with_suffix(".json").read_text())
    (call,) = document["runs"][0]["calls"]
    assert call["tool"] == "echo" and call["source"] == "recorded" and "[redacted]" in json.dumps(call["args"])
    for file in (page, page.with_suffix(".json")):
        assert CANARY not in file.read_text() and CANARY[3:] not in file.read_text()


def test_a_filtered_secret_never_reaches_the_file_and_the_replay_still_matches(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"],
                            filters=["credentials", {"regex": "sk-[a-z0-9]+"}], allow_redacted_replay=True)
    task = f'/mock run echo({{"text": "hi", "tags": ["{CANARY}"]}})'
    record = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="once", trace="t/rec.html")
    assert record.ok, record.explain()
    _assert_trace_hides_the_canary(tmp_path / "t" / "rec.html")
    # The live agent saw the real value; only the file holds the placeholder.
    assert record.result("echo").value == {"text": "hi", "tags": [CANARY]}
    text = (tmp_path / "echo.ndjson").read_text()
    assert CANARY not in text and "[redacted]" in text
    # The header keeps the rules' fingerprint: a regex may spell the secret itself.
    assert '"filters":"sha256:' in text and "sk-[a-z0-9]+" not in text
    replay = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="none")
    assert replay.ok, replay.explain()
    assert replay.tool_cassette is not None and replay.tool_cassette.consumed == 1
    assert replay.result("echo").value == {"text": "hi", "tags": ["[redacted]"]}
    assert tool_bodies(tmp_path) == ["echo"]


def test_a_filter_function_keeps_the_canary_out_of_the_file_and_the_replay_still_matches(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"], filters=[{"call": filter_canary.mask_keys}],
                            allow_redacted_replay=True)
    task = f'/mock run echo({{"text": "hi", "tags": ["{CANARY}", "plain"]}})'
    record = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="once", trace="t/rec.html")
    assert record.ok, record.explain()
    _assert_trace_hides_the_canary(tmp_path / "t" / "rec.html")
    assert record.result("echo").value == {"text": "hi", "tags": [CANARY, "plain"]}
    text = (tmp_path / "echo.ndjson").read_text()
    assert CANARY not in text
    assert '"args":{"tags":["[redacted]","plain"],"text":"hi"}' in text
    # Only the function's identity is fingerprinted: its module path is in no header.
    assert "filter_canary" not in text and str(tmp_path) not in text
    replay = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="none")
    assert replay.ok, replay.explain()
    assert replay.tool_cassette is not None and replay.tool_cassette.consumed == 1
    assert replay.result("echo").value == {"text": "hi", "tags": ["[redacted]", "plain"]}
    by_module = ToolCassette(file="echo.ndjson", include=["echo"], filters=[{"call": "filter_canary:mask_keys"}],
                             allow_redacted_replay=True)
    (tmp_path / "filter_canary.py").write_text(Path(filter_canary.__file__).read_text())
    assert run(task, cwd=tmp_path, rows=_tools(), tool_cassette=by_module, record_mode="none").ok
    assert tool_bodies(tmp_path) == ["echo"]


def test_a_filter_function_that_raises_fails_the_run_by_name_and_publishes_nothing(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"], filters=[{"call": filter_canary.broken}])
    result = run(f'/mock run echo({{"text": "{CANARY}"}})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette,
                 record_mode="once")
    assert result.exit_code == 1
    assert result.errors[0].code == "FILTER_RAISED"
    assert result.errors[0].message == (
        "toolCassette.filters[0] (filter_canary:broken) raised ValueError on the arguments of echo; the call was "
        "refused and nothing it was given reached the file; fix the filter")
    assert CANARY not in result.stderr
    assert result.tool_cassette is not None and not result.tool_cassette.published
    assert not (tmp_path / "echo.ndjson").exists()
    assert tool_bodies(tmp_path) == []


def test_a_filter_function_that_cannot_be_imported_stops_dsh_at_boot_by_name(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"], filters=[{"call": "nowhere.py:mask"}])
    result = run('/mock run echo({"text": "hi"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette,
                 record_mode="once")
    assert result.exit_code == 1
    assert ("FILTER_UNRESOLVED: toolCassette.filters[0].call: importing its module raised FileNotFoundError; give "
            "module:function (importable from the DSH cwd) or file.py:function (relative to the DSH cwd)"
            ) in result.stderr
    assert result.tool_calls == [] and tool_bodies(tmp_path) == []


def test_a_placeholder_in_a_replayed_outcome_is_refused_unless_allowed(tmp_path: Path) -> None:
    allowed = ToolCassette(file="echo.ndjson", include=["echo"], filters=[{"regex": "sk-[a-z0-9]+"}],
                           allow_redacted_replay=True)
    task = f'/mock run echo({{"text": "{CANARY}"}})'
    assert run(task, cwd=tmp_path, rows=_tools(), tool_cassette=allowed, record_mode="once").ok
    strict = ToolCassette(file="echo.ndjson", include=["echo"], filters=[{"regex": "sk-[a-z0-9]+"}])
    replay = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=strict, record_mode="none")
    assert not replay.ok
    assert replay.errors[0].code == "CASSETTE_REDACTED_REPLAY"
    assert "echo at root/0, ordinal 0: the recorded outcome holds a redacted value" in replay.errors[0].message
    assert tool_bodies(tmp_path) == ["echo"]


def test_replay_with_other_filters_is_refused_by_name(tmp_path: Path) -> None:
    task = '/mock run echo({"text": "hi"})'
    recorded = ToolCassette(file="echo.ndjson", include=["echo"], filters=["credentials"])
    assert run(task, cwd=tmp_path, rows=_tools(), tool_cassette=recorded, record_mode="once").ok
    other = ToolCassette(file="echo.ndjson", include=["echo"])
    replay = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=other, record_mode="none")
    assert replay.exit_code == 1
    assert replay.stderr.splitlines()[:2] == [
        "dsh-sidecar: CASSETTE_RULES_DIFFER: toolCassette.filters differs from the filters recorded in echo.ndjson: "
        "the recording has filters, this replay declares none",
        "dsh-sidecar: fix: declare the rules the cassette was recorded with (dsh-tool-cassette inspect shows "
        "them), or re-record",
    ]


def test_an_ignored_pointer_may_change_and_any_other_argument_is_a_named_mismatch(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"], ignore={"echo": ["/tags"]})
    recorded = run('/mock run echo({"text": "a", "tags": ["req-1"]})', cwd=tmp_path, rows=_tools(),
                   tool_cassette=cassette, record_mode="once")
    assert recorded.ok, recorded.explain()
    assert '"match":{"echo":{"ignore":["/tags"]}}' in (tmp_path / "echo.ndjson").read_text()
    served = run('/mock run echo({"text": "a", "tags": ["req-2"]})', cwd=tmp_path, rows=_tools(),
                 tool_cassette=cassette, record_mode="none")
    assert served.ok, served.explain()
    assert served.result("echo").value == {"text": "a", "tags": ["req-1"]}
    other = run('/mock run echo({"text": "b", "tags": ["req-1"]})', cwd=tmp_path, rows=_tools(),
                tool_cassette=cassette, record_mode="none")
    assert not other.ok
    assert other.errors[0].code == "CASSETTE_MISMATCH"
    assert other.errors[0].message.endswith(": changed /text")
    unruled = run('/mock run echo({"text": "a", "tags": ["req-2"]})', cwd=tmp_path, rows=_tools(),
                  tool_cassette=ToolCassette(file="echo.ndjson", include=["echo"]), record_mode="none")
    assert ("CASSETTE_RULES_DIFFER: toolCassette.match differs from the match recorded in echo.ndjson: the "
            "recording ignores /tags of echo, this replay does not") in unruled.stderr
    assert tool_bodies(tmp_path) == ["echo"]


def test_an_injected_timeout_on_the_second_call_stops_the_plan_and_is_named_injected(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    record = run(script=SCRIPT_TWO_CALLS, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="once")
    assert record.ok, record.explain()
    faulty = ToolCassette(file="echo.ndjson", include=["echo"], faults={"name": "slow-echo", "rules": [
        {"tool": "echo", "ordinal": 1, "code": "TIMEOUT", "message": "echo timed out after 30s"}]})
    replay = run(script=SCRIPT_TWO_CALLS, cwd=tmp_path, rows=_tools(), tool_cassette=faulty, record_mode="none")
    second = replay.results("echo")[1]
    assert second.is_error
    assert second.error_code == "TIMEOUT"
    assert second.output == "Error: [injected by fault overlay slow-echo] TIMEOUT: echo timed out after 30s"
    # The plan stops at the failed call as it would after a real timeout: the third never runs.
    assert len(replay.tool_calls) == 2
    assert replay.mock[-1].state == "failed"
    assert replay.tool_cassette is not None
    assert (replay.tool_cassette.faults, replay.tool_cassette.injected) == ("slow-echo", 1)
    # The run fails with the injected failure alone: the record it left unused is no error.
    assert (replay.exit_code, replay.errors) == (1, [])
    assert "failed at step 2 with runtime code TIMEOUT" in replay.stderr
    assert ("tool cassette replay: 2 selected calls, 2 consumed, 1 unconsumed, poisoned: no, 1 failed by fault "
            "overlay slow-echo") in replay.stderr
    assert tool_bodies(tmp_path) == ["echo", "echo", "echo"]


def test_a_hand_edited_cassette_is_refused_until_resealed_then_verifies_and_replays(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    assert run('/mock run echo({"text": "hi"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette,
               record_mode="once").ok
    file = tmp_path / "echo.ndjson"
    file.write_text(file.read_text().replace('"value":{"text":"hi"}', '"value":{"text":"edited"}'))
    refused = run('/mock run echo({"text": "hi"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette)
    assert "CASSETTE_INVALID: line 5 call/result ordinal 0: hash does not match the frame" in refused.stderr
    sealed = subprocess.run([str(TOOL_CASSETTE_CLI), "reseal", str(file)], capture_output=True, text=True)
    assert sealed.returncode == 0, sealed.stderr
    assert sealed.stdout.startswith("resealed: 1 calls, 7 frames, 3 lines rewritten; the file is now yours")
    verified = subprocess.run([str(TOOL_CASSETTE_CLI), "verify", str(file)], capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout
    replay = run('/mock run echo({"text": "hi"})', cwd=tmp_path, rows=_tools(), tool_cassette=cassette)
    assert replay.ok, replay.explain()
    assert replay.result("echo").value == {"text": "edited"}
    assert tool_bodies(tmp_path) == ["echo"]


def test_a_stubbed_tool_runs_no_body_and_its_calls_are_in_the_result(tmp_path: Path) -> None:
    result = run('/mock run weather_lookup({"city": "Oslo"})', cwd=tmp_path, rows=_tools(),
                 stubs={"weather_lookup": stub_weather.sunny})
    assert result.ok, result.explain()
    assert [(c.tool, c.arguments) for c in result.calls("weather_lookup")] == [("weather_lookup", {"city": "Oslo"})]
    assert result.result("weather_lookup").output == "Oslo: stubbed sun, 5C"
    assert "stubs: 1 calls served (weather_lookup: 1)" in result.stderr
    assert tool_bodies(tmp_path) == []


def test_a_stub_serves_a_named_failure_and_dsh_revalidates_its_value(tmp_path: Path) -> None:
    failed = run('/mock run weather_lookup({"city": "Oslo"})', cwd=tmp_path, rows=_tools(),
                 stubs={"weather_lookup": stub_weather.timeout})
    outcome = failed.result("weather_lookup")
    assert (outcome.is_error, outcome.error_code) == (True, "TIMEOUT")
    assert outcome.output == "Error: weather for Oslo timed out"
    rejected = run('/mock run weather_lookup({"city": "Oslo"})', cwd=tmp_path, rows=_tools(),
                   stubs={"weather_lookup": stub_weather.wrong_shape})
    assert rejected.result("weather_lookup").error_code == "INVALID_TOOL_OUTPUT"
    assert tool_bodies(tmp_path) == []


def test_a_stub_that_raises_fails_the_run_by_name_and_keeps_the_recording_unpublished(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    script = {"type": "dsh-mock-script", "version": 1, "steps": [
        {"tool": "echo", "args": {"text": "a"}}, {"tool": "weather_lookup", "args": {"city": "Oslo"}}]}
    # A reference resolves against the run's cwd: file.py:function here.
    (tmp_path / "doubles.py").write_text("def broken(args):\n    raise KeyError('secret-key-name')\n")
    result = run(script=script, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="once",
                 stubs={"weather_lookup": "doubles.py:broken"})
    assert result.exit_code == 1
    assert result.errors[0].code == "STUB_RAISED"
    assert result.errors[0].message == (
        "stub of weather_lookup at root/1 raised KeyError; fix the stub, or raise StubFailure(code, message) "
        "for a tool failure")
    assert "secret-key-name" not in result.stderr
    assert result.tool_cassette is not None and not result.tool_cassette.published
    assert not (tmp_path / "echo.ndjson").exists()


def test_plain_dsh_takes_the_rules_from_the_row_config(make_dsh: Callable[..., Dsh]) -> None:
    row = {"mode": "record", "file": "c.ndjson", "include": ["echo"], "filters": [{"key": "text", "in": "args"}],
           "match": {"echo": {"ignore": ["/tags"]}}}
    recorder = make_dsh(sidecar={"toolCassette": row})
    assert recorder.run('/mock run echo({"text": "hunter2", "tags": ["a"]})').rc == 0
    text = (recorder.cwd / "c.ndjson").read_text()
    assert '"args":{"tags":["a"],"text":"[redacted]"}' in text
    replayer = Dsh(cwd=recorder.cwd, sidecar={"toolCassette": {**row, "mode": "replay"}})
    replayed = replayer.run('/mock run echo({"text": "hunter2", "tags": ["b"]})')
    assert replayed.rc == 0, replayed.stderr
    assert replayed.bodies() == ["echo"]


def test_cli_run_takes_the_rules_from_a_config_file(tmp_path: Path) -> None:
    (tmp_path / "doubles.py").write_text("def sunny(args):\n    return {'city': args['city'], 'forecast': 'fog', "
                                         "'temperatureC': 9}\n")
    (tmp_path / "logic.json").write_text(json.dumps({"stubs": {"weather_lookup": "doubles.py:sunny"}}))
    patch = tmp_path / "tools.patch.yml"
    patch.write_text(f"- {json.dumps({'id': 'example-tools', 'name': 'dsh-example-tools', 'disabled': False})}\n")
    ran = subprocess.run([str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "run", "--config", "logic.json", "--patch",
                          str(patch), "--json", "--trace", "out/t.html", "--",
                          '/mock run weather_lookup({"city": "Bergen"})'],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    result = msgspec.json.decode(ran.stdout, type=RunResult)
    assert result.result("weather_lookup").output == "Bergen: fog, 9C"
    # --trace: the page and its JSON, the stubbed call's source named
    assert result.trace == str(tmp_path / "out" / "t.html")
    (call,) = json.loads((tmp_path / "out" / "t.json").read_text())["runs"][0]["calls"]
    assert (call["tool"], call["source"], call["output"]) == ("weather_lookup", "stub", "Bergen: fog, 9C")
    assert tool_bodies(tmp_path) == []
    bad = subprocess.run([str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "run", "--config", "logic.json", "--config",
                          str(patch), "--", "x"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--config: not a readable JSON file" in bad.stderr


def test_a_delay_fault_serves_the_record_late_and_is_counted(tmp_path: Path) -> None:
    cassette = ToolCassette(file="echo.ndjson", include=["echo"])
    task = '/mock run echo({"text": "hi"})'
    assert run(task, cwd=tmp_path, rows=_tools(), tool_cassette=cassette, record_mode="once").ok
    delayed = ToolCassette(file="echo.ndjson", include=["echo"],
                           faults={"name": "lag", "rules": [{"ordinal": 0, "delayMs": 1500}]})
    replay = run(task, cwd=tmp_path, rows=_tools(), tool_cassette=delayed)
    assert replay.ok, replay.explain()
    assert replay.result("echo").output == "echo:hi"
    assert replay.tool_cassette is not None and (replay.tool_cassette.injected, replay.tool_cassette.consumed) == (1, 1)
    assert replay.duration_ms >= 1500  # a lower bound the delay guarantees, not a synchronization


def test_a_stub_that_cannot_be_imported_stops_dsh_at_boot_by_name(tmp_path: Path) -> None:
    (tmp_path / "doubles.py").write_text("raise RuntimeError('import-time secret')\n")
    result = run('/mock run weather_lookup({"city": "Oslo"})', cwd=tmp_path, rows=_tools(),
                 stubs={"weather_lookup": "doubles.py:sunny"})
    assert result.exit_code == 1
    assert ("STUB_UNRESOLVED: stubs.weather_lookup: importing its module raised RuntimeError; give module:function "
            "(importable from the DSH cwd) or file.py:function (relative to the DSH cwd)") in result.stderr
    assert "import-time secret" not in result.stderr
    assert result.tool_calls == [] and tool_bodies(tmp_path) == []
