"""The sans-I/O endpoint: lines in, actions out. No pipes, no event loop."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from dsh_sidecar.bridge.transport.connection import (
    CANCELLED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    WIRE_MAX_DEPTH,
    Cancel,
    Dispatch,
    RpcConnection,
    Send,
    nesting_depth,
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


def test_a_response_is_never_answered() -> None:
    # The sidecar sends no requests: a response can only be stray, and responses get no answer.
    conn = RpcConnection()
    assert conn.feed(line(id=1, result={"ok": True})) == []
    assert conn.feed(line(id=None, error={"code": -32700, "message": "parse error"})) == []
    assert conn.feed(line(id=2, method=None, result=None)) == []


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jsonrpc":"2.0","id":70}',
        b'{"jsonrpc":"2.0","id":70,"method":null}',
        b'{"jsonrpc":"2.0","id":70,"params":{}}',
    ],
)
def test_a_request_without_a_method_is_answered_with_its_id(raw: bytes) -> None:
    (action,) = RpcConnection().feed(raw)
    assert sent(action) == {
        "jsonrpc": "2.0",
        "id": 70,
        "error": {"code": INVALID_REQUEST, "message": "invalid request: method must be a string"},
    }


def test_cancel_sent_as_a_request_is_carried_out_and_answered() -> None:
    conn = RpcConnection()
    conn.feed(line(id=7, method="llm/stream"))
    cancel, answer = conn.feed(line(id="c1", method="$/cancelRequest", params={"id": 7}))
    assert cancel == Cancel(7)
    assert sent(answer) == {"jsonrpc": "2.0", "id": "c1", "result": None}
    (answer,) = conn.feed(line(id="c2", method="$/cancelRequest", params={"id": 99}))
    assert sent(answer)["result"] is None


def test_cancel_request_with_malformed_params_is_answered_invalid_params() -> None:
    (action,) = RpcConnection().feed(line(id="c", method="$/cancelRequest", params={"request": 1}))
    message = sent(action)
    assert (message["id"], message["error"]["code"]) == ("c", INVALID_PARAMS)
    assert message["error"]["message"] == "invalid params for $/cancelRequest: Object missing required field `id`"


LONE_SURROGATES = [
    rb'{"jsonrpc":"2.0","id":5,"method":"tools/execute","params":{"\ud800":1}}',
    rb'{"jsonrpc":"2.0","method":"tools/execute","params":{"args":"a\udc00b"},"id":5}',
    rb'{"jsonrpc":"2.0","id":5,"method":"\ud800","params":{}}',
    rb'{"params":[{"x":["\uDBFF"]}],"id":5,"jsonrpc":"2.0","method":"tools/result"}',
]


@pytest.mark.parametrize("raw", LONE_SURROGATES)
def test_a_lone_surrogate_anywhere_is_named_and_answered_with_the_request_id(raw: bytes) -> None:
    (action,) = RpcConnection().feed(raw)
    message = sent(action)
    assert message["id"] == 5
    assert message["error"]["code"] == INVALID_REQUEST
    assert message["error"]["data"] == {"code": "LONE_SURROGATE"}
    assert message["error"]["message"].startswith("LONE_SURROGATE: a string has a \\uD800-\\uDFFF escape")


def test_a_surrogate_pair_and_an_escaped_backslash_before_u_are_ordinary_text() -> None:
    conn = RpcConnection()
    pair = rb'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\ud83d\ude00"}}'
    text = rb'{"jsonrpc":"2.0","id":2,"method":"m","params":{"a":"\\ud800"}}'
    assert [type(conn.feed(raw)[0]) for raw in (pair, text)] == [Dispatch, Dispatch]


def test_a_lone_surrogate_in_the_id_itself_answers_with_a_null_id() -> None:
    (action,) = RpcConnection().feed(rb'{"jsonrpc":"2.0","id":"\ud800","method":"m"}')
    assert sent(action)["id"] is None
    assert sent(action)["error"]["data"] == {"code": "LONE_SURROGATE"}


def nested(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize("levels", [WIRE_MAX_DEPTH, WIRE_MAX_DEPTH + 1, 5_000, 200_000])
def test_nesting_beyond_max_depth_is_named_with_the_id_and_up_to_it_is_served(levels: int) -> None:
    conn = RpcConnection()
    for raw in (
        b'{"jsonrpc":"2.0","id":9,"method":"m","params":{"a":' + nested(levels - 2) + b"}}",
        b'{"jsonrpc":"2.0","method":"m","params":{"a":' + nested(levels - 2) + b'},"id":9}',
    ):
        (action,) = conn.feed(raw)
        if levels <= WIRE_MAX_DEPTH:
            assert isinstance(action, Dispatch)
            conn.respond(9, None)
            continue
        message = sent(action)
        assert message["id"] == 9
        assert message["error"]["data"] == {"code": "NESTING_TOO_DEEP"}
        assert message["error"]["message"] == (
            f"NESTING_TOO_DEEP: the message nests arrays/objects deeper than {WIRE_MAX_DEPTH} levels; "
            "send a flatter value"
        )


def test_nesting_depth_ignores_brackets_inside_strings() -> None:
    assert nesting_depth(rb'[[1,{"a":"[[[[\"{{"}],[]]') == 3
    assert nesting_depth(b'"[[["') == 0


def test_deep_nesting_in_a_line_that_is_not_json_answers_with_a_null_id() -> None:
    (action,) = RpcConnection().feed(b"[" * 100_000)
    assert sent(action)["id"] is None
    assert sent(action)["error"]["data"] == {"code": "NESTING_TOO_DEEP"}


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


def test_a_cancel_is_served_before_the_lines_ahead_of_it_unless_it_cancels_one_of_them() -> None:
    ahead = [line(id=1, method="tools/execute", params={}), line(method="tools/result", params={})]
    jumps = line(id="c", method="$/cancelRequest", params={"id": 7})  # 7 is in flight already
    stays = line(method="$/cancelRequest", params={"id": 1})  # 1 arrived in this same read
    garbled = line(id="g", method="$/cancelRequest", params={"id": [1]})
    first, rest = RpcConnection.cancels_first([*ahead, jumps, stays, garbled, b"", b"{not json"])
    assert first == [jumps]
    assert rest == [*ahead, stays, garbled, b"", b"{not json"]


def _comparable(action: object) -> str:
    if isinstance(action, Dispatch):
        return f"Dispatch {action.id!r} {action.method} {bytes(action.params)!r}"
    return repr(action)


def test_serving_cancels_first_answers_as_arrival_order_would() -> None:
    earlier = line(id=2, method="tools/execute", params={})
    read = [
        line(id=1, method="tools/execute", params={}),
        line(id="c", method="$/cancelRequest", params={"id": 2}),
        line(id="d", method="$/cancelRequest", params={"id": 1}),
    ]
    in_order, hoisted = RpcConnection(), RpcConnection()
    in_order.feed(earlier)
    hoisted.feed(earlier)
    first, rest = RpcConnection.cancels_first(read)
    # 2 was in flight before this read: its cancel jumps; 1 arrives in the read: its cancel waits.
    assert first == [read[1]] and rest == [read[0], read[2]]
    expected = [action for received in read for action in in_order.feed(received)]
    actual = [action for received in first + rest for action in hoisted.feed(received)]
    assert sorted(map(_comparable, actual)) == sorted(map(_comparable, expected))
    assert Cancel(1) in actual and Cancel(2) in actual
    assert (hoisted.incoming, hoisted.cancelled) == (in_order.incoming, in_order.cancelled) == ({1, 2}, {1, 2})
