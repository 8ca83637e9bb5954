"""The mock UI in the real rc.8 browser client (`dsh web`), driven in Debian's headless Chromium.

One `dsh web` per module on loopback (``web_host``: a fresh DSH_HOME linking the bootstrapped
host's profiles, empty sessions, workspaces and settings). Each test types a `/mock replay` into the
real composer and reads the outcome from the DOM. Synchronization is by DOM conditions
(Playwright waits, a MutationObserver that records every label the row showed), never sleeps.
Screenshots of each state go to `artifacts/web-ui/` (gitignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from dshrun import ROOT
from playwright.sync_api import Browser, Page, expect, sync_playwright
from web_host import CHROMIUM, CHROMIUM_FLAGS, WAIT_MS, WebHost, open_composer, web_host

pytestmark = pytest.mark.slow  # dsh web and Chromium

ARTIFACTS = ROOT / "artifacts" / "web-ui"

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


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebHost]:
    """Boot `dsh web` on a free loopback port with the sidecar and example tools rows on."""
    rows = [
        {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {}},
        {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": {}},
    ]
    with web_host(tmp_path_factory.mktemp("dsh-home"), tmp_path_factory.mktemp("workspace"), rows) as host:
        yield host


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless; Playwright gives it a fresh temporary profile directory."""
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, web: WebHost, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page on a new session's composer, in a browser context with empty storage."""
    (ARTIFACTS / "end").mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    context, page = open_composer(browser, web, errors)
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
