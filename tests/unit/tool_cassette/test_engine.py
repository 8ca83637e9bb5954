"""Record and replay state machines: identities, poison, pairing, cancellation, closure."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.tool_cassette import (
    ExecuteEvent,
    Passthrough,
    PostEvent,
    Refuse,
    ResultEvent,
    Serve,
    ToolCassetteSession,
)
from dsh_sidecar.python_core.tool_cassette.engine import RecordSession, ReplaySession, ToolContract
from dsh_sidecar.python_core.tool_cassette.errors import (
    CassetteExists,
    CassetteInvalid,
    CassetteIOError,
    IllegalEvent,
    IncludeDiffers,
)
from dsh_sidecar.python_core.tool_cassette.format import encode
from dsh_sidecar.python_core.tool_cassette.reseal import reseal_lines

ARGS = b'{"city":"Wuhan","unit":"c"}'


def execute(session: ToolCassetteSession, handle: str, path: str = "root/0",
            tool: str = "weather_lookup", args: bytes = ARGS) -> Any:
    return session.on_execute(ExecuteEvent(handle, path, tool, args))


def post(session: ToolCassetteSession, handle: str, result: Any, path: str = "root/0",
         tool: str = "weather_lookup") -> Any:
    return session.on_post_execute(PostEvent(handle, path, tool, result))


def finish(session: ToolCassetteSession, handle: str, result: Any, path: str = "root/0",
           tool: str = "weather_lookup") -> None:
    session.on_result(ResultEvent(handle, path, tool, result))


def messages(report: Any) -> list[str]:
    return [str(error) for error in report.errors]


def reseal_as_version(lines: list[bytes], version: int) -> bytes:
    """The cassette ``lines`` as a file of an older ``version`` wrote it (no rendered successes)."""
    frames = [msgspec.json.decode(line) for line in lines]
    for frame in frames:
        if frame["kind"] == "header":
            frame["version"] = version
        if frame["kind"] == "call/result" and not frame["isError"]:
            frame.pop("content", None)
            frame.pop("meta", None)
    resealed, _ = reseal_lines([encode(frame) + b"\n" for frame in frames])
    return b"".join(resealed)


@pytest.fixture
def recorded(make_cassette: Any, kit: Any) -> Path:
    return make_cassette([kit.Call(args=ARGS, outcome=kit.ok())])


@pytest.fixture
def replay(recorded: Path, make_config: Any) -> ToolCassetteSession:
    return ToolCassetteSession.open(make_config("replay"))


def test_record_passes_through_and_publishes_on_close(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    assert execute(session, "h") == Passthrough(ordinal=0, describe=True)
    assert post(session, "h", kit.ok()) is None
    finish(session, "h", kit.ok())
    report = session.close()
    assert report.errors == () and report.published
    assert os.path.exists(session.config.file)
    assert not os.path.exists(session.config.file + ".partial")
    assert report.stats.recorded == 1


def test_replay_hit_serves_the_value_with_its_recorded_rendering(replay: ToolCassetteSession) -> None:
    # A registered tool re-renders the value (DSH drops this content); a stand-in serves it.
    # Both go out as the host sent them when recorded: its member and key order.
    served = execute(replay, "h")
    assert isinstance(served, Serve)
    assert bytes(served.result) == (
        b'{"isError":false,"value":{"temp":21.5},'
        b'"content":[{"type":"text","text":"rendered"}]}'
    )
    assert bytes(served.additionalContexts) == b"[]"
    assert served.cancellation is None
    assert replay.statistics().consumed == 1


def test_replay_hit_ignores_object_key_order(replay: ToolCassetteSession) -> None:
    assert isinstance(execute(replay, "h", args=b'{"unit":"c","city":"Wuhan"}'), Serve)


def test_replay_mismatch_on_array_order_names_the_args_fingerprints(
    make_cassette: Any, make_config: Any, kit: Any
) -> None:
    make_cassette([kit.Call(args=b'{"days":[1,2]}')])
    session = ToolCassetteSession.open(make_config("replay"))
    decision = execute(session, "h", args=b'{"days":[2,1]}')
    assert isinstance(decision, Refuse)
    assert str(decision.error) == (
        "CASSETTE_MISMATCH: weather_lookup at root/0, ordinal 0: "
        "args sha256:e7c5cb64990b… differ from recorded sha256:6dc752f94525…: "
        "changed /days/0, changed /days/1"
    )


def test_replay_mismatch_names_pointers_added_removed_and_changed_never_values(
    make_cassette: Any, make_config: Any, kit: Any
) -> None:
    make_cassette([kit.Call(args=b'{"a":{"b":"s3cret-old","c":1},"list":[1,2,3],"z":0}')])
    session = ToolCassetteSession.open(make_config("replay"))
    decision = execute(
        session, "h", args=b'{"a":{"b":"s3cret-new","d":1},"list":[1],"n/k~":true,"z":0}'
    )
    assert isinstance(decision, Refuse)
    message = str(decision.error)
    assert message.endswith(
        ": changed /a/b, removed /a/c, added /a/d, removed /list/1, removed /list/2, and 1 more"
    )
    assert "s3cret" not in message
    assert decision.error.hint == (
        "if the new calls are intended, re-record: delete w.tool-cassette.jsonl and run the same "
        'task with toolCassette.mode: record (run API and pytest: record_mode "all")'
    )


def test_replay_errors_that_a_re_recording_fixes_share_one_hint(
    replay: ToolCassetteSession, kit: Any
) -> None:
    execute(replay, "a", path="root/9")
    execute(replay, "b", path="root/10")
    errors = replay.close().errors
    assert [e.code for e in errors] == ["CASSETTE_MISMATCH", "CASSETTE_UNCONSUMED"]
    assert errors[0].hint and errors[0].hint == errors[1].hint


def test_replay_mismatch_on_path_names_the_recorded_path(replay: ToolCassetteSession) -> None:
    decision = execute(replay, "h", path="root/0/0")
    assert str(decision.error) == (
        "CASSETTE_MISMATCH: weather_lookup at root/0/0, ordinal 0: "
        "path differs from recorded root/0"
    )


def test_replay_mismatch_on_tool_name(replay: ToolCassetteSession) -> None:
    decision = execute(replay, "h", tool="weather_forecast")
    assert decision.error.field == "tool"
    assert decision.error.code == "CASSETTE_MISMATCH"


def test_replay_poisons_after_first_mismatch(replay: ToolCassetteSession) -> None:
    execute(replay, "a", args=b"{}")
    decision = execute(replay, "b")
    assert str(decision.error) == (
        "CASSETTE_POISONED: weather_lookup at root/0: replay poisoned by an earlier "
        "CASSETTE_MISMATCH; the tool body was not run"
    )
    stats = replay.statistics()
    assert (stats.poisoned, stats.consumed, stats.refused) == (True, 0, 2)
    assert [error.code for error in replay.close().errors] == [
        "CASSETTE_MISMATCH", "CASSETTE_UNCONSUMED"
    ]


def test_refused_calls_after_poison_still_count_as_selected(replay: ToolCassetteSession) -> None:
    execute(replay, "a", args=b"{}")
    execute(replay, "b")

    stats = replay.statistics()

    assert (stats.selected, stats.started) == (2, 1)


def test_replay_close_lists_the_first_mismatch_then_unconsumed(
    replay: ToolCassetteSession,
) -> None:
    execute(replay, "a", path="root/9")
    assert messages(replay.close()) == [
        "CASSETTE_MISMATCH: weather_lookup at root/9, ordinal 0: path differs from recorded "
        "root/0",
        "CASSETTE_UNCONSUMED: 1 recorded calls not consumed, first weather_lookup at root/0, "
        "ordinal 0",
    ]


def test_extra_call_is_refused_and_poisons(replay: ToolCassetteSession, kit: Any) -> None:
    execute(replay, "a")
    post(replay, "a", kit.ok())
    finish(replay, "a", kit.ok())
    decision = execute(replay, "b", path="root/1")
    assert str(decision.error) == (
        "CASSETTE_EXTRA_CALL: weather_lookup at root/1, ordinal 1: extra call, "
        "the cassette holds 1 calls"
    )
    assert replay.close().stats.poisoned


def test_unconsumed_records_fail_close(replay: ToolCassetteSession) -> None:
    assert messages(replay.close()) == [
        "CASSETTE_UNCONSUMED: 1 recorded calls not consumed, first weather_lookup at root/0, "
        "ordinal 0"
    ]


def test_fully_consumed_replay_closes_clean(replay: ToolCassetteSession, kit: Any) -> None:
    execute(replay, "a")
    post(replay, "a", kit.ok())
    finish(replay, "a", kit.ok())
    report = replay.close()
    assert report.errors == ()
    assert (report.stats.consumed, report.stats.unconsumed) == (1, 0)


@pytest.mark.parametrize("posted", [False, True])
def test_a_served_call_whose_result_never_came_fails_the_replay(
    replay: ToolCassetteSession, kit: Any, posted: bool
) -> None:
    # Every record consumed, but the run ended before the host's final tools/result for it
    # (disposed mid-call): the trajectory was not replayed to its end.
    execute(replay, "a")
    if posted:
        post(replay, "a", kit.ok())
    report = replay.close()
    assert messages(report) == [
        "CASSETTE_SHORT_CIRCUITED: weather_lookup at root/0, ordinal 0: "
        "served, but never reached tools/result"
    ]
    assert report.stats.poisoned and report.stats.pending == 1


def test_concurrent_calls_complete_in_reverse_order(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    first, second = kit.ok(b'"A"'), kit.ok(b'"B"')
    assert execute(session, "a", "root/0") == Passthrough(0, describe=True)
    assert execute(session, "b", "root/1") == Passthrough(1)
    post(session, "b", second, "root/1")
    finish(session, "b", second, "root/1")
    post(session, "a", first, "root/0")
    finish(session, "a", first, "root/0")
    assert session.close().errors == ()
    replay = ToolCassetteSession.open(make_config("replay"))
    served_a = execute(replay, "x", "root/0")
    served_b = execute(replay, "y", "root/1")
    assert b'"value":"A"' in bytes(served_a.result)
    assert b'"value":"B"' in bytes(served_b.result)
    for handle, path, result in (("y", "root/1", second), ("x", "root/0", first)):
        assert post(replay, handle, result, path) is None
        finish(replay, handle, result, path)
    assert replay.close().errors == ()


def test_a_value_with_unsorted_keys_replays_in_its_recorded_order_and_is_compared_canonically(
    make_config: Any, kit: Any
) -> None:
    # The host's text of a JSON-rendered value: keys out of order, nested, non-ASCII, numbers as printed.
    value = '{"zeta":"last","alpha":{"nested":{"b":2,"a":1}},"price":1.5,"big":1000,"text":"h\u00e9llo \u2600"}'
    host = msgspec.json.encode(msgspec.json.decode(value))  # the same text with the characters unescaped
    session = ToolCassetteSession.open(make_config("record"))
    execute(session, "a")
    outcome = kit.ok(host, contexts=[{"role": "user", "content": [], "source": {"kind": "user"}}])
    post(session, "a", outcome)
    finish(session, "a", outcome)
    assert session.close().published
    line = Path(make_config("record").file).read_bytes().splitlines()[-2]
    assert b'"value":' + host in line  # stored as sent; the frame's own members stay sorted
    replay = ToolCassetteSession.open(make_config("replay"))
    served = execute(replay, "a")
    assert bytes(served.result).startswith(b'{"isError":false,"value":' + host + b',"content":')
    assert bytes(served.additionalContexts) == b'[{"role":"user","content":[],"source":{"kind":"user"}}]'
    # The host may hand the served value back in another key order: still the recorded outcome.
    sorted_back = msgspec.structs.replace(outcome, value=msgspec.Raw(msgspec.json.encode(
        msgspec.json.decode(host), order="sorted")))
    assert post(replay, "a", sorted_back) is None
    finish(replay, "a", sorted_back)
    assert replay.close().errors == ()


def test_failures_and_contexts_replay_verbatim(
    make_cassette: Any, make_config: Any, kit: Any
) -> None:
    make_cassette()
    session = ToolCassetteSession.open(make_config("replay"))
    execute(session, "a", "root/0", args=kit.DEFAULT_CALLS[0].args)
    failure = execute(session, "b", "root/1", args=b'{"city":"Wuhan"}')
    assert bytes(failure.result) == (
        b'{"isError":true,"error":{"message":"disk on fire","info":{"name":"HarnessError","code":"E_FIRE"}},'
        b'"content":[{"type":"text","text":"Error: disk on fire"}]}'
    )
    read = execute(session, "c", "root/2", "mcp_fs_read", b'["a",1]')
    assert bytes(read.additionalContexts) == b'[{"id":"m1","role":"user","content":[]}]'


def test_post_phase_cancellation_is_recorded_and_served(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    execute(session, "a")
    post(session, "a", kit.ok())
    finish(session, "a", kit.abort("ABORTED"))
    assert session.close().errors == ()
    replay = ToolCassetteSession.open(make_config("replay"))
    served = execute(replay, "a")
    assert bytes(served.cancellation) == (
        b'{"isError":true,"error":{"message":"tool call aborted","info":{"name":"AbortError","code":"ABORTED"}},'
        b'"content":[{"type":"text","text":"Error: tool call aborted"}]}'
    )
    assert post(replay, "a", kit.abort("ABORTED")) is None
    finish(replay, "a", kit.abort("ABORTED"))
    assert replay.close().errors == ()


def test_hit_cancelled_in_post_phase_stays_consumed(replay: ToolCassetteSession, kit: Any) -> None:
    execute(replay, "a")
    assert post(replay, "a", kit.abort("ABORTED_BEFORE_DISPATCH")) is None
    finish(replay, "a", kit.abort("ABORTED_BEFORE_DISPATCH"))
    report = replay.close()
    assert report.errors == () and report.stats.consumed == 1


def test_pre_call_cancellation_consumes_nothing_and_is_not_an_error(
    replay: ToolCassetteSession, kit: Any
) -> None:
    finish(replay, "early", kit.abort("ABORTED_BEFORE_DISPATCH"))
    assert replay.statistics().cancelled_before_dispatch == 1
    assert isinstance(execute(replay, "a"), Serve)


def test_pre_call_cancellation_while_recording_is_not_recorded(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    finish(session, "early", kit.abort("ABORTED_BEFORE_DISPATCH"))
    report = session.close()
    assert report.errors == () and report.stats.started == 0


def test_concludes_turn_fails_closed_and_blocks_publishing(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    execute(session, "a")
    concluding = msgspec.structs.replace(kit.ok(), concludesTurn=True)
    decision = post(session, "a", concluding)
    assert str(decision.error) == (
        "CASSETTE_CONCLUDES_TURN: weather_lookup at root/0, ordinal 0: "
        "concludesTurn is not supported by cassette V1"
    )
    assert decision.error.hint == (
        "leave weather_lookup out of toolCassette.include: cassette V1 cannot replay a call that "
        "concludes the turn"
    )
    finish(session, "a", concluding)
    report = session.close()
    assert messages(report)[-1] == (
        "CASSETTE_RECORDING_INCOMPLETE: not published: recording failed with "
        "CASSETTE_CONCLUDES_TURN; kept w.tool-cassette.jsonl.partial"
    )
    assert not os.path.exists(session.config.file)
    assert os.path.exists(session.config.file + ".partial")


def test_a_selected_call_inside_a_selected_call_fails_the_recording(make_config: Any, kit: Any) -> None:
    # Replay would serve the composite and never start its children: such a cassette could
    # never replay, so recording it fails at the first nested call.
    session = ToolCassetteSession.open(make_config("record", include=("weather_*", "mcp_*")))
    assert execute(session, "outer", "root/0", "mcp_fs_batch") == Passthrough(0, describe=True)
    assert execute(session, "sibling", "root/1") == Passthrough(1, describe=True)
    decision = execute(session, "inner", "root/0/0/1")
    assert str(decision.error) == (
        "CASSETTE_NESTED_SELECTION: weather_lookup at root/0/0/1: started inside the selected "
        "call mcp_fs_batch at root/0, ordinal 0; cassette V1 cannot select a composite tool "
        "and its child tools together"
    )
    assert decision.error.hint == (
        "select either the composite tool or its child tools in toolCassette.include, not both"
    )
    for handle, path, tool in (("inner", "root/0/0/1", "weather_lookup"),
                               ("outer", "root/0", "mcp_fs_batch"), ("sibling", "root/1", "weather_lookup")):
        post(session, handle, kit.ok(), path, tool)
        finish(session, handle, kit.ok(), path, tool)
    report = session.close()
    assert [error.code for error in report.errors] == [
        "CASSETTE_NESTED_SELECTION", "CASSETTE_RECORDING_INCOMPLETE"
    ]
    assert not os.path.exists(session.config.file)


def test_a_selected_call_after_its_selected_parent_finished_is_not_nested(
    make_config: Any, kit: Any
) -> None:
    session = ToolCassetteSession.open(make_config("record", include=("weather_*",)))
    assert execute(session, "a", "root/0") == Passthrough(0, describe=True)
    post(session, "a", kit.ok())
    finish(session, "a", kit.ok())
    # A name that merely starts like an open call's path is not inside it.
    assert execute(session, "b", "root/1") == Passthrough(1)
    assert execute(session, "c", "root/10/0") == Passthrough(2)
    assert execute(session, "d", "root/0/0") == Passthrough(3)


def test_unfinished_call_keeps_the_partial(make_config: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    execute(session, "a")
    report = session.close()
    assert messages(report) == [
        "CASSETTE_RECORDING_INCOMPLETE: not published: 1 calls unfinished; "
        "kept w.tool-cassette.jsonl.partial"
    ]
    assert os.path.exists(session.config.file + ".partial")


def test_denied_call_reaching_post_execute_invalidates_the_recording(
    make_config: Any, kit: Any
) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    denial = kit.fail("denied by policy", code=None)
    decision = post(session, "a", denial)
    assert str(decision.error) == (
        "CASSETTE_SHORT_CIRCUITED: weather_lookup at root/0: "
        "reached tools/post-execute without passing tools/execute"
    )
    assert decision.error.hint == (
        "weather_lookup never reached the cassette's tools/execute wrapper (denied by a pre-execute "
        "policy or guard, refused by the host, or answered by another plugin first): allow that call "
        "in this run, or leave weather_lookup out of toolCassette.include"
    )
    finish(session, "a", denial)
    assert not session.close().published


def test_call_bypassing_execute_poisons_the_replay(replay: ToolCassetteSession, kit: Any) -> None:
    assert isinstance(post(replay, "a", kit.ok()), Refuse)
    assert execute(replay, "b").error.code == "CASSETTE_POISONED"
    assert replay.statistics().poisoned


def test_result_seen_only_at_tools_result_poisons_unless_cancelled(
    replay: ToolCassetteSession, kit: Any
) -> None:
    finish(replay, "a", kit.ok(b'"from another plugin"'))
    report = replay.close()
    assert messages(report)[0] == (
        "CASSETTE_SHORT_CIRCUITED: weather_lookup at root/0: "
        "reached tools/result without passing tools/execute"
    )
    assert report.errors[0].hint.startswith("weather_lookup never reached the cassette's tools/execute wrapper")


def test_served_outcome_replaced_before_post_execute_poisons(
    replay: ToolCassetteSession, kit: Any
) -> None:
    execute(replay, "a")
    decision = post(replay, "a", kit.ok(b'"replaced by an outer wrapper"'))
    assert str(decision.error) == (
        "CASSETTE_SHORT_CIRCUITED: weather_lookup at root/0, ordinal 0: "
        "tools/post-execute saw another outcome than the one served"
    )


def test_value_rejected_by_current_schema_poisons(replay: ToolCassetteSession, kit: Any) -> None:
    execute(replay, "a")
    finish(replay, "a", kit.fail("value.temp must be an integer", code="INVALID_TOOL_OUTPUT"))
    report = replay.close()
    assert messages(report) == [
        "CASSETTE_VALUE_REJECTED: weather_lookup at root/0, ordinal 0: replayed value "
        "rejected with INVALID_TOOL_OUTPUT"
    ]
    assert report.errors[0].hint == (
        "the current output schema, renderer or presentation meta of weather_lookup rejects the "
        "recorded value: make the tool accept it again, or re-record the cassette"
    )


def test_a_tool_not_registered_during_replay_is_named_as_such(
    replay: ToolCassetteSession, kit: Any
) -> None:
    # rc.8 resolves the tool to validate and render a served value; with no definition it
    # fails the call with UNKNOWN_TOOL and skips post-execute.
    execute(replay, "a")
    finish(replay, "a", kit.fail('unknown tool "weather_lookup"', code="UNKNOWN_TOOL"))
    report = replay.close()
    assert messages(report) == [
        "CASSETTE_TOOL_UNREGISTERED: weather_lookup at root/0, ordinal 0: not registered during "
        "replay: no plugin registered it, and the cassette holds no definition of it (none was "
        "registered when it was recorded)"
    ]
    assert report.errors[0].hint == (
        "enable the plugin row that registers weather_lookup for the replay, or re-record the cassette "
        "with this version: it keeps each selected tool's definition, so a replay needs no server"
    )


def test_an_unregistered_mcp_tool_of_an_old_file_names_its_server(make_cassette: Any, make_config: Any,
                                                                  kit: Any, tmp_path: Path) -> None:
    make_cassette([kit.Call(tool="mcp__notes__read_note", args=ARGS)], include=("mcp__notes__*",))
    lines = Path(make_config("replay").file).read_bytes().splitlines()
    path = tmp_path / "old.jsonl"
    path.write_bytes(reseal_as_version(lines, 2))
    session = ToolCassetteSession.open(make_config("replay", file=str(path), include=("mcp__notes__*",)))
    execute(session, "a", tool="mcp__notes__read_note")
    finish(session, "a", kit.fail('unknown tool "mcp__notes__read_note"', code="UNKNOWN_TOOL"),
           tool="mcp__notes__read_note")
    error = session.close().errors[0]
    assert str(error) == (
        "CASSETTE_TOOL_UNREGISTERED: mcp__notes__read_note at root/0, ordinal 0: not registered during "
        "replay: its MCP server notes did not start, and the cassette (version 2) holds no definition "
        "to stand it up"
    )
    assert error.hint.startswith("start MCP server notes for the replay, or re-record the cassette")


def test_a_stand_in_the_registry_refused_is_named_with_its_reason(replay: ToolCassetteSession, kit: Any) -> None:
    assert isinstance(replay, ReplaySession)
    replay.standin_errors = {"weather_lookup": "schema unsupported"}
    execute(replay, "a")
    finish(replay, "a", kit.fail('unknown tool "weather_lookup"', code="UNKNOWN_TOOL"))
    error = replay.close().errors[0]
    assert "and its stand-in from the cassette failed to register (schema unsupported)" in str(error)


def test_record_asks_each_tool_for_its_definition_once_and_writes_it_once(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    contract = ToolContract(description="Weather.", parameters=msgspec.Raw(b'{"type":"object"}'),
                            output=msgspec.Raw(b'{"type": "object"}'), timeoutMs=5000)
    for n in range(2):
        decision = execute(session, f"h{n}", f"root/{n}")
        assert decision == Passthrough(n, describe=n == 0)
        session.on_post_execute(PostEvent(f"h{n}", f"root/{n}", "weather_lookup", kit.ok(), definition=contract))
        finish(session, f"h{n}", kit.ok(), f"root/{n}")
    assert session.close().errors == ()
    frames = [msgspec.json.decode(line) for line in Path(session.config.file).read_bytes().splitlines()]
    assert [f["kind"] for f in frames] == [
        "header", "call/start", "tool", "call/result", "call/start", "call/result", "complete"]
    assert frames[2] | {"hash": "", "prev": ""} == {
        "kind": "tool", "seq": 2, "tool": "weather_lookup", "description": "Weather.",
        "parameters": {"type": "object"}, "output": {"type": "object"}, "timeoutMs": 5000,
        "hash": "", "prev": ""}
    assert frames[3]["content"] == [{"text": "rendered", "type": "text"}]
    replay = ToolCassetteSession.open(make_config("replay"))
    assert isinstance(replay, ReplaySession)
    assert list(replay.definitions) == ["weather_lookup"]
    # Kept as the shim sent it (version 4): the stand-in offers the model the same text.
    assert bytes(replay.definitions["weather_lookup"].output) == b'{"type": "object"}'


def test_a_replayed_success_rendered_otherwise_now_is_still_the_recorded_outcome(
    replay: ToolCassetteSession, kit: Any
) -> None:
    # The live renderer of a registered tool may have changed: only the value is compared.
    execute(replay, "h")
    restyled = msgspec.structs.replace(kit.ok(), content=msgspec.Raw(b'[{"type":"text","text":"new look"}]'))
    assert post(replay, "h", restyled) is None
    finish(replay, "h", restyled)
    assert replay.statistics().poisoned is False


def test_record_refuses_to_start_over_an_existing_file(recorded: Path, make_config: Any) -> None:
    with pytest.raises(CassetteExists, match=r"w\.tool-cassette\.jsonl already exists"):
        ToolCassetteSession.open(make_config("record"))


def test_record_refuses_to_start_over_a_partial(make_config: Any, tmp_path: Path) -> None:
    (tmp_path / "w.tool-cassette.jsonl.partial").write_bytes(b"")
    with pytest.raises(CassetteExists) as info:
        ToolCassetteSession.open(make_config("record"))
    assert str(info.value) == (
        "CASSETTE_EXISTS: w.tool-cassette.jsonl.partial already exists; recording never overwrites"
    )


def test_replay_refuses_an_invalid_cassette_before_activation(
    recorded: Path, make_config: Any
) -> None:
    recorded.write_bytes(recorded.read_bytes()[:-1])
    with pytest.raises(CassetteInvalid, match="line 4: truncated line"):
        ToolCassetteSession.open(make_config("replay"))


def test_replay_refuses_other_include_patterns(recorded: Path, make_config: Any) -> None:
    with pytest.raises(IncludeDiffers):
        ToolCassetteSession.open(make_config("replay", include=["weather_*"]))


def test_replay_accepts_the_recorded_patterns_in_another_order(recorded: Path, make_config: Any) -> None:
    # A call is selected when any pattern matches it: the order of the patterns selects nothing.
    session = ToolCassetteSession.open(make_config("replay", include=["mcp_*_read", "weather_*"]))
    assert isinstance(execute(session, "a"), Serve)


def test_replay_never_modifies_the_cassette(recorded: Path, make_config: Any, kit: Any) -> None:
    before = (recorded.read_bytes(), recorded.stat().st_mtime_ns)
    session = ToolCassetteSession.open(make_config("replay"))
    execute(session, "a", args=b"[]")
    session.close()
    assert (recorded.read_bytes(), recorded.stat().st_mtime_ns) == before


def test_illegal_event_raises_and_changes_nothing(replay: ToolCassetteSession, kit: Any) -> None:
    execute(replay, "a")
    before = replay.statistics()
    with pytest.raises(IllegalEvent, match="on_execute for a call in phase executed"):
        execute(replay, "a")
    post(replay, "a", kit.ok())
    with pytest.raises(IllegalEvent, match="on_post_execute for a call in phase posted"):
        post(replay, "a", kit.ok())
    assert replay.statistics() == before


def test_unselected_tool_events_are_illegal(replay: ToolCassetteSession) -> None:
    with pytest.raises(IllegalEvent, match="on_execute for an unselected tool"):
        execute(replay, "a", tool="bash")


def test_every_event_after_close_is_illegal(replay: ToolCassetteSession, kit: Any) -> None:
    replay.close()
    with pytest.raises(IllegalEvent) as info:
        replay.close()
    assert str(info.value) == "CASSETTE_ILLEGAL_EVENT: close is illegal in state closed"
    with pytest.raises(IllegalEvent):
        execute(replay, "a")


def test_unreadable_arguments_are_refused_without_echo(make_config: Any, kit: Any) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    key = kit.SECRET.encode()
    decision = execute(session, "a", args=b'{"' + key + b'":1,"' + key + b'":2}')
    assert str(decision.error) == (
        "CASSETTE_ARGS_UNREADABLE: weather_lookup at root/0: arguments unreadable "
        "(duplicate object key)"
    )


def test_errors_never_contain_raw_arguments_values_or_the_tmp_path(
    make_cassette: Any, make_config: Any, kit: Any, tmp_path: Path
) -> None:
    make_cassette()
    session = ToolCassetteSession.open(make_config("replay"))
    texts = [str(execute(session, "a", args=b'{"city":"' + kit.SECRET.encode() + b'x"}').error)]
    texts.append(str(execute(session, "b").error))
    texts.append(str(post(session, "c", kit.ok(b'"' + kit.SECRET.encode() + b'"')).error))
    texts.extend(messages(session.close()))
    for text in texts:
        assert kit.SECRET not in text
        assert str(tmp_path) not in text


def test_an_interrupted_recording_keeps_its_partial_even_with_no_call_pending(
    make_config: Any, kit: Any,
) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    kit.drive(session, [kit.Call()])

    report = session.close("turn 1 did not end")

    assert not report.published
    assert messages(report) == [
        "RECORDING_INTERRUPTED: tool cassette w.tool-cassette.jsonl: turn 1 did not end; "
        "not published, kept w.tool-cassette.jsonl.partial"
    ]
    assert not os.path.exists(session.config.file)
    assert os.path.exists(session.config.file + ".partial")


def test_an_interruption_changes_nothing_in_a_replay(replay: ToolCassetteSession, kit: Any) -> None:
    kit.drive(replay, [kit.Call(args=ARGS, outcome=kit.ok())])
    assert replay.close("turn 1 did not end").errors == ()


@pytest.mark.parametrize(("mode", "file", "message", "hint"), [
    ("replay", "absent.jsonl", "cannot read absent.jsonl: no such file",
     "record it first: run the same task once with toolCassette.mode: record, then replay; or fix the path"),
    ("replay", "d", "cannot read d: is a directory",
     "name a file inside it (toolCassette.file: d/<name>) or fix the path"),
    ("record", "a-file/c.jsonl", "cannot create the directory of c.jsonl: a directory in its path is a file",
     "point toolCassette.file at a file in a writable directory"),
])
def test_a_file_that_cannot_be_opened_names_the_field_and_the_fix(
    make_config: Any, tmp_path: Path, mode: str, file: str, message: str, hint: str,
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(CassetteIOError) as info:
        ToolCassetteSession.open(make_config(mode, file))
    assert str(info.value) == f"CASSETTE_IO: toolCassette.file: {message}"
    assert info.value.hint == hint
    assert str(tmp_path) not in str(info.value) + info.value.hint


def test_deferred_recording_hands_over_its_lines_and_a_lost_one_refuses_its_call(
    make_config: Any, kit: Any
) -> None:
    session = ToolCassetteSession.open(make_config("record"), deferred=True)
    partial = session.config.file + ".partial"
    assert execute(session, "h") == Passthrough(ordinal=0, describe=True)
    assert Path(partial).read_bytes().count(b"\n") == 1  # the header only: nothing written since
    start = session.take_writes()
    assert [msgspec.json.decode(line)["kind"] for line in start] == ["call/start"]
    lost = CassetteIOError("write", "w.tool-cassette.jsonl.partial", "ENOSPC")
    refused = session.write_failed("h", lost)
    assert isinstance(refused, Refuse) and refused.error is lost
    assert session.statistics().state == "failed" and session.statistics().pending == 0


def test_a_recording_that_selected_no_call_is_refused_and_leaves_no_file(make_config: Any, tmp_path: Path) -> None:
    session = ToolCassetteSession.open(make_config("record"))
    report = session.close()

    assert not report.published
    assert [e.code for e in report.errors] == ["CASSETTE_NOTHING_SELECTED"]
    assert "toolCassette.include: weather_*, mcp_*_read" in str(report.errors[0])
    assert "mcp__<server>__<tool>" in report.errors[0].hint
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # Nothing left behind, so recording again is not refused as CASSETTE_EXISTS.
    assert ToolCassetteSession.open(make_config("record")).close().errors[0].code == "CASSETTE_NOTHING_SELECTED"


def test_a_tool_registered_without_a_description_is_recorded_with_an_empty_one(make_config: Any) -> None:
    # ToolSchema's description is optional in practice: the registry report must still decode.
    contract = msgspec.json.decode(b'{"parameters":{"type":"object"},"output":{"type":"object"}}', type=ToolContract)
    session = ToolCassetteSession.open(make_config("record"))
    assert isinstance(session, RecordSession)
    session.define("weather_lookup", contract)
    [frame] = [msgspec.json.decode(line) for line in Path(session.config.file + ".partial").read_bytes().splitlines()
               if b'"kind":"tool"' in line]
    assert frame["description"] == ""
