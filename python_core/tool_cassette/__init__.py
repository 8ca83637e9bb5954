"""Tool cassette: record selected DSH tool calls once, replay them exactly offline."""

from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig, parse_config
from dsh_sidecar.python_core.tool_cassette.engine import (
    CloseReport,
    ExecuteEvent,
    HostToolResult,
    Passthrough,
    PostEvent,
    Refuse,
    ResultEvent,
    Serve,
    ToolCassetteSession,
)
from dsh_sidecar.python_core.tool_cassette.store import VerifyReport, load, verify_file

__all__ = [
    "CloseReport",
    "ExecuteEvent",
    "HostToolResult",
    "Passthrough",
    "PostEvent",
    "Refuse",
    "ResultEvent",
    "Serve",
    "ToolCassetteConfig",
    "ToolCassetteSession",
    "VerifyReport",
    "load",
    "parse_config",
    "verify_file",
]
