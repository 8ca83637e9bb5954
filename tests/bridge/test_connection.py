"""The sans-I/O endpoint: lines in, actions out. No pipes, no event loop."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec

from bridge.connection import (
    CANCELLED,
    INVALID_REQUEST,
    PARSE_ERROR,
    Cancel,
    Dispatch,
    Resolve,
    RpcConnection,
    Send,
)


def line(**fields: Any) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", **fields})


def sent(action: object) -> dict[str, Any]:
    assert isinstance(action, Send)
    assert action.data.endswith(b"\n") and action.data.count(b"\n") == 1
    decoded: dict[str, Any] = msgspec.json.decode(action.data)
    return decoded


def test_request_is_dispatched_with_its_id_and_raw_params() -> None:
    conn = RpcConnection()
    actions = conn.feed(line(id=1, method="tools/execute", params={"tool": "a"}))
    assert actions == [Dispatch(1, "tools/execute", msgspec.Raw(b'{"tool":"a"}'))]
    assert conn.incoming == {1}


def test_notification_is_dispatched_without_an_id_and_not_tracked() -> None:
    conn = RpcConnection()
    actions = conn.feed(line(method="tools/result", params={"handle": "h"}))
    assert actions == [Dispatch(None, "tools/result", msgspec.Raw(b'{"handle":"h"}'))]
    assert conn.incoming == set()


def test_request_without_params_gets_null_params() -> None:
    assert RpcConnection().feed(line(id="a", method="shutdown")) == [
        Dispatch("a", "shutdown", msgspec.Raw(b"null"))
    ]


def test_unknown_method_is_dispatched_for_the_server_to_answer() -> None:
    # The endpoint does not know the method table; the server answers -32601.
    assert RpcConnection().feed(line(id=3, method="no/such")) == [
        Dispatch(3, "no/such", msgspec.Raw(b"null"))
    ]


def test_invalid_json_answers_parse_error_with_null_id() -> None:
    (action,) = RpcConnection().feed(b'{"jsonrpc": "2.0", "id": 1,')
    assert sent(action) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": PARSE_ERROR, "message": "parse error: the line is not JSON"},
    }


def test_json_that_is_not_a_jsonrpc_message_answers_invalid_request() -> None:
    for raw in (b"[1, 2]", b'{"hello": "world"}', b'"text"', b'{"jsonrpc": "2.0", "id": true}'):
        (action,) = RpcConnection().feed(raw)
        assert sent(action)["error"] == {
            "code": INVALID_REQUEST,
            "message": "invalid request: not a JSON-RPC 2.0 message",
        }


def test_wrong_jsonrpc_version_answers_invalid_request_with_the_id() -> None:
    (action,) = RpcConnection().feed(b'{"jsonrpc": "1.0", "id": 9, "method": "x"}')
    message = sent(action)
    assert message["id"] == 9
    assert message["error"]["code"] == INVALID_REQUEST


def test_duplicate_in_flight_id_is_refused_and_the_first_stays_in_flight() -> None:
    conn = RpcConnection()
    conn.feed(line(id=5, method="tools/execute"))
    (action,) = conn.feed(line(id=5, method="tools/execute"))
    assert sent(action)["error"] == {
        "code": INVALID_REQUEST,
        "message": "invalid request: id already in flight",
    }
    assert sent(action)["id"] == 5
    assert conn.incoming == {5}


def test_id_can_be_reused_once_answered() -> None:
    conn = RpcConnection()
    conn.feed(line(id=5, method="tools/execute"))
    conn.respond(5, None)
    assert conn.feed(line(id=5, method="tools/execute")) == [
        Dispatch(5, "tools/execute", msgspec.Raw(b"null"))
    ]


def test_respond_writes_one_result_line() -> None:
    conn = RpcConnection()
    conn.feed(line(id=2, method="shutdown"))
    assert sent(conn.respond(2, {"exitCode": 0})) == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"exitCode": 0},
    }
    assert conn.incoming == set()


def test_respond_error_carries_code_message_and_data() -> None:
    conn = RpcConnection()
    conn.feed(line(id=2, method="shutdown"))
    assert sent(conn.respond_error(2, -32000, "PROTOCOL_ERROR: x", {"code": "PROTOCOL_ERROR"})) == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {
            "code": -32000,
            "message": "PROTOCOL_ERROR: x",
            "data": {"code": "PROTOCOL_ERROR"},
        },
    }


def test_cancel_of_an_in_flight_request_yields_cancel_and_its_answer_becomes_cancelled() -> None:
    conn = RpcConnection()
    conn.feed(line(id=7, method="tools/execute"))
    assert conn.feed(line(method="$/cancelRequest", params={"id": 7})) == [Cancel(7)]
    assert sent(conn.respond(7, {"action": "next"})) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": CANCELLED, "message": "request cancelled"},
    }
    assert conn.cancelled == set()


def test_cancelled_request_answered_with_an_error_still_answers_cancelled() -> None:
    conn = RpcConnection()
    conn.feed(line(id="x", method="tools/execute"))
    conn.feed(line(method="$/cancelRequest", params={"id": "x"}))
    assert sent(conn.respond_error("x", -32000, "boom"))["error"]["code"] == CANCELLED


def test_cancel_of_an_unknown_id_is_a_no_op() -> None:
    conn = RpcConnection()
    conn.feed(line(id=1, method="tools/execute"))
    assert conn.feed(line(method="$/cancelRequest", params={"id": 99})) == []
    assert conn.cancelled == set()
    assert sent(conn.respond(1, None))["result"] is None


def test_cancel_with_malformed_params_is_a_no_op() -> None:
    conn = RpcConnection()
    assert conn.feed(line(method="$/cancelRequest", params={"request": 1})) == []
    assert conn.feed(line(method="$/cancelRequest")) == []


def test_cancel_after_the_answer_is_a_no_op() -> None:
    conn = RpcConnection()
    conn.feed(line(id=1, method="tools/execute"))
    conn.respond(1, None)
    assert conn.feed(line(method="$/cancelRequest", params={"id": 1})) == []


def test_our_requests_take_ids_from_the_injected_counter() -> None:
    conn = RpcConnection(ids=itertools.count(41))
    id_, send = conn.request("host/call-next", {"handle": "h"})
    assert id_ == 41
    assert sent(send) == {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "host/call-next",
        "params": {"handle": "h"},
    }
    assert conn.request("host/call-next", {})[0] == 42
    assert conn.outgoing == {41, 42}


def test_result_for_our_request_resolves_it_once() -> None:
    conn = RpcConnection()
    id_, _ = conn.request("host/call-next", {})
    assert conn.feed(line(id=id_, result={"ok": True})) == [
        Resolve(id_, msgspec.Raw(b'{"ok":true}'), None)
    ]
    assert conn.outgoing == set()
    assert conn.feed(line(id=id_, result={"ok": True})) == []


def test_error_for_our_request_resolves_it_with_the_error_object() -> None:
    conn = RpcConnection()
    id_, _ = conn.request("host/call-next", {})
    error = {"code": -32000, "message": "nope"}
    assert conn.feed(line(id=id_, error=error)) == [Resolve(id_, None, error)]


def test_response_with_an_unknown_id_is_ignored() -> None:
    conn = RpcConnection()
    conn.request("host/call-next", {})
    assert conn.feed(line(id=999, result=1)) == []
    assert conn.feed(line(id=None, error={"code": -32700, "message": "parse error"})) == []
    assert conn.outgoing == {1}


def test_incoming_and_outgoing_ids_are_separate_directions() -> None:
    conn = RpcConnection()
    id_, _ = conn.request("host/call-next", {})
    # The peer may use the same number for its own request: it is a request, not our answer.
    assert conn.feed(line(id=id_, method="tools/execute")) == [
        Dispatch(id_, "tools/execute", msgspec.Raw(b"null"))
    ]
    assert conn.outgoing == {id_}


def test_notify_builds_a_line_without_id() -> None:
    assert sent(RpcConnection().notify("host/log", {"text": "t"})) == {
        "jsonrpc": "2.0",
        "method": "host/log",
        "params": {"text": "t"},
    }


def test_protocol_error_is_an_invalid_request_with_null_id() -> None:
    assert sent(RpcConnection.protocol_error("line longer than 8 bytes")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": "line longer than 8 bytes"},
    }


def test_malformed_request_with_an_id_is_answered_with_that_id() -> None:
    conn = RpcConnection()

    (action,) = conn.feed(line(id=7, method="tools/execute", params={}, unexpected=True))

    assert sent(action)["id"] == 7
    assert sent(action)["error"]["code"] == INVALID_REQUEST
