"""``dsh-sidecar import``: an ordinary session, run with no cassette at all, replays offline.

The session is what a user has: a real headless DSH rc.8 turn against the stock
``deepseek-official`` route (pointed at the loopback ``deepseek_server``) with no sidecar
cassette. The CLI imports it by id into a model cassette; the provider is then stopped and the
same task replays from another folder through real DSH with no provider request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deepseek_server import WEATHER_SCRIPT, WEATHER_TASK, dead_url, deepseek_server
from dshrun import DSH_HOME, ROOT
from weather_service import weather_service

from dsh_sidecar.bridge.api.run import ModelCassette, Row, run

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
CANARY = "sk-canary-import-5d1e"


def _tools(url: str) -> list[Row]:
    return [Row("example-tools", "dsh-example-tools", {"weatherUrl": url})]


def test_an_ordinary_session_imports_and_replays_offline_with_no_provider_request(tmp_path: Path) -> None:
    lived, replayed = tmp_path / "lived", tmp_path / "replayed"
    lived.mkdir()
    replayed.mkdir()
    with deepseek_server(tmp_path, WEATHER_SCRIPT) as provider, weather_service(tmp_path) as weather:
        live = run(WEATHER_TASK, cwd=lived, rows=_tools(weather.url), env=provider.env(CANARY))
    assert live.ok, live.explain()
    assert live.model_cassette is None and live.session_id is not None
    live_requests = len(provider.requests())
    assert live_requests == 3  # two loop steps and the session title

    cassette = replayed / "model.ndjson"
    imported = subprocess.run(
        [SIDECAR_CLI, "import", live.session_id, "--cwd", str(lived), "--dsh-home", str(DSH_HOME),
         "--model-cassette", str(cassette)], capture_output=True, text=True, timeout=60,
    )
    assert imported.returncode == 0, imported.stderr
    assert "2 calls (model 2); left out session-title#0" in imported.stdout
    assert "valid: dsh-model-cassette v2: 2 calls (model 2), 4 frames, complete tail" in imported.stdout
    data = cassette.read_text()
    assert CANARY not in data and str(tmp_path) not in data and provider.url not in data and "127.0.0.1" not in data

    # The same session as a pytest module (--test): it passes offline in a project composing the tools.
    project = tmp_path / "project"
    project.mkdir()
    generated = subprocess.run(
        [SIDECAR_CLI, "import", live.session_id, "--cwd", str(lived), "--dsh-home", str(DSH_HOME),
         "--test", str(project / "test_paris.py")], capture_output=True, text=True, timeout=60,
    )
    assert generated.returncode == 0, generated.stderr
    name = "test_session_" + live.session_id.removeprefix("session-")[:8]
    assert (project / "cassettes" / "test_paris" / f"{name}.model.ndjson").read_text() == data

    with weather_service(tmp_path) as weather:  # no tool cassette: the tool body runs again
        row = {"id": "example-tools", "name": "dsh-example-tools", "disabled": False,
               "config": {"weatherUrl": weather.url}}
        (project / "tools.patch.yml").write_text(f"- {json.dumps(row)}\n")
        (project / "pytest.ini").write_text("[pytest]\ndsh_patches = tools.patch.yml\n")
        offline = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dsh-host={ROOT / '.host'}"], cwd=project,
            capture_output=True, text=True, timeout=300, env={**os.environ, "DEEPSEEK_BASE_URL": dead_url()},
        )
        assert offline.returncode == 0, offline.stdout[-3000:]
        assert "1 passed" in offline.stdout
        replay = run(WEATHER_TASK, cwd=replayed, rows=_tools(weather.url), record_mode="none",
                     model_cassette=ModelCassette(file="model.ndjson", options={"filters": ["credentials"]}),
                     env={"DEEPSEEK_BASE_URL": dead_url()})
    assert replay.ok, replay.explain()
    assert len(provider.requests()) == live_requests  # the stopped provider got nothing more
    assert replay.model_cassette is not None
    assert (replay.model_cassette.mode, replay.model_cassette.consumed, replay.model_cassette.unconsumed) == (
        "replay", 2, 0)
    assert replay.final_text == live.final_text == "It is sunny in Paris, 21C."
    assert replay.result("weather_lookup").output == live.result("weather_lookup").output
