"""A loopback stand-in for the DeepSeek chat-completions API, answering from a script.

rc.8's ``@deepseek-ai/dsh-llm-deepseek`` POSTs ``<baseURL>/chat/completions`` with
``stream: true`` and parses ``data: <json>`` SSE events up to ``data: [DONE]`` (its
``parseSse``/``translate``): ``choices[].delta.reasoning_content``, ``.content`` and
``.tool_calls[{index, id, function: {name, arguments}}]``, ``choices[].finish_reason`` and a
``usage`` object. This server speaks exactly that, so a headless turn routed to the stock
``deepseek-official`` provider is a real provider turn, minus the network.

The script is JSON: ``{"title": str, "title_reply": reply, "conversations": [{"match": str,
"replies": [reply...]}]}``. A request whose ``max_tokens`` is the title budget (64) gets
``title_reply`` (default: the text ``title``). Any other request picks the first conversation
whose ``match`` occurs in its first user message, and the reply indexed by the number of
assistant messages already in it; a conversation with ``match_last`` instead (a compaction's
summarization call, whose instruction is its last user message) answers with its first reply.
A reply's ``prompt_tokens`` is the usage it reports (default 100): the token pressure that makes
rc.8 compact. A reply is ``{"text": str}`` and/or ``{"tool_calls": [{"name":
str, "arguments": object}]}``, optionally with ``reasoning``, and these switches, each what the
real API does somewhere: ``thinking`` (the thinking-mode first chunk: ``content: null``, empty
``reasoning_content``), ``keepalive: n`` (``: keep-alive`` comments at the start, between
reasoning parts and after the finish), ``empty_deltas`` (a ``{}`` and an empty-content delta),
``interleave`` (parallel tool calls' argument deltas interleaved), ``split_utf8`` (every event in
two writes, cut inside a multi-byte character), ``usage_last`` (the finish chunk without usage,
then a usage-only chunk with no choices and ``prompt_tokens_details.cached_tokens``), ``finish``
(``length``, ``insufficient_system_resource``, ...), ``cache_hit`` (the cache counter), ``no_done``
(no ``data: [DONE]``), ``cut`` (the stream breaks mid-chunk: a transport error), ``status`` with
``retry_after`` (an HTTP error with a JSON error body and ``Retry-After``), ``delay`` (seconds
before answering: a slow call) and ``stall`` (one content delta, then silence). A reply
``{"attempts": [reply...]}`` answers the n-th identical request (a retry) with its n-th entry.
The stream is chunked transfer encoding, so a ``cut`` is a broken body, not a clean end.
Each request appends one line (a JSON summary: path, model, auth header, kind) to a log file,
so tests count provider requests and check what reached the provider.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A weather question the provider answers with one weather_lookup call, then the text.
WEATHER_TASK = "What is the weather in Paris?"
WEATHER_SCRIPT: dict[str, Any] = {
    "title": "Paris weather",
    "conversations": [{"match": "weather in", "replies": [
        {"tool_calls": [{"name": "weather_lookup", "arguments": {"city": "Paris"}}]},
        {"text": "It is sunny in Paris, 21C."},
    ]}],
}

SERVER = r"""
import http.server, json, sys, threading, time, uuid

script = json.loads(open(sys.argv[1]).read())
log_file = sys.argv[2]
TITLE_TOKENS = 64
attempts = {}
lock = threading.Lock()

def first_user_text(messages):
    for m in messages:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""

def attempt(key, reply):
    # A reply with "attempts" answers the n-th identical request with its n-th entry (retries).
    if "attempts" not in reply:
        return reply
    with lock:
        n = attempts[key] = attempts.get(key, -1) + 1
    return reply["attempts"][min(n, len(reply["attempts"]) - 1)]

def reply_for(body):
    if body.get("max_tokens") == TITLE_TOKENS:
        return "title", attempt("title", script.get("title_reply", {"text": script.get("title", "A title")}))
    messages = body.get("messages", [])
    first = first_user_text(messages)
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    users = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    for conversation in script["conversations"]:
        if "match_last" in conversation:  # an auxiliary call: its instruction is the last user message
            if users and conversation["match_last"] in users[-1]:
                return "conversation", conversation["replies"][0]
        elif conversation["match"] in first:
            replies = conversation["replies"]
            return "conversation", attempt((conversation["match"], turn), replies[min(turn, len(replies) - 1)])
    return "unmatched", {"text": "no scripted reply"}

