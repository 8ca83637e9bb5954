"""The demo: record a real local tool through headless DSH rc.8, stop its service, replay offline.

No model and no key: the sidecar's mock route drives the turn (``/mock run``). A local HTTP
weather service answers the ``weather_lookup`` tool while recording; then the service is
stopped and the same run is replayed from the cassette with zero real calls.
Exit 0 only when every count matches what a cassette promises.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from python_core.mock.source import decode_source

ROOT = Path(__file__).resolve().parents[1]
HOST = ROOT / ".host"
DSH_HOME = HOST / "dsh-home"
TASK = '/mock run weather_lookup({"city": "Paris"})'

SERVER = r"""
import http.server, json, sys
from urllib.parse import urlparse, parse_qs
count_file = sys.argv[1]
class Weather(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(count_file, "a") as f:
            f.write("GET\n")
        city = parse_qs(urlparse(self.path).query).get("city", ["?"])[0]
        body = json.dumps({"city": city, "forecast": "sunny", "temperatureC": 21}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Weather)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def patch(work: Path, mode: str, port: int) -> Path:
    """The run's --patch layer: the sidecar row with the cassette, and the tools row."""
    rows = [
        {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": {
            "toolCassette": {"mode": mode, "file": "weather.cassette.ndjson", "include": ["weather_lookup"]},
        }},
        {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {
            "weatherUrl": f"http://127.0.0.1:{port}",
        }},
    ]
    path = work / f"{mode}.patch.yml"
    path.write_text("".join(f"- {json.dumps(row)}\n" for row in rows))
    return path


def run_dsh(work: Path, patch_file: Path) -> subprocess.CompletedProcess[str]:
    """One headless run of the task."""
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env.update(DSH_HOME=str(DSH_HOME), DSH_TELEMETRY_DISABLED="1")
    return subprocess.run(
        [str(HOST / "bin" / "dsh"), "--profile", "headless", "--patch", str(patch_file), TASK],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )


def tool_answer(work: Path) -> list[str]:
    """The tool-result texts the model saw in each session of ``work``, oldest first."""
    answers = []
    for path in sorted(DSH_HOME.glob("sessions/*/session-*/session.jsonl.zstd"), key=os.path.getmtime):
        _, data = decode_source(path.read_bytes(), source=path.name)
        events = [json.loads(line) for line in data.splitlines() if line.strip()]
        if not events or events[0].get("cwd") != str(work):
            continue
        for event in events:
            if event["type"] == "tool/result":
                for block in event["data"]["message"]["content"]:
                    texts = [b.get("text", "") for b in block.get("content", []) if b.get("type") == "text"]
                    answers.append("".join(texts))
    return answers


def lines(path: Path) -> int:
    """Number of lines in a counter file (0 when absent)."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def main() -> int:
    """Record, stop the service, replay; print the table; exit 1 on any difference."""
    work = Path(tempfile.mkdtemp(prefix="dsh-sidecar-demo-"))
    requests_log, bodies_log = work / "http-requests.log", work / "tool-bodies.log"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(requests_log)], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = int(server.stdout.readline())
    print(f"demo: weather service on 127.0.0.1:{port}; working directory {work.name}")

    print(f"demo: 1/2 record   dsh --profile headless '{TASK}'")
    record = run_dsh(work, patch(work, "record", port))
    record_bodies, record_requests = lines(bodies_log), lines(requests_log)
    server.terminate()
    server.wait()
    print("demo: weather service stopped")

    verify = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dsh-tool-cassette"), "verify", "weather.cassette.ndjson"],
        cwd=work, capture_output=True, text=True,
    )
    print(f"demo: verify -> {verify.stdout.strip() or verify.stderr.strip()}")

    print(f"demo: 2/2 replay   dsh --profile headless '{TASK}'")
    replay = run_dsh(work, patch(work, "replay", port))
    replay_bodies = lines(bodies_log) - record_bodies
    replay_requests = lines(requests_log) - record_requests

    answers = tool_answer(work)
    rec_answer = answers[0] if answers else "(none)"
    rep_answer = answers[1] if len(answers) > 1 else "(none)"
    consumed = next((ln for ln in replay.stderr.splitlines() if "tool cassette replay" in ln), "")
    rows = [
        ("exit code", record.returncode, replay.returncode, (0, 0)),
        ("tool body runs", record_bodies, replay_bodies, (1, 0)),
        ("HTTP requests", record_requests, replay_requests, (1, 0)),
    ]
    print()
    print(f"{'':24}{'record':>10}{'replay':>10}   expected")
    ok = True
    for name, rec, rep, expected in rows:
        good = (rec, rep) == expected
        ok &= good
        print(f"{name:24}{rec:>10}{rep:>10}   {expected[0]} / {expected[1]}{'' if good else '   <-- DIFFERS'}")
    same = rec_answer == rep_answer and rec_answer != "(none)"
    ok &= same and record.stdout == replay.stdout and verify.returncode == 0
    print(f"{'tool answer':24}{rec_answer!r} / {rep_answer!r}  {'same' if same else 'DIFFERS'}")
    print(f"{'final answer':24}{record.stdout.strip()!r} / {replay.stdout.strip()!r}")
    all_consumed = "1 consumed, 0 unconsumed, poisoned: no" in consumed
    ok &= all_consumed
    print(f"{'records consumed':24}{consumed.removeprefix('dsh-sidecar: ') or '(no summary)'}")
    if not ok:
        print("\ndemo: FAILED; stderr of the runs follows", file=sys.stderr)
        print(record.stderr[-3000:], replay.stderr[-3000:], file=sys.stderr)
        return 1
    print("\ndemo: ok: recorded once, replayed offline with zero real tool calls")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
