"""Markers by folder, and the slow modules first.

What needs the bootstrapped host (``.host``: DSH rc.8 and its Node) is marked ``e2e``, so
``pytest -m "not e2e"`` is the hermetic set: ``tests/e2e`` (real DSH headless, ``dsh web`` in
Chromium), ``tests/examples`` (the README's plugin example through the ``dsh`` fixture) and
``tests/shim`` (the shim's ``node --test`` files, its type check, the installed shim). ``tests/unit``,
``tests/bridge`` and ``tests/fuzz`` need only this checkout.

The host's DSH home (``.host/dsh-home``) is shared by every test that runs DSH, in every xdist
worker; a test marked ``writes_dsh_home`` changes it (``dsh-sidecar install`` into it: rc.8's
``plugin add`` removes the installed package before it writes the new one), so it runs alone:
the others hold a shared lock on the home for their setup, call and teardown, it holds it
exclusively, and a turnstile keeps new readers out while it waits (no writer starves).

rc.8 leaves an empty ``dsh-spill-*`` folder in the temporary folder at every boot: the processes
the tests start get a temporary folder of this pytest process's own (``TMPDIR``), removed at its end.

Modules holding a test marked ``slow`` are collected first, each module's tests still together
and in their order: under ``pytest -n 2 --dist loadfile`` (``scripts/test``) the long modules
start at once instead of leaving one worker alone with the last of them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
NEEDS_HOST = frozenset({"e2e", "examples", "shim"})
HOME_LOCK = TESTS.parent / ".host" / "dsh-home.lock"
TURNSTILE = TESTS.parent / ".host" / "dsh-home.turnstile.lock"


def pytest_configure(config: pytest.Config) -> None:
    # tempfile's own folder is fixed at its first use (pytest's tmp_path is not moved by this).
    spill = tempfile.mkdtemp(prefix="dsh-tests-tmp-", dir=tempfile.gettempdir())
    config.stash[_SPILL] = (spill, os.environ.get("TMPDIR"))
    os.environ["TMPDIR"] = spill


def pytest_unconfigure(config: pytest.Config) -> None:
    spill, before = config.stash[_SPILL]
    if before is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before
    shutil.rmtree(spill, ignore_errors=True)


_SPILL = pytest.StashKey[tuple[str, str | None]]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow_modules = set()
    for item in items:
        if item.path.is_relative_to(TESTS) and item.path.relative_to(TESTS).parts[0] in NEEDS_HOST:
            item.add_marker(pytest.mark.e2e)
        if item.get_closest_marker("slow") is not None:
            slow_modules.add(item.path)
    items.sort(key=lambda item: item.path not in slow_modules)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("e2e") is None or not HOME_LOCK.parent.is_dir():
        return (yield)
    exclusive = item.get_closest_marker("writes_dsh_home") is not None
    with TURNSTILE.open("a") as turnstile, HOME_LOCK.open("a") as home:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(home, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
        return (yield)
