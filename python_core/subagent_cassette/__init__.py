"""Subagent cassette: record and replay DSH rc.8 one-shot subagent runs at ``provider.start()``.

Layers import downward: ``cli`` -> ``engine``/``diff``/``reseal`` -> ``store`` ->
``identity``/``redact`` -> ``format`` -> ``python_core.canonical``; ``host`` (the host's raw parent facts to a
``StartRequest``) -> ``identity``.
"""

from dsh_sidecar.python_core.subagent_cassette.config import CassetteConfig, parse_config, parse_fields
from dsh_sidecar.python_core.subagent_cassette.engine import (
    CallHandle,
    CloseReport,
    Forward,
    Miss,
    Replay,
    SettledRun,
    SubagentCassetteEngine,
    Upstream,
)
from dsh_sidecar.python_core.subagent_cassette.identity import StartRequest

__all__ = [
    "CallHandle",
    "CassetteConfig",
    "CloseReport",
    "Forward",
    "Miss",
    "Replay",
    "SettledRun",
    "StartRequest",
    "SubagentCassetteEngine",
    "Upstream",
    "parse_config",
    "parse_fields",
]
