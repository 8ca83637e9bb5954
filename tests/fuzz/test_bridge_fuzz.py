"""Black-box fuzz of ``python -m dsh_sidecar.bridge`` over its pipes: named errors, every id answered, alive.

Seeded and bounded: ``DSH_FUZZ_SEED`` picks the seed (printed either way), about 12,000
generated lines go to one sidecar (pipelined, many in flight), within the 60 s the suite allows.
The checks are only the contract: every request that carries a readable id gets exactly one
answer with that id, every error is one of the documented codes and never ``INTERNAL``, and the
sidecar still answers and exits 0 on end of input afterwards.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_sidecar.bridge.transport.connection import WIRE_MAX_DEPTH
from dsh_sidecar.bridge.transport.protocol import METHODS
from dsh_sidecar.bridge.transport.server import MAX_LINE

pytestmark = pytest.mark.anyio

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261201"))
LINES = 12_000
CODES = {-32700, -32600, -32601, -32602, -32800, -32000}
# The named codes -32600 and -32602 carry in data.code (the rest of -32600 has no data).
PROTOCOL_CODES = {"NESTING_TOO_DEEP", "LONE_SURROGATE", "NOT_INITIALIZED", "ALREADY_INITIALIZED", "HOOK_NOT_ENABLED"}
HOOKS = sorted(name for name, row in METHODS.items() if row.hook is not None)
WORDS = ["", "a", "weather.get", "/mock", "/mock run", "root/0", "é", "\u2028", "\x00", "💥", "\ud800", "\udfff"]


def text(rand: random.Random) -> str:
    return "".join(rand.choice(WORDS) for _ in range(rand.randrange(4)))


def value(rand: random.Random, depth: int = 0) -> Any:
    """A random JSON value; strings may hold NULs and lone surrogates (escaped on the wire)."""
    kind = rand.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rand.choice([True, False, 0, -1, 2**53, 2**64, 1.5, -0.0, 1e308])
    if kind in (2, 3, 4):
        return text(rand)
    if kind in (5, 6):
        return {text(rand): value(rand, depth + 1) for _ in range(rand.randrange(4))}
    return [value(rand, depth + 1) for _ in range(rand.randrange(4))]


def params_for(rand: random.Random, method: str) -> Any:
    """Params close to the method's Struct (so handlers run), or anything at all."""
    if rand.random() < 0.3:
        return value(rand)
    common = {"handle": f"h{rand.randrange(50)}", "path": rand.choice(["root/0", "root/1/0", None]), "tool": text(rand)}
    if method == "tools/execute":
        return {**common, "path": "root/0", "callId": text(rand), "args": json.dumps(value(rand))}
    if method in ("tools/post-execute", "tools/result"):
        result = {"isError": rand.random() < 0.5, "content": [{"type": "text", "text": text(rand)}]}
        extra = {"callId": text(rand)} if method == "tools/result" else {}
        return {**common, "result": rand.choice([result, value(rand)]), **extra}
    if method == "llm/stream":
        return {
            "sessionId": rand.choice(["s1", "s2", text(rand)]),
            "purpose": rand.choice([None, None, "session-title", text(rand)]),
            "turn": rand.choice([None, 0, 1]),
            "step": rand.choice([None, 0, 1]),
            "results": [{"callId": text(rand), "tool": text(rand), "isError": rand.random() < 0.5}],
            "tools": [text(rand)],
        }
    if method in ("mock/pre-step", "mock/route", "mock/cancel", "mock/command", "mock/session-end"):
        return {
            "sessionId": rand.choice(["s1", "s2", text(rand)]),
            "turn": rand.randrange(3),
            "step": rand.randrange(3),
            "cwd": "/",
            "texts": [rand.choice(["/mock run", "/mock replay x.jsonl", "/mock", text(rand)])],
            "rawInput": rand.choice([" run", " replay", text(rand)]),
            "proposed": {"provider": "p", "model": "m"},
        }
    return value(rand)


