"""The public surface of each package is small and pinned."""

from __future__ import annotations

import bridge.pytest_plugin
import bridge.run
import python_core.mock
import python_core.model_cassette
import python_core.session_log
import python_core.subagent_cassette
import python_core.tool_cassette


def test_tool_cassette_exports() -> None:
    assert {"ToolCassetteSession", "parse_config", "verify_file", "load"} <= set(python_core.tool_cassette.__all__)


def test_mock_exports() -> None:
    assert {"MockPlan", "MockTurns", "parse_command", "load_source"} <= set(python_core.mock.__all__)


def test_subagent_cassette_exports() -> None:
    assert set(python_core.subagent_cassette.__all__) == {
        "CallHandle", "CassetteConfig", "CloseReport", "Forward", "Miss", "Replay", "RunOutcome",
        "StartRequest", "SubagentCassette", "UpstreamFacts", "parse_config",
    }


def test_model_cassette_exports() -> None:
    assert set(python_core.model_cassette.__all__) == {
        "CloseReport", "Forward", "ModelCassette", "ModelCassetteConfig", "ModelStats", "Pass", "Serve",
        "VerifyReport", "load", "parse_config", "verify_file",
    }


def test_every_exported_name_exists() -> None:
    for module in (python_core.tool_cassette, python_core.mock, python_core.subagent_cassette,
                   python_core.model_cassette):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


def test_run_api_exports() -> None:
    assert set(bridge.run.__all__) == {
        "CassetteMissing", "CassetteSummary", "Diagnostic", "HostNotFound", "ModelCassette", "RecordMode", "Row",
        "RunFailed", "RunResult", "SubagentCassette", "ToolCall", "ToolCassette", "ToolResult", "find_host", "run",
    }
    assert bridge.pytest_plugin.__all__ == ["DshRunner"]
    assert set(python_core.session_log.__all__) == {
        "SessionSummary", "SessionToolCall", "SessionToolResult", "decode_session_log", "encode_segment", "final_text",
        "mock_statuses", "project_key", "read_session_log", "session_log_candidates", "summarize", "tool_calls",
        "tool_results",
    }
    for module in (bridge.run, bridge.pytest_plugin, python_core.session_log):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"
