"""A trace page opened in Debian's headless Chromium from ``file://``, with every request counted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def trace_page(path: Path, requests: list[str]) -> Iterator[Page]:
    """The page rendered (``body[data-ready]``); ``requests`` receives every URL it asked for
    besides the file itself, and every script error (a page that throws is not rendered)."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            own = path.resolve().as_uri()
            page.on("request", lambda r: None if r.url == own else requests.append(r.url))
            page.on("pageerror", lambda e: requests.append(f"error: {e}"))
            page.goto(own)
            page.wait_for_selector("body[data-ready='1']")
            yield page
        finally:
            browser.close()
