"""Filters, matching rules, the fault overlay and reseal, through the engine and the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.filters import PLACEHOLDER, Filters, parse_filters, rules_digest
from dsh_sidecar.python_core.tool_cassette.config import parse_config
from dsh_sidecar.python_core.tool_cassette.engine import (
    ExecuteEvent,
    PostEvent,
    Refuse,
    ReplaySession,
    Serve,
    ToolCassetteSession,
)
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid, FilterRaised, FilterUnresolved, RulesDiffer
from dsh_sidecar.python_core.tool_cassette.reseal import reseal_file, reseal_lines
from dsh_sidecar.python_core.tool_cassette.store import load, verify_file


def _config(tmp_path: Path, mode: str = "record", **keys: Any) -> Any:
    raw = {"mode": mode, "file": "c.ndjson", "include": ["weather_*", "mcp_*_read"], **keys}
    return parse_config(raw, cwd=str(tmp_path))


def _record(tmp_path: Path, kit: Any, **keys: Any) -> Path:
    session = ToolCassetteSession.open(_config(tmp_path, **keys))
    kit.drive(session, kit.DEFAULT_CALLS)
    assert session.close().errors == ()
    return tmp_path / "c.ndjson"


def test_credentials_preset_replaces_secret_keys_at_any_depth() -> None:
    filters = Filters(parse_filters(["credentials"]))
    value = {"headers": {"Authorization": "Bearer x", "X-Api-Key": "k"}, "db_password": "p", "city": "Paris",
             "items": [{"refresh_token": "t"}]}
    assert filters.apply(value, tool="t", where="args") == {
        "headers": {"Authorization": PLACEHOLDER, "X-Api-Key": PLACEHOLDER}, "db_password": PLACEHOLDER,
        "city": "Paris", "items": [{"refresh_token": PLACEHOLDER}],
    }


def test_pointer_and_regex_filters_respect_tool_and_direction() -> None:
    filters = Filters(parse_filters([{"pointer": "/a/0", "tool": "x"}, {"regex": "s3cr[e]t", "in": "result"}]))
    assert filters.apply({"a": ["1", "2"]}, tool="x", where="args") == {"a": [PLACEHOLDER, "2"]}
    assert filters.apply({"a": ["1"]}, tool="y", where="args") == {"a": ["1"]}
    assert filters.apply(["my s3cret"], tool="y", where="args") == ["my s3cret"]
    assert filters.apply(["my s3cret"], tool="y", where="result") == [f"my {PLACEHOLDER}"]


@pytest.mark.parametrize(("raw", "message"), [
    ("x", "INVALID_CONFIG: toolCassette.filters: must be a list"),
    (["tokens"], 'INVALID_CONFIG: toolCassette.filters[0]: must be "credentials" or an object'),
    ([{"key": "a", "regex": "b"}], "INVALID_CONFIG: toolCassette.filters[0]: must name exactly one of key, pointer, "
                                   "regex, call, preset"),
    ([{"call": "scrub"}], "INVALID_CONFIG: toolCassette.filters[0].call: must be a string module:function or "
                          "file.py:function"),
    ([{"call": "a b:f"}], "INVALID_CONFIG: toolCassette.filters[0].call: module must be a dotted module name or a "
                          "path ending in .py"),
    ([{"regex": "("}], "INVALID_CONFIG: toolCassette.filters[0].regex: is not a valid regular expression"),
    ([{"regex": "a*"}], "INVALID_CONFIG: toolCassette.filters[0].regex: must not match the empty string"),
    ([{"pointer": "a"}], "INVALID_CONFIG: toolCassette.filters[0].pointer: must be a JSON pointer below the root, "
                         "as /a/0"),
    ([{"key": "**"}], "INVALID_CONFIG: toolCassette.filters[0].key: must hold more than '*'"),
])
def test_bad_filters_are_refused_by_field(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_filters(raw)
    assert str(caught.value) == message


def _scrub(value: Any) -> Any:
    """A filter function: the city of a weather call becomes its length."""
    if isinstance(value, dict) and "city" in value:
        return {**value, "city": f"<{len(value['city'])} chars>"}
    return value


def _with(tmp_path: Path, mode: str, function: Any, **keys: Any) -> Any:
    config = _config(tmp_path, mode, filters=[{"call": "scrubs:scrub", "in": "args"}], **keys)
    return msgspec.structs.replace(config, functions={"scrubs:scrub": function})


def test_a_filter_function_gets_the_decoded_value_and_its_return_is_recorded_and_matched(
    tmp_path: Path, kit: Any,
) -> None:
    session = ToolCassetteSession.open(_with(tmp_path, "record", _scrub))
    kit.drive(session, kit.DEFAULT_CALLS)
    assert session.close().errors == ()
    text = (tmp_path / "c.ndjson").read_bytes()
    assert b'"args":{"city":"<14 chars>","unit":"c"}' in text
    assert kit.SECRET.encode() in text  # in: args only: the result keeps it, and replays unrefused
    replay = ToolCassetteSession.open(_with(tmp_path, "replay", _scrub))
    same_length = b'{"city":"' + b"x" * 14 + b'","unit":"c"}'
    assert isinstance(replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", same_length)), Serve)


def test_a_filter_function_counts_by_its_identity_not_its_location() -> None:
    here = parse_filters([{"call": "tests/helpers/scrubs.py:scrub"}])
    assert rules_digest(here) == rules_digest(parse_filters([{"call": "/elsewhere/scrubs.py:scrub"}]))
    assert rules_digest(here) == rules_digest(parse_filters([{"call": "helpers.scrubs:scrub"}]))
    assert rules_digest(here) != rules_digest(parse_filters([{"call": "scrubs:other"}]))
    assert rules_digest(parse_filters(["credentials"])) == rules_digest(parse_filters([{"preset": "credentials"}]))


def test_a_filter_that_raises_refuses_the_call_and_fails_the_recording(tmp_path: Path, kit: Any) -> None:
    def broken(value: Any) -> Any:
        raise KeyError(kit.SECRET)

    session = ToolCassetteSession.open(_with(tmp_path, "record", broken))
    refused = session.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", kit.DEFAULT_CALLS[0].args))
    assert isinstance(refused, Refuse)
    assert str(refused.error) == (
        "FILTER_RAISED: toolCassette.filters[0] (scrubs:scrub) raised KeyError on the arguments of weather_lookup; "
        "the call was refused and nothing it was given reached the file; fix the filter"
    )
    report = session.close()
    assert report.errors[0].code == "FILTER_RAISED"
    assert not report.published and not (tmp_path / "c.ndjson").exists()
    assert kit.SECRET.encode() not in (tmp_path / "c.ndjson.partial").read_bytes()


def test_a_filter_on_the_outcome_that_returns_no_json_fails_the_call_named(tmp_path: Path, kit: Any) -> None:
    config = _config(tmp_path, filters=[{"call": "scrubs:scrub", "in": "result"}])
    session = ToolCassetteSession.open(msgspec.structs.replace(config, functions={"scrubs:scrub": lambda v: {1, 2}}))
    call = kit.DEFAULT_CALLS[0]
    assert not isinstance(session.on_execute(ExecuteEvent("h0", call.path, call.tool, call.args)), Refuse)
    refused = session.on_post_execute(PostEvent("h0", call.path, call.tool, call.outcome))
    assert isinstance(refused, Refuse)
    assert str(refused.error).startswith("FILTER_RAISED: toolCassette.filters[0] (scrubs:scrub) returned a value "
                                         "with no canonical JSON form (set is not a JSON value) on the outcome of "
                                         "weather_lookup;")


def test_a_replay_filter_that_raises_refuses_the_call(tmp_path: Path, kit: Any) -> None:
    session = ToolCassetteSession.open(_with(tmp_path, "record", _scrub))
    kit.drive(session, kit.DEFAULT_CALLS)
    assert session.close().errors == ()
    replay = ToolCassetteSession.open(_with(tmp_path, "replay", lambda value: 1 / 0))
    refused = replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", kit.DEFAULT_CALLS[0].args))
    assert isinstance(refused, Refuse) and refused.error.code == "FILTER_RAISED"
    assert "raised ZeroDivisionError on the arguments" in str(refused.error)


def test_a_call_filter_without_its_imported_function_is_refused_at_open(tmp_path: Path) -> None:
    with pytest.raises(FilterUnresolved) as caught:
        ToolCassetteSession.open(_config(tmp_path, filters=["credentials", {"call": "scrubs:scrub"}]))
    assert str(caught.value).startswith("FILTER_UNRESOLVED: toolCassette.filters[1].call: was not imported in this "
                                        "process; give module:function")
    assert not (tmp_path / "c.ndjson.partial").exists()


def test_filter_raised_names_no_value() -> None:
    error = FilterRaised(2, "m:f", "t", "result", "raised ValueError")
    assert str(error).startswith("FILTER_RAISED: toolCassette.filters[2] (m:f) raised ValueError on the outcome of t;")


def test_the_secret_is_not_in_the_file_and_replay_matches_the_same_call(tmp_path: Path, kit: Any) -> None:
    file = _record(tmp_path, kit, filters=[{"regex": kit.SECRET}], allowRedactedReplay=True)
    assert kit.SECRET.encode() not in file.read_bytes()
    replay = ToolCassetteSession.open(_config(tmp_path, "replay", filters=[{"regex": kit.SECRET}],
                                              allowRedactedReplay=True))
    served = replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", kit.DEFAULT_CALLS[0].args))
    assert isinstance(served, Serve)
    assert PLACEHOLDER.encode() in bytes(served.result)


def test_replay_refuses_a_redacted_outcome_unless_allowed(tmp_path: Path, kit: Any) -> None:
    _record(tmp_path, kit, filters=[{"regex": kit.SECRET}])
    replay = ToolCassetteSession.open(_config(tmp_path, "replay", filters=[{"regex": kit.SECRET}]))
    refused = replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", kit.DEFAULT_CALLS[0].args))
    assert isinstance(refused, Refuse)
    assert refused.error.code == "CASSETTE_REDACTED_REPLAY"


def test_replay_with_other_rules_is_refused_by_name(tmp_path: Path, kit: Any) -> None:
    _record(tmp_path, kit, match={"weather_lookup": {"ignore": ["/unit"]}})
    with pytest.raises(RulesDiffer) as caught:
        ToolCassetteSession.open(_config(tmp_path, "replay"))
    assert str(caught.value) == ("CASSETTE_RULES_DIFFER: toolCassette.match differs from the match recorded in "
                                 "c.ndjson: the recording ignores /unit of weather_lookup, this replay does not")


def test_a_replay_with_other_rules_names_the_rule_that_differs_never_a_value(tmp_path: Path, kit: Any) -> None:
    _record(tmp_path, kit, match={"weather_lookup": {"ignore": ["/unit"]}}, filters=[{"regex": kit.SECRET}],
            allowRedactedReplay=True)
    declared = {"weather_lookup": {"ignore": ["/city", "/unit/0"]}}
    with pytest.raises(RulesDiffer) as caught:
        ToolCassetteSession.open(_config(tmp_path, "replay", match=declared, filters=[{"regex": kit.SECRET}],
                                         allowRedactedReplay=True))
    assert caught.value.rule == ("the recording ignores /unit of weather_lookup, this replay does not "
                                 "(and 2 more differences)")
    for filters, rule in (([], "the recording has filters, this replay declares none"),
                          (["credentials", {"regex": "x+"}], "this replay declares 2 filter rule(s), whose "
                           "fingerprint is not the recording's (it stores only that fingerprint, so which rule "
                           "differs cannot be told)")):
        with pytest.raises(RulesDiffer) as caught:
            ToolCassetteSession.open(_config(tmp_path, "replay", filters=filters, allowRedactedReplay=True))
        assert caught.value.rule == rule
        assert kit.SECRET not in str(caught.value)


def test_an_ignored_pointer_may_differ_and_others_are_named(tmp_path: Path, kit: Any) -> None:
    rules = {"weather_lookup": {"ignore": ["/unit"]}}
    _record(tmp_path, kit, match=rules)
    replay = ToolCassetteSession.open(_config(tmp_path, "replay", match=rules))
    changed = kit.DEFAULT_CALLS[0].args.replace(b'"c"', b'"f"')
    assert isinstance(replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", changed)), Serve)
    other = ToolCassetteSession.open(_config(tmp_path, "replay", match=rules))
    refused = other.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", b'{"city":"Rome","unit":"c"}'))
    assert isinstance(refused, Refuse)
    assert str(refused.error).endswith(": changed /city")


def test_a_fault_replaces_the_outcome_of_the_selected_call_only(tmp_path: Path, kit: Any) -> None:
    _record(tmp_path, kit)
    faults = {"name": "net", "rules": [{"ordinal": 1, "code": "TIMEOUT", "message": "slow"}]}
    replay = ToolCassetteSession.open(_config(tmp_path, "replay", faults=faults))
    first = replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", kit.DEFAULT_CALLS[0].args))
    second = replay.on_execute(ExecuteEvent("h1", "root/1", "weather_lookup", kit.DEFAULT_CALLS[1].args))
    assert isinstance(first, Serve) and b"injected" not in bytes(first.result)
    assert isinstance(second, Serve)
    assert b'"message":"[injected by fault overlay net] TIMEOUT: slow"' in bytes(second.result)
    assert (replay.statistics().injected, replay.statistics().faults) == (1, "net")


def test_faults_are_refused_in_record_mode(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, faults={"name": "n", "rules": [{"tool": "t", "code": "TIMEOUT", "message": "m"}]})
    assert "toolCassette.faults: applies to replay only" in str(caught.value)


def test_reseal_after_a_hand_edit_gives_a_valid_cassette_with_the_edit(tmp_path: Path, kit: Any) -> None:
    file = _record(tmp_path, kit)
    file.write_bytes(file.read_bytes().replace(b'"temp":21.5', b'"temp":22.5'))
    assert verify_file(str(file)).error is not None
    report = reseal_file(str(file))
    assert verify_file(str(file)).error is None
    assert (report.calls, report.changed) == (3, report.frames - 2)
    assert b'"temp":22.5' in bytes(load(str(file)).calls[0].result.value)  # type: ignore[arg-type]


def test_reseal_recomputes_the_args_digest_and_refuses_non_canonical_lines(tmp_path: Path, kit: Any) -> None:
    file = _record(tmp_path, kit)
    file.write_bytes(file.read_bytes().replace(b'"city":"Wuhan"', b'"city":"Lyon"'))
    reseal_file(str(file))
    assert bytes(load(str(file)).calls[1].args) == b'{"city":"Lyon"}'
    before = file.read_bytes()
    file.write_bytes(before.replace(b'{"city":"Lyon"}', b'{"city": "Lyon"}'))
    with pytest.raises(CassetteInvalid) as caught:
        reseal_file(str(file))
    assert str(caught.value).startswith("CASSETTE_INVALID: line 4: not canonical JSON")


def test_reseal_refuses_what_verification_refuses(kit: Any) -> None:
    with pytest.raises(CassetteInvalid):
        reseal_lines([b'{"calls":0,"hash":"x","kind":"complete","prev":"x","seq":0}\n'])


def test_result_filters_cover_contexts_and_failure_content(tmp_path: Path, kit: Any) -> None:
    calls = [kit.Call(outcome=kit.ok(b'{"t":1}', contexts=[{"id": "m", "role": "user", "content": [kit.SECRET]}])),
             kit.Call(path="root/1", args=b'{"city":"x"}', outcome=kit.fail(message=f"bad {kit.SECRET}"))]
    session = ToolCassetteSession.open(_config(tmp_path, filters=[{"regex": kit.SECRET, "in": "result"}]))
    kit.drive(session, calls)
    assert session.close().errors == ()
    text = (tmp_path / "c.ndjson").read_bytes()
    # Arguments are left alone (in: result); contexts, the failure's message and content are not.
    assert text.count(kit.SECRET.encode()) == 1  # the call/start args of the first call


def test_a_success_whose_value_a_filter_changed_keeps_no_rendering(tmp_path: Path, kit: Any) -> None:
    # A key filter never sees inside the rendered text, which may spell the secret: the
    # rendering is left out, and a stand-in shows the redacted value's JSON instead.
    secret = kit.SECRET
    outcome = msgspec.structs.replace(
        kit.ok(b'{"api_token":"' + secret.encode() + b'","temp":1}'),
        content=msgspec.Raw(msgspec.json.encode([{"type": "text", "text": f"token {secret}"}])))
    call = kit.Call(args=b'{"city":"Paris"}', outcome=outcome)
    session = ToolCassetteSession.open(_config(tmp_path, filters=["credentials"], allowRedactedReplay=True))
    kit.drive(session, [call])
    assert session.close().errors == ()
    data = (tmp_path / "c.ndjson").read_bytes()
    assert secret.encode() not in data
    [result] = [msgspec.json.decode(line) for line in data.splitlines() if b'"call/result"' in line]
    assert "content" not in result and result["value"] == {"api_token": PLACEHOLDER, "temp": 1}

    replay = ToolCassetteSession.open(_config(tmp_path, "replay", filters=["credentials"], allowRedactedReplay=True))
    assert isinstance(replay, ReplaySession)
    replay.stood_up = frozenset({"weather_lookup"})
    served = replay.on_execute(ExecuteEvent("h0", "root/0", "weather_lookup", b'{"city":"Paris"}'))
    assert isinstance(served, Serve)
    assert msgspec.json.decode(served.result)["content"] == [
        {"type": "text", "text": '{"api_token":"[redacted]","temp":1}'}]


def test_an_unredacted_success_keeps_its_rendering(tmp_path: Path, kit: Any) -> None:
    _record(tmp_path, kit, filters=["credentials"])
    results = [msgspec.json.decode(line) for line in (tmp_path / "c.ndjson").read_bytes().splitlines()
               if b'"call/result"' in line]
    assert results[0]["content"] == [{"type": "text", "text": "rendered"}]


# --- volatile result fields: normalize, and filters that would break the output schema (issue 29 item 7)

_EXEC_SCHEMA = (b'{"type":"object","additionalProperties":false,"required":["output","wall_time_seconds"],'
                b'"properties":{"output":{"type":"string"},"wall_time_seconds":{"type":"number"},'
                b'"chunk":{"type":"string","enum":["a","b"]}}}')


def _exec_call(kit: Any, seconds: float, ordinal: int = 0) -> Any:
    outcome = msgspec.structs.replace(
        kit.ok(b'{"output":"hello\\n","wall_time_seconds":' + str(seconds).encode() + b"}"),
        content=msgspec.Raw(b'[{"type":"text","text":"hello\\n"}]'))
    return kit.Call(tool="weather_exec", path=f"root/{ordinal}", args=b'{"cmd":"echo hello"}', outcome=outcome)


def _record_exec(tmp_path: Path, kit: Any, seconds: float, filters: list[Any], file: str = "c.ndjson") -> Any:
    from dsh_sidecar.python_core.tool_cassette.engine import RecordSession, ToolContract
    contract = ToolContract(parameters=msgspec.Raw(b'{"type":"object"}'), output=msgspec.Raw(_EXEC_SCHEMA))
    session = ToolCassetteSession.open(_config(tmp_path, filters=filters, file=file))
    assert isinstance(session, RecordSession)
    session.define("weather_exec", contract)
    kit.drive(session, [_exec_call(kit, seconds)])
    return session.close()


def test_normalize_replaces_with_the_fixed_value_in_every_filter_kind() -> None:
    filters = Filters(parse_filters([{"pointer": "/took", "normalize": 0}, {"key": "chunk_id", "normalize": "c0"},
                                     {"regex": "took [0-9.]+s", "normalize": "took 0s", "in": "result"}]))
    value = {"took": 0.53, "parts": [{"chunk_id": "x9"}], "text": "done, took 0.53s"}
    assert filters.apply(value, tool="t", where="result") == {
        "took": 0, "parts": [{"chunk_id": "c0"}], "text": "done, took 0s"}
    assert not filters.hides(value, tool="t", where="result")
    assert Filters(parse_filters([{"pointer": "/took"}])).hides(value, tool="t", where="result")


@pytest.mark.parametrize(("raw", "message"), [
    ([{"preset": "credentials", "normalize": 0}], "INVALID_CONFIG: toolCassette.filters[0].normalize: goes with key, "
     "pointer or regex (a call filter returns its own replacement)"),
    ([{"call": "m:f", "normalize": 0}], "INVALID_CONFIG: toolCassette.filters[0].normalize: goes with key, pointer "
     "or regex (a call filter returns its own replacement)"),
    ([{"regex": "x", "normalize": 0}], "INVALID_CONFIG: toolCassette.filters[0].normalize: must be a string with "
     "regex (it replaces matched text)"),
    ([{"pointer": "/a", "normalize": 2**60}], "INVALID_CONFIG: toolCassette.filters[0].normalize: has no canonical "
     "JSON form (integer outside +-(2^53-1))"),
])
def test_a_bad_normalize_is_refused_by_field(raw: object, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_filters(raw)
    assert str(caught.value) == message


def test_normalize_changes_the_rules_fingerprint() -> None:
    plain = rules_digest(parse_filters([{"pointer": "/a", "in": "result"}]))
    assert rules_digest(parse_filters([{"pointer": "/a", "in": "result", "normalize": 0}])) != plain
    assert rules_digest(parse_filters([{"pointer": "/a", "in": "result", "normalize": 1}])) != plain


def test_a_normalized_volatile_field_keeps_recordings_equal_and_replays_valid(tmp_path: Path, kit: Any) -> None:
    from dsh_sidecar.python_core.tool_cassette.diff import diff_cassettes
    rule = [{"pointer": "/wall_time_seconds", "in": "result", "normalize": 0}]
    assert _record_exec(tmp_path, kit, 0.53, rule, file="a.ndjson").errors == ()
    assert _record_exec(tmp_path, kit, 1.25, rule, file="b.ndjson").errors == ()
    assert (tmp_path / "a.ndjson").read_bytes() == (tmp_path / "b.ndjson").read_bytes()
    assert diff_cassettes(load(str(tmp_path / "a.ndjson")), load(str(tmp_path / "b.ndjson"))).equivalent
    [result] = [msgspec.json.decode(line) for line in (tmp_path / "a.ndjson").read_bytes().splitlines()
                if b'"call/result"' in line]
    # The value is valid for its schema, and the rendering the model saw is kept (it hides nothing).
    assert result["value"] == {"output": "hello\n", "wall_time_seconds": 0}
    assert result["content"] == [{"type": "text", "text": "hello\n"}]
    replay = ToolCassetteSession.open(_config(tmp_path, "replay", filters=rule, file="a.ndjson"))
    assert isinstance(replay, ReplaySession)
    replay.stood_up = frozenset({"weather_exec"})  # no allowRedactedReplay needed: nothing is a placeholder
    served = replay.on_execute(ExecuteEvent("h0", "root/0", "weather_exec", b'{"cmd":"echo hello"}'))
    assert isinstance(served, Serve)
    assert msgspec.json.decode(served.result)["content"] == [{"type": "text", "text": "hello\n"}]


@pytest.mark.parametrize(("rule", "message", "fix"), [
    ({"pointer": "/wall_time_seconds", "in": "result"},
     "FILTER_BREAKS_SCHEMA: toolCassette.filters[0]: /wall_time_seconds of tool weather_exec at root/0, ordinal 0 "
     "would become a string where its output schema wants a number; the call was refused and the recording is not "
     "published", 'give toolCassette.filters[0] "normalize": 0 (a fixed number'),
    ({"pointer": "/wall_time_seconds", "in": "result", "normalize": "0s"},
     "FILTER_BREAKS_SCHEMA: toolCassette.filters[0]: /wall_time_seconds of tool weather_exec at root/0, ordinal 0 "
     "would become a string where its output schema wants a number", "normalize"),
    ({"key": "wall_time_seconds", "normalize": None},
     "FILTER_BREAKS_SCHEMA: toolCassette.filters[0]: /wall_time_seconds of tool weather_exec at root/0, ordinal 0 "
     "would become null where its output schema wants a number", "normalize"),
    ({"regex": "hello", "in": "result"}, None, None),  # a string stays a string: valid, recorded
])
def test_a_filter_that_would_break_the_output_schema_is_refused_when_recording(
    tmp_path: Path, kit: Any, rule: dict[str, Any], message: str | None, fix: str | None,
) -> None:
    report = _record_exec(tmp_path, kit, 0.53, [rule])
    if message is None:
        assert report.errors == () and report.published
        return
    [error] = [e for e in report.errors if e.code == "FILTER_BREAKS_SCHEMA"]
    assert str(error).startswith(message)
    assert fix is not None and fix in error.hint
    assert "0.53" not in str(error) + error.hint and "hello" not in str(error)
    assert not report.published and not (tmp_path / "c.ndjson").exists()


def test_the_value_as_filtered_is_judged_and_the_rule_that_left_it_invalid_is_named(
    tmp_path: Path, kit: Any,
) -> None:
    # A later normalize makes the value valid again: recorded.
    rules = [{"pointer": "/output", "in": "result"}, {"key": "wall_time_seconds", "in": "result"},
             {"pointer": "/wall_time_seconds", "in": "result", "normalize": 0}]
    assert _record_exec(tmp_path, kit, 0.5, rules, file="ok.ndjson").errors == ()
    # The last rule that changed the offending part is the one named.
    rules = [{"pointer": "/wall_time_seconds", "in": "result", "normalize": 0}, {"pointer": "/output", "in": "result"},
             {"key": "wall_time_seconds", "in": "result"}]
    report = _record_exec(tmp_path, kit, 0.5, rules)
    [error] = [e for e in report.errors if e.code == "FILTER_BREAKS_SCHEMA"]
    assert str(error).startswith("FILTER_BREAKS_SCHEMA: toolCassette.filters[2]: /wall_time_seconds")


def test_the_output_schema_subset_is_judged_as_rc8_does() -> None:
    from dsh_sidecar.python_core.tool_cassette.output_schema import first_violation
    schema = msgspec.json.decode(_EXEC_SCHEMA)
    assert first_violation(schema, {"output": "", "wall_time_seconds": 1}) is None
    assert first_violation(schema, {"output": "", "wall_time_seconds": True}).pointer == "/wall_time_seconds"
    assert first_violation(schema, {"output": ""}).wants == "a member there (required)"
    assert first_violation(schema, {"output": "", "wall_time_seconds": 1, "x": 1}).pointer == "/x"
    assert first_violation(schema, {"output": "", "wall_time_seconds": 1, "chunk": "c"}).wants == \
        "one of its enum values"
    assert first_violation({"type": "integer"}, 2.0) is None and first_violation({"type": "integer"}, 2.5) is not None
    one_of = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert first_violation(one_of, 1.5) is None and first_violation(one_of, 1) is not None  # 1 matches both
    assert first_violation({"type": "array", "items": {"type": "string"}}, ["a", 1]).pointer == "/1"
    assert first_violation({"description": "any"}, {"x": [1]}) is None