def encode(message: Any) -> bytes:
    """JSON text as the shim writes it: lone surrogates and NULs escaped, other text raw or escaped."""
    escaped = json.dumps(message)
    if "\\ud" in escaped.lower():
        return escaped.encode()  # raw surrogates are not UTF-8: keep them escaped, as JSON.stringify does
    return json.dumps(message, ensure_ascii=False).encode()


def generate(rand: random.Random, n: int) -> tuple[bytes, str | int | None]:
    """The ``n``-th fuzz line and the id its answer must carry (``None``: no answer owed)."""
    id_: int | str = rand.choice([n, f"f{n}"])
    kind = rand.randrange(100)
    method = rand.choice([*HOOKS, "initialize", "no/such", "$/cancelRequest"])
    request: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params_for(rand, method)}
    if kind < 40:
        return encode(request), id_
    if kind < 48:
        del request["id"]
        return encode(request), None
    if kind < 55:
        broken = rand.choice([{"method": None}, {"method": 7}, {"jsonrpc": "1.0"}, {"extra": 1}, {"params": None}])
        request.update(broken)
        if "method" in broken and broken["method"] is None:
            del request["method"]
        return encode(request), id_
    if kind < 62:
        if rand.random() < 0.5:
            request["params"] = {rand.choice(["\ud800", "k"]): [rand.choice(["\udc00", "a\udbffb"])]}
            return encode(request), id_
        body = encode(request)
        at = rand.randrange(2, len(body))
        return body[:at] + rand.choice([b'"\\ud800"', b'"\\udc00x"', b"\\uDBFF"]) + body[at:], None
    if kind < 70:
        levels = rand.choice([WIRE_MAX_DEPTH - 3, WIRE_MAX_DEPTH + 1, 981, 5_000, 50_000])
        deep = b"[" * levels + b"]" * levels
        order = rand.random() < 0.5
        head = b'{"jsonrpc":"2.0","id":' + json.dumps(id_).encode() + b',"method":"tools/result","params":'
        tail = b'{"jsonrpc":"2.0","method":"tools/result","params":'
        return (head + deep + b"}", id_) if order else (tail + deep + b',"id":' + json.dumps(id_).encode() + b"}", id_)
    if kind < 78:
        body = encode(request)
        cut = rand.randrange(1, len(body))
        noise = bytes(rand.randrange(256) for _ in range(20))
        return rand.choice([body[:cut], body[:cut] + b"\x00" + body[cut:], noise]), None
    if kind < 84:
        response = {"jsonrpc": "2.0", "id": id_, rand.choice(["result", "error"]): value(rand)}
        return encode(response), None
    if kind < 90:
        target = {"id": rand.randrange(n + 1)}
        cancel: dict[str, Any] = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": target}
        if rand.random() < 0.5:
            cancel["id"] = id_
            return encode(cancel), id_
        return encode(cancel), None
    if kind < 95:
        return encode([request]), None
    return rand.choice([b"", b"   ", b"\t", b"null", b"[]", b"{}", b'"x"', b"1"]), None


def check_answer(answer: dict[str, Any], seed: int) -> None:
    assert answer.get("jsonrpc") == "2.0", f"seed {seed}: {answer}"
    error = answer.get("error")
    if error is None:
        assert "result" in answer, f"seed {seed}: {answer}"
        return
    assert error["code"] in CODES, f"seed {seed}: {answer}"
    data = error.get("data")
    if error["code"] == -32000:
        assert isinstance(data, dict) and data.get("code") not in (None, "INTERNAL"), f"seed {seed}: {answer}"
    elif data is not None:
        assert data.get("code") in PROTOCOL_CODES, f"seed {seed}: {answer}"


