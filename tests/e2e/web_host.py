"""A real rc.8 `dsh web` on loopback and a Chromium page on its composer (shared by the web e2e tests).

`dsh web` runs with a DSH_HOME of the test's own whose `profiles` link to the bootstrapped host
(so the rows are the ones `dsh plugin add` installed) and whose sessions, workspaces and
settings start empty. A page gets empty browser storage (the app reopens the session its local
storage names, which would race with starting a new one); first-run dialogs are answered
whenever they show. Synchronization is by DOM conditions (Playwright waits), never sleeps.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from dshrun import DSH, DSH_HOME, HOST
from playwright.sync_api import Browser, BrowserContext, Page, expect

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
WAIT_MS = 60_000  # generous: the machine is shared; a wait ends as soon as its DOM condition holds
COMPOSER = "Describe what you want to build"


class WebHost:
    """A running `dsh web`, its home and the workspace directory its sessions use."""

    def __init__(self, url: str, home: Path, workspace: Path) -> None:
        self.url = url
        self.home = home
        self.workspace = workspace

    def script(self, name: str, *steps: Any) -> str:
        """Write a canonical mock script into the workspace; return its name for `/mock replay`."""
        body = {"type": "dsh-mock-script", "version": 1, "steps": list(steps)}
        (self.workspace / name).write_text(json.dumps(body))
        return name


@contextmanager
def web_host(home: Path, workspace: Path, rows: list[dict[str, Any]],
             env: dict[str, str] | None = None) -> Iterator[WebHost]:
    """Boot `dsh web` on a free loopback port in ``workspace`` with ``rows`` patched in and ``env``
    added (no key of the caller's environment); stop it and everything it spawned at the end."""
    (home / "profiles").symlink_to(DSH_HOME / "profiles")
    patch = home / "web-test.patch.yml"
    patch.write_text("".join(f"- {json.dumps(row)}\n" for row in rows))
    environ = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    environ.update(DSH_HOME=str(home), DSH_TELEMETRY_DISABLED="1",
                   PATH=f"{HOST / 'bin'}{os.pathsep}{environ['PATH']}", **(env or {}))
    log = (home / "dsh-web.log").open("w")
    proc = subprocess.Popen(
        [str(DSH), "web", "--patch", str(patch), "--no-open", "--host", "127.0.0.1", "--port", "0"],
        cwd=workspace, env=environ, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # blocks until the server prints its URL (or exits)
        found = re.match(r"dsh web: (http://127\.0\.0\.1:\d+)", first)
        if found is None:
            log.flush()
            pytest.fail(f"dsh web did not start: {first!r}\n{(home / 'dsh-web.log').read_text()[-3000:]}")
        yield WebHost(found.group(1), home, workspace)
    finally:
        # The whole group: dsh and what it spawned (started here, in their own session).
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def open_composer(browser: Browser, web: WebHost, errors: list[str]) -> tuple[BrowserContext, Page]:
    """A page on a new session's composer, in a browser context with empty storage; page errors
    are appended to ``errors``."""
    context = browser.new_context(viewport={"width": 1280, "height": 860}, locale="en-US")
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
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
    start = page.get_by_placeholder(re.compile(f"Choose a workspace to start|{COMPOSER}"))
    if start.get_attribute("placeholder") == "Choose a workspace to start":
        start.click()
    expect(page.get_by_placeholder(COMPOSER)).to_be_visible()
    return context, page