def events(reply):
    # Each item is the bytes of one SSE event, or "cut" (close the stream mid-chunk).
    base = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion.chunk", "model": "deepseek-v4-flash"}
    keepalive = reply.get("keepalive", 0)
    def chunk(delta, finish=None, usage=None, choices=True):
        out = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}] if choices else [])
        if usage is not None:
            out["usage"] = usage
        return b"data: " + json.dumps(out, ensure_ascii=False).encode() + b"\n\n"
    def alive():
        for _ in range(keepalive):
            yield b": keep-alive\n\n"
    yield from alive()
    if reply.get("thinking"):
        # The thinking-mode first chunk: role, null content, empty reasoning.
        yield chunk({"role": "assistant", "content": None, "reasoning_content": ""})
    else:
        yield chunk({"role": "assistant", "content": ""})
    if reply.get("stall"):
        yield chunk({"content": "thinking about it "})
        time.sleep(600)
    if reply.get("empty_deltas"):
        yield chunk({})
        yield chunk({"content": ""})
    if "reasoning" in reply:
        for part in reply["reasoning"].split(" "):
            yield chunk({"reasoning_content": part + " "})
            yield from alive()
    if reply.get("text"):
        words = reply["text"].split(" ")
        for i, word in enumerate(words):
            yield chunk({"content": word if i == len(words) - 1 else word + " "})
    calls = []
    for i, call in enumerate(reply.get("tool_calls", [])):
        args = json.dumps(call["arguments"])
        half = len(args) // 2
        call_id = "call_" + uuid.uuid4().hex[:16]
        calls.append([
            {"tool_calls": [{"index": i, "id": call_id, "type": "function",
                             "function": {"name": call["name"], "arguments": args[:half]}}]},
            {"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]},
        ])
    if reply.get("interleave"):
        calls = [list(step) for step in zip(*calls)]  # first halves of every call, then second halves
    for group in calls:
        for delta in group:
            yield chunk(delta)
    if reply.get("cut"):
        yield "cut"
        return
    finish = reply.get("finish") or ("tool_calls" if reply.get("tool_calls") else "stop")
    usage = {"prompt_tokens": reply.get("prompt_tokens", 100), "completion_tokens": 10, "total_tokens": 110,
             "prompt_cache_hit_tokens": reply.get("cache_hit", 40), "prompt_cache_miss_tokens": 60}
    if reply.get("usage_last"):
        # finish without usage, then a usage-only chunk with no choices and cached token details.
        yield chunk({}, finish)
        usage["prompt_tokens_details"] = {"cached_tokens": usage["prompt_cache_hit_tokens"]}
        usage["completion_tokens_details"] = {"reasoning_tokens": 4}
        yield chunk(None, usage=usage, choices=False)
    else:
        yield chunk({}, finish, usage)
    yield from alive()
    if not reply.get("no_done"):
        yield b"data: [DONE]\n\n"

class DeepSeek(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        kind, reply = reply_for(body)
        with open(log_file, "a") as f:
            f.write(json.dumps({"path": self.path, "model": body.get("model"), "kind": kind,
                                "auth": self.headers.get("Authorization", ""),
                                "messages": len(body.get("messages", [])),
                                "tools": [t["function"]["name"] for t in body.get("tools", [])],
                                "body": body}) + "\n")
        if reply.get("delay"):
            time.sleep(reply["delay"])  # a slow provider (the title call outliving the turn)
        if reply.get("status"):
            payload = json.dumps({"error": {"message": reply.get("message", "scripted failure"),
                                            "type": "server_error"}}).encode()
            self.send_response(reply["status"])
            if "retry_after" in reply:
                self.send_header("Retry-After", str(reply["retry_after"]))
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        def write(data):
            self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
            self.wfile.flush()
        for event in events(reply):
            if event == "cut":
                # A chunk announced longer than what follows, then the socket closes: a transport error.
                self.wfile.write(b"100\r\ndata: {")
                self.wfile.flush()
                self.close_connection = True
                return
            if reply.get("split_utf8"):
                # Every event in two writes, split inside a multi-byte character when it has one.
                at = next((i + 1 for i, b in enumerate(event) if b >= 0xC0), len(event) // 2)
                write(event[:at])
                write(event[at:])
            else:
                write(event)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True
    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), DeepSeek)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@dataclass
class DeepSeekServer:
    """A running fake provider: its base URL and the log of requests it answered."""

    url: str
    log: Path

    def requests(self) -> list[dict[str, Any]]:
        """Every request answered so far (a JSON summary each, the body included)."""
        if not self.log.exists():
            return []
        # The server may be mid-write: only newline-terminated lines are complete records.
        complete = self.log.read_text().split("\n")[:-1]
        return [json.loads(line) for line in complete if line]

    @property
    def count(self) -> int:
        """Requests answered so far."""
        return len(self.requests())

    def env(self, key: str = "sk-test-dummy") -> dict[str, str]:
        """The environment that points rc.8's ``deepseek-official`` route at this server."""
        return {"DEEPSEEK_BASE_URL": self.url, "DEEPSEEK_API_KEY": key}


@contextmanager
def deepseek_server(folder: Path, script: dict[str, Any]) -> Iterator[DeepSeekServer]:
    """Serve ``script`` on loopback until the block ends (then nothing answers the URL)."""
    script_file = folder / "deepseek-script.json"
    script_file.write_text(json.dumps(script))
    log = folder / "deepseek-requests.log"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(script_file), str(log)], stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        yield DeepSeekServer(url=f"http://127.0.0.1:{port}", log=log)
    finally:
        server.terminate()
        server.wait(timeout=10)


def dead_url() -> str:
    """A loopback URL nothing listens on (a port bound then released)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"
