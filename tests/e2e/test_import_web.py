"""``dsh-sidecar import`` of a real `dsh web` session: refused by name, because it cannot replay headless.

A user's `dsh web` session as it exists: rc.8's web profile (no sidecar row) against the loopback
``deepseek_server`` through the stock ``deepseek-official`` route, two tasks typed into the real
composer in Debian's Chromium (the first calls ``weather_lookup``), synchronized on DOM
conditions and on the session log itself. rc.8 writes it where headless writes its sessions:
``$DSH_HOME/sessions/<project key of the workspace>/<session id>/session.jsonl.zstd``.

The import refuses it whole (``IMPORT_UNFAITHFUL: profile``), with or without ``--turn 1``, and
writes nothing. Why that is honest: the same turn's cassette, built past the refusal with the
importer's own functions, replays through real headless DSH with the provider stopped as a
``MODEL_CASSETTE_MISMATCH`` naming the system prompt and the tools, with no provider request
(the figures are in docs/import.md, "A `dsh web` session").
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from deepseek_server import WEATHER_TASK, dead_url, deepseek_server
from dshrun import ROOT, wait_for
from playwright.sync_api import Page, expect, sync_playwright
from weather_service import weather_service
from web_host import CHROMIUM, CHROMIUM_FLAGS, WAIT_MS, open_composer, web_host

from dsh_sidecar.bridge.api.run import ModelCassette, Row, run
from dsh_sidecar.python_core.session_import import calls_of, model_lines, one_turn, write_lines
from dsh_sidecar.python_core.session_log import (
    SessionLogInvalid,
    project_key,
    read_session_log,
)

pytestmark = pytest.mark.slow  # dsh web and Chromium

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
CANARY = "sk-canary-import-web-7c2a"
ANSWER, FOLLOW_UP, SECOND_ANSWER = "It is sunny in Paris, 21C.", "What should I take with me?", "Take sunglasses."
SCRIPT = {"title": "Paris weather", "conversations": [{"match": "weather in", "replies": [
    {"tool_calls": [{"name": "weather_lookup", "arguments": {"city": "Paris"}}]},
    {"text": ANSWER},
    {"text": SECOND_ANSWER},
]}]}


def _ask(page: Page, task: str, answer: str) -> None:
    """Type ``task`` into the real composer, submit it, and wait until its turn has settled."""
    composer = page.locator("textarea").first
    composer.fill(task)
    expect(composer).to_have_value(task)
    composer.press("Enter")
    expect(page.get_by_text(answer, exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Stop generating")).to_have_count(0)


def _ended_turns(log: Path) -> int:
    try:
        events = read_session_log(log) if log.is_file() else []
    except SessionLogInvalid:
        return 0  # a frame mid-write
    return sum(1 for e in events if e.get("type") == "turn/end")


def test_a_dsh_web_session_is_refused_by_name_and_its_turn_would_not_replay_headless(tmp_path: Path) -> None:
    home, lived, out = tmp_path / "home", tmp_path / "lived", tmp_path / "out"
    for folder in (home, lived, out):
        folder.mkdir()
    expect.set_options(timeout=WAIT_MS)
    with deepseek_server(tmp_path, SCRIPT) as provider, weather_service(tmp_path) as weather:
        rows = [{"id": "example-tools", "name": "dsh-example-tools", "disabled": False,
                 "config": {"weatherUrl": weather.url}}]
        with web_host(home, lived, rows, provider.env(CANARY)) as web, sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
            errors: list[str] = []
            context, page = open_composer(browser, web, errors)
            _ask(page, WEATHER_TASK, ANSWER)
            expect(page.locator("[data-chat-flow-kind='tool-call'] [data-tool='weather_lookup']")).to_have_count(1)
            _ask(page, FOLLOW_UP, SECOND_ANSWER)
            context.close()
            browser.close()
            assert errors == [], errors
            # The log of the workspace's one session, once both turns have ended in it.
            logs = list((home / "sessions" / project_key(str(lived))).glob("session-*/session.jsonl.zstd"))
            assert len(logs) == 1, logs
            wait_for(lambda: _ended_turns(logs[0]) == 2)
        lived_requests = len(provider.requests())
    loop = [r for r in provider.requests() if r["kind"] == "conversation"]  # the title request may come first
    assert len(loop) == 3 and "weather_lookup" in loop[0]["tools"], [r["kind"] for r in provider.requests()]

    def imported(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SIDECAR_CLI, "import", "--last", "--cwd", str(lived), "--dsh-home", str(home), *args],
                              capture_output=True, text=True, timeout=60, cwd=out)

    for args in ([], ["--turn", "1"]):
        refused = imported(*args, "--test", "test_web.py")
        assert refused.returncode == 1 and refused.stdout == "", refused
        assert refused.stderr.startswith("dsh-sidecar: IMPORT_UNFAITHFUL: profile: the session ran in `dsh web`")
        assert "nothing was written; fix: run the task in headless DSH" in refused.stderr
        assert len(refused.stderr.splitlines()) == 1 and str(tmp_path) not in refused.stderr
    assert imported("--turn", "1", "--model-cassette", "model.ndjson").returncode == 1
    assert list(out.iterdir()) == []

    # Past the refusal, with the importer's own functions: turn 1 replayed headless, provider stopped.
    events = one_turn(read_session_log(logs[0]), 1)
    write_lines(str(out / "model.ndjson"), model_lines(calls_of(events), filters=()))
    with weather_service(tmp_path) as weather:
        replay = run(WEATHER_TASK, cwd=out, record_mode="none", env={"DEEPSEEK_BASE_URL": dead_url()},
                     rows=[Row("example-tools", "dsh-example-tools", {"weatherUrl": weather.url})],
                     model_cassette=ModelCassette(file="model.ndjson"))
    assert not replay.ok and replay.model_cassette is not None
    assert (replay.model_cassette.consumed, replay.model_cassette.unconsumed) == (0, 2)
    mismatch = next(e.message for e in replay.errors if e.code == "MODEL_CASSETTE_MISMATCH")
    # Five differences, the first four named: the web GUI's system prompt, its agent preset's tools
    # (ask_user_question, str_replace_editor, subagent_fork) and the web client's task (message 0).
    assert ("system prompt differs; tool ask_user_question missing; tool str_replace_editor added; tool "
            "subagent_fork definition differs; and 1 more") in mismatch, mismatch
    assert "no provider request was made" in mismatch
    assert len(provider.requests()) == lived_requests  # the stopped provider got nothing more
