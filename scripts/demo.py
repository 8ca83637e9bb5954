"""The demo: record a real local tool through headless DSH rc.8, stop its service, replay offline.

No model and no key: the sidecar's mock route drives the turn (``/mock run``). A local HTTP
weather service answers the ``weather_lookup`` tool while recording; then the service is
stopped and the same run is replayed from the cassette with zero real calls. Both runs go
through the run API (``bridge.api.run``), the same one the pytest plugin uses.
Exit 0 only when every count matches what a cassette promises.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dsh_sidecar.bridge.api.run import Row, ToolCassette, run

ROOT = Path(__file__).resolve().parents[1]
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
    # The run API writes the --patch layer: the sidecar row with the cassette, and the tools row.
    rows = [Row("example-tools", "dsh-example-tools", {"weatherUrl": f"http://127.0.0.1:{port}"})]
    cassette = ToolCassette(file="weather.cassette.ndjson", include=["weather_lookup"])

    print(f"demo: 1/2 record   dsh --profile headless '{TASK}'  (record mode once: the cassette is missing)")
    record = run(TASK, cwd=work, rows=rows, tool_cassette=cassette, record_mode="once")
    record_bodies, record_requests = lines(bodies_log), lines(requests_log)
    server.terminate()
    server.wait()
    print("demo: weather service stopped")

    verify = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "dsh-tool-cassette"), "verify", "weather.cassette.ndjson"],
        cwd=work, capture_output=True, text=True,
    )
    print(f"demo: verify -> {verify.stdout.strip() or verify.stderr.strip()}")

    print(f"demo: 2/2 replay   dsh --profile headless '{TASK}'  (record mode none: replay only)")
    replay = run(TASK, cwd=work, rows=rows, tool_cassette=cassette, record_mode="none")
    replay_bodies = lines(bodies_log) - record_bodies
    replay_requests = lines(requests_log) - record_requests

    rec_answer = record.results("weather_lookup")[0].output if record.results("weather_lookup") else "(none)"
    rep_answer = replay.results("weather_lookup")[0].output if replay.results("weather_lookup") else "(none)"
    rows_out = [
        ("exit code", record.exit_code, replay.exit_code, (0, 0)),
        ("tool body runs", record_bodies, replay_bodies, (1, 0)),
        ("HTTP requests", record_requests, replay_requests, (1, 0)),
    ]
    print()
    print(f"{'':24}{'record':>10}{'replay':>10}   expected")
    ok = True
    for name, rec, rep, expected in rows_out:
        good = (rec, rep) == expected
        ok &= good
        print(f"{name:24}{rec:>10}{rep:>10}   {expected[0]} / {expected[1]}{'' if good else '   <-- DIFFERS'}")
    same = rec_answer == rep_answer and rec_answer != "(none)"
    ok &= same and record.final_text == replay.final_text and verify.returncode == 0
    print(f"{'tool answer':24}{rec_answer!r} / {rep_answer!r}  {'same' if same else 'DIFFERS'}")
    print(f"{'final answer':24}{record.final_text!r} / {replay.final_text!r}")
    summary = replay.tool_cassette
    all_consumed = summary is not None and (summary.consumed, summary.unconsumed, summary.poisoned) == (1, 0, False)
    ok &= all_consumed
    consumed = "(no summary)" if summary is None else (
        f"{summary.consumed} consumed, {summary.unconsumed} unconsumed, poisoned: {'yes' if summary.poisoned else 'no'}"
    )
    print(f"{'records consumed':24}{consumed}")
    if not ok:
        print("\ndemo: FAILED", file=sys.stderr)
        print(record.explain(), replay.explain(), sep="\n", file=sys.stderr)
        return 1
    print("\ndemo: ok: recorded once, replayed offline with zero real tool calls")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
