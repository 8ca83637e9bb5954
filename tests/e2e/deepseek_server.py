"""A loopback stand-in for the DeepSeek chat-completions API, answering from a script.

rc.8's ``@deepseek-ai/dsh-llm-deepseek`` POSTs ``<baseURL>/chat/completions`` with
``stream: true`` and parses ``data: <json>`` SSE events up to ``data: [DONE]`` (its
``parseSse``/``translate``): ``choices[].delta.reasoning_content``, ``.content`` and
``.tool_calls[{index, id, function: {name, arguments}}]``, ``choices[].finish_reason`` and a
``usage`` object. This server speaks exactly that, so a headless turn routed to the stock
``deepseek-official`` provider is a real provider turn, minus the network.

The script is JSON: ``{"title": str, "conversations": [{"match": str, "replies": [reply...]}]}``.
A request whose ``max_tokens`` is the title budget (64) gets ``title``. Any other request picks
the first conversation whose ``match`` occurs in its first user message, and the reply indexed
by the number of assistant messages already in it; a reply is ``{"text": str}`` or
``{"tool_calls": [{"name": str, "arguments": object}]}`` (optionally with ``"reasoning"``), or
``{"stall": true}`` (one content delta, then silence: a stream that never finishes).
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

SERVER = r"""
import http.server, json, sys, time, uuid

script = json.loads(open(sys.argv[1]).read())
log_file = sys.argv[2]
TITLE_TOKENS = 64

def first_user_text(messages):
    for m in messages:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return ""

def reply_for(body):
    if body.get("max_tokens") == TITLE_TOKENS:
        return "title", {"text": script.get("title", "A title")}
    messages = body.get("messages", [])
    first = first_user_text(messages)
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    for conversation in script["conversations"]:
        if conversation["match"] in first:
            replies = conversation["replies"]
            return "conversation", replies[min(turn, len(replies) - 1)]
    return "unmatched", {"text": "no scripted reply"}

def events(reply):
    base = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "object": "chat.completion.chunk", "model": "deepseek-v4-flash"}
    def chunk(delta, finish=None, usage=None):
        out = dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
        if usage is not None:
            out["usage"] = usage
        return out
    yield chunk({"role": "assistant", "content": ""})
    if reply.get("stall"):
        yield chunk({"content": "thinking about it "})
        time.sleep(600)
    if "reasoning" in reply:
        for part in reply["reasoning"].split(" "):
            yield chunk({"reasoning_content": part + " "})
    if "text" in reply:
        words = reply["text"].split(" ")
        for i, word in enumerate(words):
            yield chunk({"content": word if i == len(words) - 1 else word + " "})
    for i, call in enumerate(reply.get("tool_calls", [])):
        args = json.dumps(call["arguments"])
        half = len(args) // 2
        call_id = "call_" + uuid.uuid4().hex[:16]
        yield chunk({"tool_calls": [{"index": i, "id": call_id, "type": "function",
                                      "function": {"name": call["name"], "arguments": args[:half]}}]})
        yield chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})
    finish = "tool_calls" if reply.get("tool_calls") else "stop"
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110,
             "prompt_cache_hit_tokens": 40, "prompt_cache_miss_tokens": 60}
    yield chunk({}, finish, usage)

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
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for event in events(reply):
            self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
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