async def exchange(
    process: Process, reader: BufferedByteReceiveStream, lines: list[bytes], owed: Counter[Any]
) -> tuple[Counter[Any], int]:
    """Write ``lines`` pipelined while reading answers, until every owed answer came back.

    Inline methods answer in arrival order, tasks (``llm/stream``) in any: a final marker request
    bounds the wait, since after its answer only task answers may still be on their way.
    """
    assert process.stdin is not None and process.stdout is not None
    answers: Counter[Any] = Counter()
    unowed = 0
    marker = b'{"jsonrpc":"2.0","id":"marker","method":"no/such"}'

    async def write() -> None:
        assert process.stdin is not None
        batch = [*lines, marker]
        for start in range(0, len(batch), 64):
            await process.stdin.send(b"".join(line + b"\n" for line in batch[start : start + 64]))

    marked = False
    async with anyio.create_task_group() as tg:
        tg.start_soon(write)
        with anyio.CancelScope() as late:  # no deadline until the marker is answered
            while not marked or +(owed - answers):
                answer = msgspec.json.decode(await reader.receive_until(b"\n", MAX_LINE))
                check_answer(answer, SEED)
                if answer["id"] == "marker":
                    marked = True
                    late.deadline = anyio.current_time() + 10
                elif answer["id"] is None or answer["id"] not in owed:
                    unowed += 1
                else:
                    answers[answer["id"]] += 1
    missing, extra = owed - answers, answers - owed
    assert not missing and not extra, f"seed {SEED}: unanswered {list(missing)[:5]}, answered twice {list(extra)[:5]}"
    return answers, unowed


async def test_the_bridge_survives_generated_input_with_named_answers(tmp_path: Path) -> None:
    print(f"bridge fuzz seed {SEED} (set DSH_FUZZ_SEED to replay)")
    rand = random.Random(SEED)
    stderr = (tmp_path / "stderr.log").open("wb")
    with anyio.fail_after(60):
        async with await anyio.open_process(
            [sys.executable, "-m", "dsh_sidecar.bridge"], cwd=tmp_path, stderr=stderr, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        ) as process:
            initialize = {"protocolVersion": 1, "host": {}, "config": {}, "cwd": str(tmp_path), "pid": 1}
            init = {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": initialize}
            init_line = msgspec.json.encode(init)
            assert process.stdin is not None and process.stdout is not None
            reader = BufferedByteReceiveStream(process.stdout)
            await process.stdin.send(init_line + b"\n")
            assert msgspec.json.decode(await reader.receive_until(b"\n", MAX_LINE))["id"] == "init"

            lines, owed = [], Counter[Any]()
            for n in range(LINES):
                line, id_ = generate(rand, n)
                lines.append(line)
                if id_ is not None:
                    owed[id_] += 1
            # One line of exactly the cap, answered like any other.
            cap_head = b'{"jsonrpc":"2.0","id":"cap","method":"no/such","params":"'
            lines.append(cap_head + b"x" * (MAX_LINE - len(cap_head) - 2) + b'"}')
            owed["cap"] += 1
            _, unowed = await exchange(process, reader, lines, owed)

            execute = {"handle": "h", "path": "root/9", "tool": "t", "callId": "c", "args": "{}"}
            alive = msgspec.json.encode({"jsonrpc": "2.0", "id": "alive", "method": "tools/execute", "params": execute})
            await exchange(process, reader, [alive], Counter(["alive"]))
            await process.stdin.aclose()
            rest = b""
            while True:
                try:
                    rest += await reader.receive()
                except anyio.EndOfStream:
                    break
            for raw in rest.splitlines():
                check_answer(msgspec.json.decode(raw), SEED)
            assert await process.wait() == 0, (tmp_path / "stderr.log").read_text()
    stderr.close()
    answered = sum(owed.values())
    print(f"bridge fuzz: {len(lines) + 2} lines, {answered} requests with an id all answered, {unowed} other answers")
    assert b"Traceback" not in (tmp_path / "stderr.log").read_bytes()


def test_a_line_one_byte_over_the_cap_is_refused_and_the_sidecar_exits_cleanly(tmp_path: Path) -> None:
    head = b'{"jsonrpc":"2.0","id":1,"method":"no/such","params":"'
    line = head + b"x" * (MAX_LINE + 1 - len(head) - 2) + b'"}\n'
    done = subprocess.run(
        [sys.executable, "-m", "dsh_sidecar.bridge"], input=line, capture_output=True, cwd=tmp_path, timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert msgspec.json.decode(done.stdout) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": f"line longer than {MAX_LINE} bytes"},
    }
