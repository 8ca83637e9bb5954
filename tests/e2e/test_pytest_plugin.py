"""The pytest plugin as a user meets it: a project of its own, ``pip install``-registered plugin.

Each test copies the README's example (``tests/examples/test_weather.py``) into a fresh project
folder with its own ``pytest.ini`` and runs ``python -m pytest`` there, against real headless DSH
and a local weather service that is stopped before the offline runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from dshrun import DSH_HOME, ROOT, user_project, user_pytest
from trace_browser import trace_page
from weather_service import weather_service

EXAMPLE = ROOT / "tests" / "examples" / "test_weather.py"
CASSETTE = Path("cassettes") / "test_weather" / "test_paris_weather.tools.ndjson"


def _project(tmp_path: Path, weather_url: str) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copyfile(EXAMPLE, project / "test_weather.py")
    row = {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {"weatherUrl": weather_url}}
    (project / "tools.patch.yml").write_text(f"- {json.dumps(row)}\n")
    (project / "pytest.ini").write_text("[pytest]\ndsh_patches = tools.patch.yml\n")
    return project


def _pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dsh-host={ROOT / '.host'}", *args],
        cwd=project, capture_output=True, text=True, timeout=300,
    )


def test_the_example_records_once_then_passes_offline_and_under_xdist(tmp_path: Path) -> None:
    with weather_service(tmp_path) as service:
        project = _project(tmp_path, service.url)
        first = _pytest(project, "--dsh-record-mode", "once")
        assert first.returncode == 0, first.stdout[-3000:]
        assert service.requests == 1
    assert (project / CASSETTE).is_file()
    offline = _pytest(project, "--dsh-trace=on")
    assert offline.returncode == 0, offline.stdout[-3000:]
    assert "1 passed" in offline.stdout
    # --dsh-trace on: a passing test's trace too, each call served from the cassette.
    (page,) = (project / ".dsh-sidecar" / "traces").glob("*.html")
    (call,) = json.loads(page.with_suffix(".json").read_text())["runs"][0]["calls"]
    assert (call["tool"], call["source"], call["ordinal"], call["args"]) == ("weather_lookup", "served", 0,
                                                                            {"city": "Paris"})
    shutil.copyfile(project / "test_weather.py", project / "test_weather_copy.py")
    copy = project / "cassettes" / "test_weather_copy"
    copy.mkdir()
    shutil.copyfile(project / CASSETTE, copy / CASSETTE.name)
    parallel = _pytest(project, "-n", "2")
    assert parallel.returncode == 0, parallel.stdout[-3000:]
    assert "2 passed" in parallel.stdout
    assert service.requests == 1
    # The verdict per test, carried from the xdist workers to the controller.
    verdict = parallel.stdout.split("dsh-sidecar verdict", 1)[1].splitlines()[1:5]
    assert verdict[0].split() == ["test", "outcome", "calls", "served", "recorded", "live", "mismatched",
                                  "unconsumed", "stood", "up"]
    assert [line.split() for line in verdict[1:3]] == [
        [f"{name}::test_paris_weather", "passed", "1", "1", "0", "0", "0", "0", "0"]
        for name in ("test_weather.py", "test_weather_copy.py")
    ]
    assert verdict[3] == ("2 dsh tests · 2 runs · 2 tool calls · 2 served · 0 recorded · 0 live · 0 mismatched · "
                          "0 unconsumed · 0 stood up · 0 provider requests")
    assert "1 served" not in first.stdout and "1 recorded · 1 live" in first.stdout
    # The last pytest run's sessions are found from the project folder, by run or by test.
    cli = [str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "sessions", "list", "--dsh-home", str(DSH_HOME)]
    listed = subprocess.run([*cli, "--last-run"], cwd=project, capture_output=True, text=True, check=True)
    lines = listed.stdout.splitlines()
    assert sorted(line.split()[-1] for line in lines) == [
        "test_weather.py::test_paris_weather", "test_weather_copy.py::test_paris_weather"]
    assert all(line.startswith("session-") for line in lines)
    one = subprocess.run([*cli, "--test", "test_weather_copy.py"], cwd=project, capture_output=True, text=True,
                         check=True)
    assert [line.split()[-1] for line in one.stdout.splitlines()] == ["test_weather_copy.py::test_paris_weather"]
    shown = subprocess.run([str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "sessions", "show", "--dsh-home",
                            str(DSH_HOME), one.stdout.split()[0]], cwd=project, capture_output=True, text=True)
    assert shown.returncode == 0 and "weather_lookup" in shown.stdout, shown.stderr
    assert "dsh-sidecar verdict" not in _pytest(project, "--dsh-no-verdict").stdout


def _failure_block(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "test_paris_weather" in line and line.startswith("_"))
    end = next(i for i, line in enumerate(lines) if "dsh-sidecar verdict" in line or "short test summary" in line)
    return lines[start + 1:end]


def test_a_failed_replay_says_which_call_differed_and_how_to_re_record(tmp_path: Path) -> None:
    with weather_service(tmp_path) as service:
        project = _project(tmp_path, service.url)
        assert _pytest(project, "--dsh-record-mode", "once").returncode == 0
    test = project / "test_weather.py"
    test.write_text(test.read_text().replace('"city": "Paris"}', '"city": "Rome"}', 1))
    failed = _pytest(project)
    assert failed.returncode == 1
    block = _failure_block(failed.stdout)
    assert len(block) < 15, "\n".join(block)
    text = "\n".join(block)
    assert "CASSETTE_MISMATCH: weather_lookup at root/0, ordinal 0: args sha256:" in text
    assert "to re-record: pytest test_weather.py::test_paris_weather --dsh-record-mode all" in text
    assert not [line for line in block if "CASSETTE" in line and "Rome" in line]
    verdict = failed.stdout.split("dsh-sidecar verdict", 1)[1].splitlines()
    row = verdict[2].split()
    assert row[:-1] == ["test_weather.py::test_paris_weather", "failed", "1", "0", "0", "0", "1", "1", "0"]
    assert "    at " not in text
    # The failed test's trace (retain-on-failure, the default) is named in its report and the verdict,
    # and opens offline in Chromium with the recorded and the live value side by side.
    assert row[-1].startswith(".dsh-sidecar/traces/test_weather.py_test_paris_weather-") and row[-1].endswith(".html")
    assert f"trace: {row[-1]}" in text
    requests: list[str] = []
    with trace_page(project / row[-1], requests) as page:
        mismatch = page.locator("[data-test=mismatch]")
        assert "weather_lookup at root/0, ordinal 0" in mismatch.locator("h3").inner_text()
        assert mismatch.locator("[data-test=pointer-row] td").first.inner_text() == "/city"
        assert mismatch.locator("[data-test=recorded-value]").inner_text() == "Paris"
        assert mismatch.locator("[data-test=live-value]").inner_text() == "Rome"
        # The error sits in the call tree right under the call it refused.
        assert page.locator("[data-test=call-row] + [data-test=call-error]").inner_text().startswith(
            "CASSETTE_MISMATCH: weather_lookup at root/0, ordinal 0")
        page.locator("[data-test=call-row]").click()
        assert '"city": "Rome"' in page.locator("[data-test=call-args]").inner_text()
        if os.environ.get("DSH_SCREENSHOTS"):  # the README's pictures: DSH_SCREENSHOTS=docs/img
            folder = ROOT / os.environ["DSH_SCREENSHOTS"]
            page.screenshot(path=folder / "trace-failed-test.png", full_page=True)
            mismatch.screenshot(path=folder / "trace-mismatch.png")
    assert requests == []


def test_a_missing_cassette_fails_with_how_to_record_it(tmp_path: Path) -> None:
    project = _project(tmp_path, "http://127.0.0.1:9")
    failed = _pytest(project)
    assert failed.returncode == 1
    block = _failure_block(failed.stdout)
    assert block == [
        "CASSETTE_MISSING: toolCassette.file: test_paris_weather.tools.ndjson does not exist (record mode none); "
        "record it: pytest test_weather.py::test_paris_weather --dsh-record-mode once",
    ]
    assert not (project / "cassettes").exists() or not any((project / "cassettes").rglob("*.ndjson"))


_SHOW_HOST = """
def test_host(dsh_host):
    print("home:", dsh_host.dsh_home.name, "prefix:", dsh_host.prefix.name)
