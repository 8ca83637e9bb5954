"""A session log's calls of selected tools as an imported tool cassette (docs/import.md, "Tools").

The cassette is checked by the tool cassette's own reader and replayed by its own engine: the
calls are served in order at their structural paths, with the content the log shows as their
value, and a changed argument fails closed as a recorded cassette does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from msgspec import UNSET

from dsh_sidecar.bridge.api.cli import main as sidecar
from dsh_sidecar.bridge.transport.protocol import StandIn
from dsh_sidecar.python_core.cassette_io import Chain
from dsh_sidecar.python_core.filters import parse_filters
from dsh_sidecar.python_core.session_import import ImportPrivate, ImportUnfaithful, tool_lines, write_tool_lines
from dsh_sidecar.python_core.session_log import read_session_log
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig
from dsh_sidecar.python_core.tool_cassette.engine import ExecuteEvent, ReplaySession, Serve
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid, CassetteMismatch
from dsh_sidecar.python_core.tool_cassette.format import decode_frame
from dsh_sidecar.python_core.tool_cassette.host_state import relocated
from dsh_sidecar.python_core.tool_cassette.store import check_lines, load, verify_file

DATA = Path(__file__).parent / "data"
CWD = "/srv/example/project"
WEATHER = {"name": "weather_lookup", "description": "Weather of a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
READ = {"name": "read", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}}


def _result(call_id: str, text: str, *, error: dict[str, str] | None = None, meta: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"turn": 1, "step": 1, "message": {
        "source": {"kind": "tool", "callId": call_id}, "role": "user", "id": f"r-{call_id}", "content": [
            {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}],
             "isError": error is not None}]}}
    if error is not None:
        data["error"] = error
    if meta is not None:
        data["meta"] = meta
    return {"type": "tool/result", "seq": 0, "time": 1, "data": data, "surfaceOp": "append"}


def _call(call_id: str, tool: str, arguments: str) -> dict[str, Any]:
    return {"type": "tool/call", "seq": 0, "time": 1,
            "data": {"turn": 1, "step": 1, "callId": call_id, "name": tool, "arguments": arguments}}


def _log(*events: dict[str, Any]) -> list[dict[str, Any]]:
    """A session header and the request header offering the two tools, then ``events``."""
    return [
        {"type": "session", "version": 0, "id": "session-1", "createdAt": 1, "cwd": CWD, "delegationDepth": 0},
        {"type": "request/header", "seq": 1, "time": 1, "data": {"header": {
            "config": {"provider": "deepseek-official", "model": "m"}, "system": "s", "tools": [READ, WEATHER]}}},
        *events,
    ]


def _weather_log() -> list[dict[str, Any]]:
    return _log(_call("c1", "read", '{"path": "a.txt"}'), _result("c1", "alpha"),
                _call("c2", "weather_lookup", '{"city": "Paris"}'), _result("c2", "Paris: sunny"))


def _replay(tmp_path: Path, lines: list[bytes], include: tuple[str, ...] = ("weather_lookup",)) -> ReplaySession:
    path = tmp_path / "imported.tools.ndjson"
    write_tool_lines(str(path), lines)
    return ReplaySession.start(ToolCassetteConfig(mode="replay", file=str(path), include=include))


def _execute(tool: str, path: str, args: str, handle: str = "h1") -> ExecuteEvent:
    return ExecuteEvent(handle=handle, path=path, tool=tool, args_json=args.encode())


def test_a_selected_call_is_served_at_its_path_with_the_shown_content_as_its_value(tmp_path: Path) -> None:
    session = _replay(tmp_path, tool_lines(_weather_log(), ["weather_*"], cwd=CWD), ("weather_*",))

    assert session.imported and set(session.definitions) == {"weather_lookup"}
    contract = session.definitions["weather_lookup"]
    assert json.loads(bytes(contract.parameters)) == WEATHER["parameters"]  # the model-facing schema, verbatim
    served = session.on_execute(_execute("weather_lookup", "root/1", '{"city":"Paris"}'))
    assert isinstance(served, Serve)
    body = json.loads(bytes(served.result))
    shown = [{"type": "text", "text": "Paris: sunny"}]
    assert body == {"isError": False, "value": shown, "content": shown}
    assert session.statistics().consumed == 1


def test_a_changed_argument_or_path_fails_closed(tmp_path: Path) -> None:
    lines = tool_lines(_weather_log(), ["weather_lookup"], cwd=CWD)

    other = _replay(tmp_path, lines).on_execute(_execute("weather_lookup", "root/1", '{"city":"Rome"}'))
    assert not isinstance(other, Serve) and isinstance(other.error, CassetteMismatch)
    (tmp_path / "imported.tools.ndjson").unlink()
    moved = _replay(tmp_path, lines).on_execute(_execute("weather_lookup", "root/0", '{"city":"Paris"}'))
    assert not isinstance(moved, Serve) and "path" in str(moved.error)


def test_the_parallel_calls_of_a_real_log_take_their_paths_in_call_order(tmp_path: Path) -> None:
    events = read_session_log(DATA / "parallel.session.jsonl.zstd")
    session = _replay(tmp_path, tool_lines(events, ["weather_lookup"], cwd=str(events[0]["cwd"])))

    for n, city in enumerate(("Paris", "Rome")):
        served = session.on_execute(_execute("weather_lookup", f"root/{n}", json.dumps({"city": city}), f"h{n}"))
        assert isinstance(served, Serve)
        assert json.loads(bytes(served.result))["value"][0]["text"] == f"{city}: sunny, 21C"


def test_a_failure_keeps_its_name_code_content_and_meta() -> None:
    events = _log(_call("c1", "weather_lookup", '{"city": "Oslo"}'),
                  _result("c1", "Error: service down", error={"name": "HarnessError", "code": "E_DOWN"},
                          meta={"tries": 2}))
    lines = tool_lines(events, ["weather_lookup"], cwd=CWD)
    result = json.loads(lines[3])

    assert (result["isError"], result["error"], result["content"][0]["text"], result["meta"]) == (
        True, {"message": "service down", "info": {"name": "HarnessError", "code": "E_DOWN"}},
        "Error: service down", {"tries": 2})
    assert json.loads(lines[1])["presentationMeta"] is True


def test_the_session_folder_becomes_the_replay_s_and_a_bare_one_is_refused(tmp_path: Path) -> None:
    events = _log(_call("c1", "read", '{"path": "a.txt"}'),
                  _result("c1", f"{CWD}/a.txt: alpha", meta={"p": f"{CWD}/a"}))
    lines = tool_lines(events, ["read"], cwd=CWD)
    assert CWD.encode() not in b"".join(lines)
    session = _replay(tmp_path, lines, ("read",))

    moved = relocated(session._records[0].result, "/srv/ci/checkout")
    assert json.loads(bytes(moved.content))[0]["text"] == "/srv/ci/checkout/a.txt: alpha"
    assert json.loads(bytes(moved.meta)) == {"p": "/srv/ci/checkout/a"}
    failed = _log(_call("c1", "read", "{}"), _result("c1", f"Error: {CWD}/a.txt: not found",
                                                       error={"name": "HarnessError", "code": "FS_NOT_FOUND"}))
    assert CWD.encode() not in b"".join(tool_lines(failed, ["read"], cwd=CWD))  # its message too
    bare = _log(_call("c1", "read", "{}"), _result("c1", f"in {CWD}"))
    with pytest.raises(ImportPrivate, match=r"IMPORT_PRIVATE: tools: call 0 \(turn 1, step 1\): its result names"):
        tool_lines(bare, ["read"], cwd=CWD)


@pytest.mark.parametrize(("events", "include", "kwargs", "refusal"), [
    (_weather_log(), ["bash"], {}, "tools: no call of a tool matching bash is in the log"),
    (_log(_call("c1", "weather_lookup", "{}")), ["*"], {}, "tools: call 0 (turn 1, step 1) of weather_lookup has "
                                                           "no result in the log"),
    ([*_weather_log()[:1], *_weather_log()[2:]], ["read"], {}, "tools: read is called but no request header"),
    (_log(_call("c1", "read", '{"token": "x"}'), _result("c1", '{"token": "sk"}')), ["read"],
     {"filters": parse_filters(["credentials", {"regex": "alpha|sk"}])},
     "tools: the filters hide a part of the result"),
])
def test_what_an_imported_tool_cassette_cannot_hold_is_refused(events: Any, include: list[str], kwargs: Any,
                                                                refusal: str) -> None:
    with pytest.raises(ImportUnfaithful, match="IMPORT_UNFAITHFUL: " + refusal.replace("(", r"\(").replace(")", r"\)")):
        tool_lines(events, include, cwd=CWD, **kwargs)


def test_a_subagent_s_calls_take_their_own_paths_in_time_order_and_the_delegating_call_is_not_served(
        tmp_path: Path) -> None:
    def at(event: dict[str, Any], time: int) -> dict[str, Any]:
        return {**event, "time": time}

    parent = _log(at(_call("c1", "read", '{"file_path": "a.txt"}'), 10), at(_result("c1", "alpha"), 11),
                  at(_call("c2", "subagent", '{"prompt": "go"}'), 20), at(_result("c2", "done"), 90),
                  at(_call("c3", "read", '{"file_path": "c.txt"}'), 95), at(_result("c3", "gamma"), 96))
    child = [{"type": "session", "id": "child-1", "createdAt": 30, "cwd": CWD, "parentSession": "session-1",
              "delegationDepth": 1}, *_log(at(_call("k1", "read", '{"file_path": "b.txt"}'), 50),
                                           at(_result("k1", "beta"), 51))[1:]]
    session = _replay(tmp_path, tool_lines(parent, ["read"], cwd=CWD, children=[child]), ("read",))

    assert [(c.path, json.loads(bytes(c.args))["file_path"]) for c in session._records] == [
        ("root/0", "a.txt"), ("root/1/0", "b.txt"), ("root/2", "c.txt")]
    with pytest.raises(ImportUnfaithful, match=r"tools: call 1 \(turn 1, step 1\) of subagent delegated to a "
                                               r"subagent whose calls the cassettes hold"):
        tool_lines(parent, ["*"], cwd=CWD, children=[child])


def test_a_filtered_argument_is_matched_filtered(tmp_path: Path) -> None:
    events = _log(_call("c1", "read", '{"path": "a.txt", "api_key": "sk-canary"}'), _result("c1", "alpha"))
    filters = parse_filters(["credentials"])
    lines = tool_lines(events, ["read"], cwd=CWD, filters=filters)
    assert b"sk-canary" not in b"".join(lines)
    path = tmp_path / "f.ndjson"
    write_tool_lines(str(path), lines)
    session = ReplaySession.start(ToolCassetteConfig(mode="replay", file=str(path), include=("read",),
                                                     filters=tuple(filters)))

    assert isinstance(session.on_execute(_execute("read", "root/0", '{"api_key":"sk-other","path":"a.txt"}')), Serve)


def test_verify_names_an_imported_file_and_refuses_one_without_its_content(tmp_path: Path) -> None:
    lines = tool_lines(_weather_log(), ["weather_lookup"], cwd=CWD)
    path = tmp_path / "t.ndjson"
    write_tool_lines(str(path), lines)
    assert verify_file(str(path)).source == "session-log" and load(str(path)).header.source == "session-log"
    verified = CliRunner().invoke(sidecar, ["tool-cassette", "verify", str(path)])
    assert verified.output.endswith("complete tail, imported from a session log (docs/import.md)\n")
    inspected = CliRunner().invoke(sidecar, ["tool-cassette", "inspect", str(path)])
    assert "source: imported from a session log" in inspected.output

    with pytest.raises(CassetteInvalid, match="line 4 call/result ordinal 0: imported success without the content"):
        check_lines(_resealed(lines, 3, content=UNSET))
    with pytest.raises(CassetteInvalid, match="source in a version 4 file"):
        check_lines(_resealed(lines, 0, version=4))


def _resealed(lines: list[bytes], index: int, **change: Any) -> list[bytes]:
    """``lines`` with frame ``index`` changed and the chain sealed again (a well-formed file)."""
    chain = Chain()
    frames = [decode_frame(line[:-1]) for line in lines]
    frames[index] = msgspec.structs.replace(frames[index], **change)
    return [chain.link(msgspec.structs.replace(frame, hash=""))[1] for frame in frames]


def test_an_imported_cassette_s_tools_are_stood_in_even_where_a_plugin_registers_them(tmp_path: Path) -> None:
    session = _replay(tmp_path, tool_lines(_weather_log(), ["weather_lookup"], cwd=CWD))
    contract = session.definitions["weather_lookup"]
    stand_in = StandIn(name="weather_lookup", description=contract.description, parameters=contract.parameters,
                       output=contract.output, shadow=session.imported)

    assert json.loads(msgspec.json.encode(stand_in))["shadow"] is True


def test_the_cli_writes_both_files_or_neither(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "session.jsonl"
    log.write_bytes(b"".join(msgspec.json.encode(e) + b"\n" for e in _model_log()))

    def cli(*args: str) -> Any:
        return CliRunner().invoke(sidecar, ["import", str(log), *args], catch_exceptions=False)

    assert cli("--model-cassette", "m.ndjson", "--tools", "weather_lookup").exit_code == 2
    assert cli("--model-cassette", "m.ndjson", "--tool-cassette", "t.ndjson").exit_code == 2
    (tmp_path / "t.ndjson").write_text("")
    exists = cli("--model-cassette", "m.ndjson", "--tools", "weather_lookup", "--tool-cassette", "t.ndjson")
    assert exists.exit_code == 1 and "CASSETTE_EXISTS: t.ndjson already exists" in exists.output
    assert not (tmp_path / "m.ndjson").exists()
    (tmp_path / "t.ndjson").unlink()
    done = cli("--model-cassette", "m.ndjson", "--tools", "weather_lookup", "--tool-cassette", "t.ndjson")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-3:-1] == [
        "dsh-sidecar import: wrote t.ndjson: 1 calls (weather_lookup 1), served by stand-ins with no tool body",
        "valid: dsh-tool-cassette v5: 1 calls, 1 tools, 5 frames, complete tail, imported from a session log "
        "(docs/import.md)",
    ]
    assert "tool values, deferred contexts and host state (stand-ins serve the content" in done.output.splitlines()[-1]
    generated = cli("--test", "tests/test_w.py", "--tools", "weather_lookup")
    assert generated.exit_code == 0, generated.output
    source = (tmp_path / "tests" / "test_w.py").read_text()
    assert "tool_cassette=ToolCassette(file=str(dsh.cassette('tools')), include=['weather_lookup']" in source
    assert "allow_live_tools=[]" in source
    compile(source, "test_w.py", "exec")
    assert len(list((tmp_path / "tests" / "cassettes" / "test_w").glob("*.tools.ndjson"))) == 1


def _model_log() -> list[dict[str, Any]]:
    """A two-step weather turn with its chunks, as the model import needs it."""
    task = {"content": [{"type": "text", "text": "Weather in Paris?"}], "source": {"kind": "user"}, "role": "user",
            "id": "u1"}
    call = {"type": "tool-call", "id": "c2", "name": "weather_lookup", "arguments": '{"city": "Paris"}'}
    assistant = {"role": "assistant", "content": [call], "source": {"kind": "model"}, "id": "a1"}

    def chunk(step: int, body: dict[str, Any]) -> dict[str, Any]:
        return {"type": "assistant/chunk", "seq": 0, "time": 1, "data": {"turn": 1, "step": step, "chunk": body}}

    result = _result("c2", "Paris: sunny")
    return [
        _log()[0],
        {"type": "user/message", "seq": 1, "time": 1, "data": task, "surfaceOp": "append"},
        _log()[1],
        chunk(1, {"type": "block-start", "index": 0, "blockType": "tool-call"}),
        chunk(1, {"type": "block-end", "index": 0, "block": call}),
        chunk(1, {"type": "finish", "reason": {"kind": "tool-calls"}}),
        {"type": "assistant/message", "seq": 5, "time": 1, "data": {"turn": 1, "step": 1, "message": assistant},
         "surfaceOp": "append"},
        _call("c2", "weather_lookup", '{"city": "Paris"}'),
        result,
        chunk(2, {"type": "text-delta", "index": 0, "text": "Sunny."}),
        chunk(2, {"type": "finish", "reason": {"kind": "stop"}}),
        {"type": "assistant/message", "seq": 9, "time": 1, "data": {"turn": 1, "step": 2, "message": {
            "role": "assistant", "content": [{"type": "text", "text": "Sunny."}], "id": "a2"}}, "surfaceOp": "append"},
        {"type": "turn/end", "seq": 10, "time": 1, "data": {"turn": 1, "reason": {"kind": "completed"}}},
    ]
