"""A run's typed result, read from what the sidecar reported and the session logs it names
(one path computation per session, no folder scan)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from dsh_sidecar.bridge.api.types import CassetteSummary, Diagnostic, RunResult, ToolCall, ToolResult
from dsh_sidecar.bridge.host.toolchain import HostEnv
from dsh_sidecar.bridge.transport.report import RunReport
from dsh_sidecar.python_core.session_log import (
    SessionLogInvalid,
    final_text,
    mock_statuses,
    read_session_log,
    session_log_candidates,
    tool_calls,
    tool_results,
)

__all__ = ["build_result", "refusals"]

# A named refusal as the sidecar or DSH prints it: `dsh-sidecar: INVALID_CONFIG: toolCassette.include: ...`.
_REFUSAL = re.compile(r"^(?:dsh-sidecar|dsh): ([A-Z][A-Z0-9_]+): (.+)$")


def refusals(stderr: str) -> list[Diagnostic]:
    """The named errors a run printed before its sidecar could report any (a refusal at session
    start: a config error, a cassette that cannot be opened, a host that would not boot)."""
    found: list[Diagnostic] = []
    for line in stderr.splitlines():
        match = _REFUSAL.match(line.strip())
        if match is not None and (diagnostic := Diagnostic(match[1], match[2])) not in found:
            found.append(diagnostic)
    return found


def _sessions(host: HostEnv, report: RunReport) -> tuple[str | None, str | None, list[str], list[dict[str, Any]]]:
    """The root session's id, log path and events, and the child session ids."""
    root = str(host.dsh_home / "sessions")
    found: list[tuple[str, str, list[dict[str, Any]]]] = []
    for session_id in report.sessions:
        for path in session_log_candidates(root, report.cwd, session_id):
            if os.path.exists(path):
                try:
                    found.append((session_id, path, read_session_log(path)))
                except SessionLogInvalid:
                    pass  # not a log rc.8 wrote whole: the run has no events from it
                break
    parents = [f for f in found if f[2] and f[2][0].get("delegationDepth", 0) == 0]
    if not parents:
        return None, None, [s for s, _, _ in found], []
    session_id, path, events = parents[0]
    return session_id, path, [s for s, _, _ in found if s != session_id], events



def build_result(host: HostEnv, task: str, report: RunReport | None, code: int, out: str, err: str,
                 timed_out: bool, duration_ms: int, summaries: Mapping[str, CassetteSummary]) -> RunResult:
    session_id = path = None
    children: list[str] = []
    events: list[dict[str, Any]] = []
    if report is not None:
        session_id, path, children, events = _sessions(host, report)
    paths = {c.callId: c for c in report.calls} if report is not None else {}
    calls = [
        ToolCall(call_id=c.call_id, tool=c.tool, path=paths[c.call_id].path if c.call_id in paths else None,
                 arguments=c.arguments, turn=c.turn, step=c.step)
        for c in tool_calls(events)
    ]
    tools = {c.call_id: c.tool for c in calls}
    results = []
    for r in tool_results(events):
        seen = paths.get(r.call_id)
        value = msgspec.json.decode(seen.value) if seen is not None else None
        results.append(ToolResult(
            call_id=r.call_id, tool=tools.get(r.call_id, seen.tool if seen else ""),
            path=seen.path if seen else None, is_error=r.is_error, output=r.output, value=value,
            error_code=r.error_code, error_message=r.error_message,
        ))
    errors = [Diagnostic(e.code, e.message) for e in report.errors] if report is not None else []
    if not errors and report is None and code != 0:
        errors = refusals(err)
    return RunResult(
        exit_code=code, timed_out=timed_out, duration_ms=duration_ms, task=task, stdout=out, stderr=err,
        final_text=final_text(events) or out.strip(), tool_calls=calls, tool_results=results,
        mock=mock_statuses(events), tool_cassette=summaries.get("tool"), subagent_cassette=summaries.get("subagent"),
        model_cassette=summaries.get("model"), errors=errors,
        session_id=session_id, session_path=path, child_session_ids=children, events=events,
    )
