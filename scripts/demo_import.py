"""The import demo: a session run with no sidecar at all becomes an offline pytest test.

1. Plain ``dsh --profile headless TASK`` (the example weather tool enabled by a patch, no sidecar
   row, no cassette) against the project's loopback DeepSeek-compatible provider
   (``tests/e2e/deepseek_server.py``) and a local weather service: the way a user's session exists.
2. ``dsh-sidecar import --last --test ... --tools weather_lookup``: a pytest module, its model
   cassette and its tool cassette.
3. The provider and the weather service are stopped; ``pytest`` runs the generated module through
   real headless DSH. Exit 0 only when it passes with zero provider requests and zero weather
   requests.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "scripts")]

from deepseek_server import WEATHER_SCRIPT, WEATHER_TASK, dead_url, deepseek_server  # noqa: E402
from demo import SERVER, lines  # noqa: E402

from dsh_sidecar.bridge.api.compose import private_home  # noqa: E402

DSH = ROOT / ".host" / "bin" / "dsh"
HOME = ROOT / ".host" / "dsh-home"
SIDECAR = ROOT / ".venv" / "bin" / "dsh-sidecar"


def _tools_patch(folder: Path, weather_url: str) -> Path:
    row = {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {"weatherUrl": weather_url}}
    (folder / "tools.patch.yml").write_text(f"- {json.dumps(row)}\n")
    return folder / "tools.patch.yml"


def main() -> int:
    """Run, import, stop both services, replay; print the table; exit 1 on any difference."""
    work = Path(tempfile.mkdtemp(prefix="dsh-sidecar-demo-import-"))
    lived, project = work / "lived", work / "project"
    lived.mkdir()
    project.mkdir()
    weather_log = work / "weather-requests.log"
    weather = subprocess.Popen([sys.executable, "-c", SERVER, str(weather_log)], stdout=subprocess.PIPE, text=True)
    assert weather.stdout is not None
    weather_url = f"http://127.0.0.1:{int(weather.stdout.readline())}"
    with deepseek_server(work, WEATHER_SCRIPT) as provider:
        print(f"demo-import: 1/3 dsh --profile headless '{WEATHER_TASK}'  (loopback provider, no sidecar)")
        # A DSH home of this run's own whose sessions are the project host's (rc.8 rewrites the
        # profile's cordis.yml at every boot: two boots in one home race on it).
        home = private_home(HOME, "headless", Path(tempfile.mkdtemp(dir=work)), HOME / "sessions")
        live = subprocess.run([str(DSH), "--profile", "headless", "--patch", str(_tools_patch(work, weather_url)),
                               WEATHER_TASK], cwd=lived, capture_output=True, text=True, timeout=120,
                              env={**os.environ, **provider.env("sk-demo-not-a-key"), "DSH_HOME": str(home)})
        live_requests = len(provider.requests())
    weather.terminate()
    weather.wait()
    live_weather = lines(weather_log)
    print(f"demo-import:      {live.stdout.strip()!r}  (exit {live.returncode})")

    print("demo-import: 2/3 dsh-sidecar import --last --test project/test_paris.py --tools weather_lookup")
    imported = subprocess.run([str(SIDECAR), "import", "--last", "--cwd", str(lived), "--dsh-home", str(HOME), "--test",
                               str(project / "test_paris.py"), "--tools", "weather_lookup"],
                              capture_output=True, text=True, timeout=60)
    for line in (imported.stdout + imported.stderr).splitlines():
        print(f"demo-import:      {line.replace(str(work) + os.sep, '')}")

    print("demo-import: 3/3 pytest project/test_paris.py  (provider and weather service stopped)")
    _tools_patch(project, dead_url())
    (project / "pytest.ini").write_text("[pytest]\ndsh_patches = tools.patch.yml\n")
    tested = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             f"--dsh-host={ROOT / '.host'}"], cwd=project, capture_output=True, text=True,
                            timeout=300, env={**os.environ, "DEEPSEEK_BASE_URL": dead_url()})
    ran = re.compile(r"=* ?\d+ (passed|failed)")
    summary = next((line for line in reversed(tested.stdout.splitlines()) if ran.match(line)), "")
    verdict = next((line for line in tested.stdout.splitlines() if line.startswith("1 dsh tests")), "")
    print(f"demo-import:      {summary.strip('= ')}; {verdict}")

    rows = [("provider requests", live_requests, len(provider.requests()) - live_requests, (3, 0)),
            ("weather requests", live_weather, lines(weather_log) - live_weather, (1, 0))]
    print(f"\n{'':24}{'session':>10}{'replay':>10}   expected")
    ok = live.returncode == 0 and imported.returncode == 0 and tested.returncode == 0 and "1 passed" in summary
    for name, before, after, expected in rows:
        good = (before, after) == expected
        ok &= good
        print(f"{name:24}{before:>10}{after:>10}   {expected[0]} / {expected[1]}{'' if good else '   <-- DIFFERS'}")
    if not ok:
        print("\ndemo-import: FAILED", file=sys.stderr)
        print(live.stderr[-2000:], imported.stderr[-2000:], tested.stdout[-4000:], sep="\n", file=sys.stderr)
        return 1
    print("\ndemo-import: ok: a session run with no sidecar replayed as a pytest test, offline, no tool body")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
