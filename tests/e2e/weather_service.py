"""A local HTTP weather service for the real ``weather_lookup`` tool, counting its requests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

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


@dataclass
class Weather:
    """A running service: its URL and the file that counts its requests."""

    url: str
    log: Path

    @property
    def requests(self) -> int:
        """Requests answered so far."""
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


@contextmanager
def weather_service(folder: Path) -> Iterator[Weather]:
    """Run the service until the block ends (then it is stopped: nothing answers the URL)."""
    log = folder / "weather-requests.log"
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        yield Weather(url=f"http://127.0.0.1:{port}", log=log)
    finally:
        server.terminate()
        server.wait(timeout=10)
