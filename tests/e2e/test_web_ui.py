"""The mock UI in the real rc.8 browser client (`dsh web`), driven in Debian's headless Chromium.

One `dsh web` per module on loopback, with a fresh DSH_HOME whose `profiles` link to the
bootstrapped host (so the shim and example tools rows are the ones `dsh plugin add` installed)
and whose sessions, workspaces and settings are empty. Each test types a `/mock replay` into the
real composer and reads the outcome from the DOM. Synchronization is by DOM conditions
(Playwright waits, a MutationObserver that records every label the row showed), never sleeps.
Screenshots of each state go to `artifacts/web-ui/` (gitignored).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dshrun import DSH, DSH_HOME, HOST, ROOT
from playwright.sync_api import Browser, Page, expect, sync_playwright

pytestmark = pytest.mark.slow  # dsh web and Chromium

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ARTIFACTS = ROOT / "artifacts" / "web-ui"
WAIT_MS = 60_000

# Every text the status row shows, in order, recorded in the page (a render between two polls
# is not missed).
RECORD_LABELS = """() => {
  window.__mockLabels = []
  const seen = () => {
    const el = document.querySelector('[data-mock-label]')
    const text = el === null ? null : el.textContent
    if (window.__mockLabels.at(-1) !== text) window.__mockLabels.push(text)
  }
  new MutationObserver(seen).observe(document.body, { subtree: true, childList: true, characterData: true })
}"""


class WebHost:
    """A running `dsh web` and the workspace directory its sessions use."""

    def __init__(self, url: str, workspace: Path) -> None:
        self.url = url
        self.workspace = workspace

    def script(self, name: str, *steps: Any) -> str:
        """Write a canonical script into the workspace; return its name for `/mock replay`."""
        body = {"type": "dsh-mock-script", "version": 1, "steps": list(steps)}
        (self.workspace / name).write_text(json.dumps(body))
        return name


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebHost]:
    """Boot `dsh web` on a free loopback port with the sidecar and example tools rows on."""
    home = tmp_path_factory.mktemp("dsh-home")
    (home / "profiles").symlink_to(DSH_HOME / "profiles")
    workspace = tmp_path_factory.mktemp("workspace")
    patch = home / "web-test.patch.yml"
    rows = [
        {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {}},
        {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": {}},
    ]
    patch.write_text("".join(f"- {json.dumps(row)}\n" for row in rows))
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env.update(DSH_HOME=str(home), DSH_TELEMETRY_DISABLED="1", PATH=f"{HOST / 'bin'}{os.pathsep}{env['PATH']}")
    log = (home / "dsh-web.log").open("w")
    proc = subprocess.Popen(
        [str(DSH), "web", "--patch", str(patch), "--no-open", "--host", "127.0.0.1", "--port", "0"],
        cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # blocks until the server prints its URL (or exits)
        found = re.match(r"dsh web: (http://127\.0\.0\.1:\d+)", first)
        if found is None:
            log.flush()
            pytest.fail(f"dsh web did not start: {first!r}\n{(home / 'dsh-web.log').read_text()[-3000:]}")
        yield WebHost(found.group(1), workspace)
    finally:
        # The whole group: dsh and the sidecar it spawned (started here, in their own session).
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless; Playwright gives it a fresh temporary profile directory."""
    # Generous: the machine is shared; a wait ends as soon as its DOM condition holds.
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, web: WebHost, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page on a new session's composer, in a browser context with empty storage.

    Empty storage per test: the app reopens the session named in its local storage, which
    would race with starting a new one. First-run dialogs are answered whenever they show.
    """
    (ARTIFACTS / "end").mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.add_locator_handler(page.get_by_role("button", name="Continue"), lambda button: button.click())
    picker = page.get_by_role("dialog", name="Select Workspace Directory")

    def choose_workspace(dialog: Any) -> None:
        dialog.get_by_role("button", name="Edit path").click()
        path = dialog.locator("input").first
        path.fill(str(web.workspace))
        path.press("Enter")
        # Exact: a breadcrumb or a row whose folder name holds "open" (xdist's `popen-gw1`) is a
        # button too, and a substring match then finds several.
        dialog.get_by_role("button", name="Open", exact=True).click()
        expect(dialog).to_be_hidden()

    page.add_locator_handler(picker, choose_workspace)
    page.goto(web.url)
    # Until the workspace list has loaded (or while none exists) the composer asks for one;
    # clicking it opens the picker, which chooses the test workspace (the same one again is a
    # no-op for DSH).
    start = page.get_by_placeholder(re.compile("Choose a workspace to start|Describe what you want to build"))
    if start.get_attribute("placeholder") == "Choose a workspace to start":
        start.click()
    expect(page.get_by_placeholder("Describe what you want to build")).to_be_visible()
    yield page
    # The last state of every test, failed or not, for the artifacts.
    page.screenshot(path=str(ARTIFACTS / "end" / f"{request.node.name}.png"))
    context.close()
    assert errors == [], errors


def send(page: Page, text: str) -> None:
    """Type ``text`` into the real composer and submit it with Enter."""
    composer = page.locator("textarea").first
    composer.click()
    composer.fill(text)
    expect(composer).to_have_value(text)
    page.evaluate(RECORD_LABELS)
    composer.press("Enter")


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def tool_cards(page: Page) -> list[str | None]:
    """The real DSH tool cards of the transcript, by tool name, in order."""
    cards = page.locator("[data-chat-flow-kind='tool-call'] [data-tool]")
    return [card.get_attribute("data-tool") for card in cards.all()]


def test_replay_shows_one_generic_row_counting_executable_steps_then_clears(page: Page, web: WebHost) -> None:
    name = web.script(
        "three-steps.json",
        {"tool": "sleepy", "args": {"label": "one", "ms": 300}},
        {"parallel": [{"tool": "echo", "args": {"text": "a"}}, {"tool": "sleepy", "args": {"label": "b", "ms": 300}}]},
        {"wait": 300},
        {"tool": "sleepy", "args": {"label": "three", "ms": 300}},
    )
    send(page, f"/mock replay {name}")

    row = page.locator("[data-mock-dock] [role='status']")
    expect(row).to_have_attribute("data-mock-step", "2")
    expect(row.locator(".dshsc-spin")).to_be_visible()
    shot(page, "replay-running")
    expect(page.get_by_text("mock replay complete: 3 steps, 4 tool calls")).to_be_visible()
    expect(page.locator("[data-mock-dock]")).to_have_count(0)
    shot(page, "replay-done")

    shown = [label for label in page.evaluate("window.__mockLabels") if label is not None]
    progress = [label for label in shown if "running" in label]
    assert progress == [f"Mock replay · {k}/3 · running" for k in (1, 2, 3)], shown
    assert not [label for label in shown if "parallel" in label.lower() or "/5" in label or "/4" in label], shown
    assert tool_cards(page) == ["sleepy", "echo", "sleepy", "sleepy"]
    assert page.locator("[data-mock-card]").count() == 0


def test_invalid_script_shows_its_card_with_the_location_and_no_tool_card(page: Page, web: WebHost) -> None:
    name = web.script("wait-first.json", {"wait": 5}, {"tool": "echo", "args": {"text": "never"}})
    send(page, f"/mock replay {name}")

    card = page.locator("[data-mock-card='invalid-script']")
    expect(card).to_be_visible()
    expect(card).to_contain_text("Mock script invalid · INVALID_SCRIPT")
    expect(card.locator("[data-mock-location]")).to_have_text("wait-first.json at /steps/0")
    expect(card.locator("[data-mock-no-tool]")).to_have_text("No tool ran.")
    expect(card).to_have_attribute("role", "alert")
    expect(page.locator("[data-mock-dock]")).to_have_count(0)
    shot(page, "invalid-script")
    assert tool_cards(page) == []


def test_unknown_tool_shows_the_stop_card_beside_the_real_failed_tool_card(page: Page, web: WebHost) -> None:
    name = web.script(
        "unknown-tool.json",
        {"tool": "echo", "args": {"text": "first"}},
        {"tool": "no_such_tool", "args": {}},
        {"tool": "echo", "args": {"text": "never"}},
    )
    send(page, f"/mock replay {name}")

    card = page.locator("[data-mock-card='tool-stop']")
    expect(card).to_be_visible()
    expect(card).to_have_attribute("data-mock-tool", "no_such_tool")
    expect(card).to_contain_text("Mock replay stopped · UNKNOWN_TOOL")
    expect(card).to_contain_text("Step 2 of 3: no_such_tool failed with runtime code UNKNOWN_TOOL.")
    expect(card).to_contain_text("Later steps stopped: 1.")
    expect(page.locator("[data-mock-dock]")).to_have_count(0)
    shot(page, "unknown-tool-stop")
    assert tool_cards(page) == ["echo", "no_such_tool"]
    # The stop card follows the real failed tool card in the transcript.
    failed = page.locator("[data-chat-flow-kind='tool-call']").last
    follows = "(el, card) => !!(el.compareDocumentPosition(card) & Node.DOCUMENT_POSITION_FOLLOWING)"
    assert failed.evaluate(follows, card.element_handle())


def test_invalid_command_is_refused_by_the_command_itself_and_starts_no_turn(page: Page) -> None:
    send(page, '/mock run echo({"text": "ok"})')
    expect(page.get_by_text("mock run complete: 1 step, 1 tool call")).to_be_visible()
    send(page, '/mock run echo({"text": nope})')

    refused = page.locator("[data-chat-flow-kind='command'] [data-error='true']")
    expect(refused).to_contain_text(re.compile(r"INVALID_COMMAND: .*not valid JSON.*\(column 20\)"))
    shot(page, "invalid-command")
    expect(page.locator("[data-mock-dock]")).to_have_count(0)
    assert tool_cards(page) == ["echo"]
    assert page.locator("[data-mock-card]").count() == 0


def test_cancelling_during_a_wait_ends_the_row_as_cancelled_never_completed(page: Page, web: WebHost) -> None:
    name = web.script(
        "long-wait.json",
        {"tool": "echo", "args": {"text": "first"}},
        {"wait": 60_000},
        {"tool": "echo", "args": {"text": "never"}},
    )
    send(page, f"/mock replay {name}")
    expect(page.locator("[data-chat-flow-kind='tool-call'] [data-tool='echo']")).to_have_count(1)
    expect(page.locator("[data-mock-dock] [role='status']")).to_have_attribute("data-mock-step", "1")

    page.get_by_role("button", name="Stop generating").click()
    expect(page.locator("[data-mock-dock]")).to_have_count(0)
    shot(page, "cancelled-settled")

    shown = [label for label in page.evaluate("window.__mockLabels") if label is not None]
    assert shown[-1] == "Mock replay · 1/2 · cancelled", shown
    assert not [label for label in shown if "completed" in label], shown
    assert tool_cards(page) == ["echo"]
    assert page.locator("[data-mock-card]").count() == 0
