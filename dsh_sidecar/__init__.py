"""dsh-sidecar: record/replay and deterministic tests for DeepSeek Harness rc.8 agents.

The distribution has this one import name. Its parts keep the repository's layout:
``dsh_sidecar.bridge`` (transport, run API, pytest plugin), ``dsh_sidecar.python_core``
(logic) and ``dsh_sidecar.node_shim`` (the DSH plugin's files). The run API is re-exported
here and imported on first use, so ``python -m dsh_sidecar.bridge`` starts without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dsh_sidecar.python_core import __version__

if TYPE_CHECKING:
    from dsh_sidecar.bridge.api.run import (
        CassetteMissing,
        CassetteSummary,
        Diagnostic,
        HostNotFound,
        ModelCassette,
        RecordMode,
        Row,
        RunFailed,
        RunResult,
        StubFailure,
        SubagentCassette,
        ToolCall,
        ToolCassette,
        ToolResult,
        TraceLater,
        WarmPool,
        run,
    )

__all__ = [
    "CassetteMissing",
    "CassetteSummary",
    "Diagnostic",
    "HostNotFound",
    "ModelCassette",
    "RecordMode",
    "Row",
    "RunFailed",
    "RunResult",
    "StubFailure",
    "SubagentCassette",
    "ToolCall",
    "ToolCassette",
    "ToolResult",
    "TraceLater",
    "WarmPool",
    "__version__",
    "run",
]


def __getattr__(name: str) -> Any:
    """Import the run API on first use of one of its names (PEP 562)."""
    if name in __all__:
        return getattr(importlib.import_module("dsh_sidecar.bridge.api.run"), name)
    raise AttributeError(f"module 'dsh_sidecar' has no attribute {name!r}")
