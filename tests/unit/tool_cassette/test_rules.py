"""Filters, matching rules, the fault overlay and reseal, through the engine and the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.tool_cassette.config import parse_config
from dsh_sidecar.python_core.tool_cassette.engine import ExecuteEvent, Refuse, ReplaySession, Serve, ToolCassetteSession
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid, RulesDiffer
from dsh_sidecar.python_core.tool_cassette.filters import PLACEHOLDER, Filters, parse_filters
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
                                   "regex, preset"),
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
    assert str(caught.value) == "CASSETTE_RULES_DIFFER: toolCassette.match differs from the match recorded in c.ndjson"


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
        content=[{"type": "text", "text": f"token {secret}"}])
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
