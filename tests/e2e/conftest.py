"""Fixtures for end-to-end tests against the real DSH 0.1.0-rc.8 host, headless.

``scripts/test`` bootstraps ``.host`` (Node, pnpm, dsh with the hmr fix) and installs the shim
and the example tools plugin into the headless profile with ``dsh plugin add``. Most tests use
the pytest plugin's ``dsh`` fixture (``bridge.api.pytest_plugin``: the run API, typed results); the
``raw_dsh``/``make_dsh`` fixtures here write a hand-made ``--patch`` layer and run ``dsh``
directly, for what the run API does not model on purpose: signals sent to a running DSH, a
sidecar row the API would never write (an unknown key, the engine's own record mode).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from dshrun import DSH, DSH_HOME, Dsh
from test_readme import Session

from dsh_sidecar.bridge.api.warm_pool import WarmPool


@pytest.fixture(scope="session", autouse=True)
def _host_ready() -> None:
    if not (DSH.exists() and (DSH_HOME / "profiles/headless/node_modules/dsh-sidecar-shim").is_dir()):
        pytest.fail("the DSH host is not set up: run scripts/test (it bootstraps .host)")


@pytest.fixture
def make_dsh(tmp_path: Path) -> Callable[..., Dsh]:
    """Factory: a ``Dsh`` runner in a fresh working directory."""
    counter = iter(range(1000))

    def make(**kwargs: Any) -> Dsh:
        cwd = tmp_path / f"work{next(counter)}"
        cwd.mkdir()
        return Dsh(cwd=cwd, **kwargs)

    return make


@pytest.fixture
def raw_dsh(make_dsh: Callable[..., Dsh]) -> Dsh:
    """A default raw runner: sidecar row (trace on) and example tools enabled."""
    return make_dsh()


@pytest.fixture(scope="module")
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Session:
    """The shell session a docs page's examples run in (``test_readme.py`` and the ``*_doc.py``
    modules): the module's ``RUN`` blocks, in order, once, in a fresh project folder."""
    work = tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2].removeprefix("test_")) / "project"
    work.mkdir()
    return Session(work, request.module.RUN)


@pytest.fixture
def pool() -> Iterator[WarmPool]:
    """A warm pool of this test's own, closed after it."""
    with WarmPool() as warm:
        yield warm


@pytest.fixture
def store() -> Iterator[str]:
    """A store name of this test's own under the checkout's shared DSH home, removed after it."""
    name = f"test-store-{secrets.token_hex(4)}"
    yield name
    shutil.rmtree(DSH_HOME / name, ignore_errors=True)