"""


def test_dsh_host_honours_dsh_home_as_dsh_sidecar_host_does(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_host.py").write_text(_SHOW_HOST)
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_SIDECAR_HOST", "PYTEST_ADDOPTS")}
    env["DSH_HOME"] = str(tmp_path / "my-home")
    by_option = subprocess.run([sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider",
                                f"--dsh-host={ROOT / '.host'}"], cwd=project, env=env, capture_output=True, text=True,
                               timeout=300)
    by_variable = subprocess.run([sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider"], cwd=project,
                                 env={**env, "DSH_SIDECAR_HOST": str(ROOT / ".host")}, capture_output=True, text=True,
                                 timeout=300)
    for done in (by_option, by_variable):
        assert done.returncode == 0, done.stdout[-2000:]
        assert "home: my-home prefix: .host" in done.stdout


def test_dsh_host_written_with_a_space_warns_that_the_project_ini_was_not_read(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_host.py").write_text(_SHOW_HOST)
    (project / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DSH_SIDECAR_HOST", "PYTEST_ADDOPTS", "DSH_HOME")}
    spaced = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--dsh-host",
                             str(ROOT / ".host")], cwd=project, env={**env, "COLUMNS": "300"}, capture_output=True,
                            text=True, timeout=300)
    assert spaced.returncode == 0, spaced.stdout[-2000:]
    assert "DSH_HOST_ROOTDIR: pytest took the value of `--dsh-host DIR` (written with a space)" in spaced.stdout
    joined = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dsh-host={ROOT / '.host'}"],
                            cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert joined.returncode == 0 and "DSH_HOST_ROOTDIR" not in joined.stdout, joined.stdout[-2000:]


_FAULTS_TESTS = '''
import pytest

FAULTS = {"name": "slow-echo", "rules": [{"tool": "echo", "code": "TIMEOUT", "message": "30s"}]}


@pytest.mark.dsh(config={"faults": FAULTS})
def test_a_timeout(dsh):
    result = dsh.run('/mock run echo({"text": "hi"})', tools=["echo"], check=False)
    print("RAN", result.tool_cassette.mode, result.result("echo").error_code)


@pytest.mark.dsh(config={"faults": {"name": "typo", "rules": [{"tol": "echo"}]}})
def test_a_bad_overlay(dsh):
    dsh.run('/mock run echo({"text": "hi"})', tools=["echo"])
'''


def test_a_fault_overlay_is_left_out_of_the_recording_once_and_applied_on_replay(tmp_path: Path) -> None:
    project = user_project(tmp_path, _FAULTS_TESTS)
    recorded = user_pytest(project, "-s", "-rA", "--dsh-record-mode", "once")
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    assert "RAN record None" in recorded.stdout
    assert recorded.stdout.count("FaultsLeftOut: FAULTS_LEFT_OUT: toolCassette.faults: the fault overlay slow-echo "
                                 "applies on replay only; this recording of test_a_timeout.tools.ndjson ran without "
                                 "it, and a replay of it applies it") == 1
    replayed = user_pytest(project, "-s", "-rA")
    assert replayed.returncode == 1, replayed.stdout[-3000:]
    assert "RAN replay TIMEOUT" in replayed.stdout
    assert "FAULTS_LEFT_OUT" not in replayed.stdout
    assert ("    fix: correct the `faults` key of the dsh_config fixture or "
            "@pytest.mark.dsh(config={...})") in replayed.stdout
    assert "cordis.patch.yml" not in replayed.stdout


def test_ini_dsh_rows_give_every_test_its_rows_as_lines_or_a_file_and_a_bad_line_fails_by_name(
    tmp_path: Path,
) -> None:
    with weather_service(tmp_path) as service:
        project = _project(tmp_path, service.url)
        row = {"id": "example-tools", "name": "dsh-example-tools", "config": {"weatherUrl": service.url}}
        (project / "pytest.ini").write_text(f"[pytest]\ndsh_rows =\n    {json.dumps(row)}\n")
        first = _pytest(project, "--dsh-record-mode", "once")
        assert first.returncode == 0, first.stdout[-3000:]
        assert service.requests == 1
    (project / "rows.json").write_text(json.dumps([row]))
    (project / "pytest.ini").write_text("[pytest]\ndsh_rows = rows.json\n")
    offline = _pytest(project)
    assert offline.returncode == 0 and "1 passed" in offline.stdout, offline.stdout[-3000:]
    (project / "pytest.ini").write_text('[pytest]\ndsh_rows = {"id": "example-tools"}\n')
    bad = _pytest(project)
    assert bad.returncode != 0
    assert ("INVALID_CONFIG: ini dsh_rows line 1 ('{\"id\": \"example-tools\"}'): Object missing required field "
            "`name`; fix: write a JSON row") in bad.stdout + bad.stderr, bad.stdout[-3000:]
