"""Bridge tests run on asyncio, the backend ``python -m dsh_sidecar.bridge`` uses."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
