"""One DSH session's sidecar state: its config, its features, its report and its outcome.

A plain ``dsh`` run has one ``SessionState`` for the whole process, made from the row config
(today's behaviour). A warm host (docs/warm-host.md) opens one per session, each from the
config its run sent, so ordinals, consumption, poison, turn bookkeeping, the report and the
exit status of one session never change another's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import msgspec

from dsh_sidecar.bridge.hooks.mock import MockDriver
from dsh_sidecar.bridge.hooks.model import ModelHooks
from dsh_sidecar.bridge.hooks.references import with_filter_functions
from dsh_sidecar.bridge.hooks.stubs import Stubs
from dsh_sidecar.bridge.hooks.subagent import SubagentHooks
from dsh_sidecar.bridge.hooks.tools import ToolHooks
from dsh_sidecar.bridge.hooks.trace import Trace
from dsh_sidecar.bridge.host.staging import SHARED_SESSIONS_VAR
from dsh_sidecar.bridge.transport.protocol import (
    Feature,
    Hook,
    NotInitialized,
    ShutdownResult,
    TurnParams,
)
from dsh_sidecar.bridge.transport.report import CassetteCounts, ReportedError, RunReport, write_report
from dsh_sidecar.python_core.cli_errors import EXIT_FAILED, EXIT_MOCK_REFUSED
from dsh_sidecar.python_core.composition import Composition
from dsh_sidecar.python_core.config import SidecarConfig
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.turns import TurnLedger

__all__ = ["SessionState"]


# The delegation tool whose children reach a provider's start(), which the cassette serves.
REPLAYED_DELEGATION = frozenset({"subagent"})


class SessionState:
    """State and handlers of one session (or of a plain run's whole process).

    ``warn`` takes a warning line: stderr when ``None`` (a plain run), the session's own lines in a warm host.
    """

    def __init__(self, warn: Callable[[str], None] | None = None) -> None:
        self.config: SidecarConfig | None = None
        self.warn = warn
        self.hooks: list[Hook] = []
        self.ask_execute = False
        self.trace = Trace(None)
        self.tools: ToolHooks | None = None
        self.mock: MockDriver | None = None
        self.subagents: SubagentHooks | None = None
        self.model: ModelHooks | None = None
        self.startup_errors: list[SidecarError] = []
        # The run report's inputs, kept only when a report is configured.
        self._sessions: dict[str, None] = {}
        self.turns = TurnLedger()
        # Features in the order they first refused a call: their errors and fixes print in that order.

    def open(self, config: SidecarConfig, host: Mapping[str, str | None], plugins: Composition | None = None,
             ) -> None:
        """Open the features ``config`` names; ``hooks`` and ``ask_execute`` say what the shim installs.

        ``plugins``: the run's plugin composition, which a tool cassette records or compares.
        """
        if config.tool_cassette is not None:
            # A call filter runs in this process: import its function now, before any call.
            config = msgspec.structs.replace(
                config, tool_cassette=with_filter_functions(config.tool_cassette, config.cwd))
        self.config = config
        self.trace = Trace(config.trace, values=config.trace_values)
        bridge = os.path.dirname(os.path.dirname(__file__))
        self.trace.write("initialize", host=dict(host), pid=os.getpid(), bridge=bridge)
        hooks: list[Hook] = []
        if config.mock.enabled:
            home = os.environ.get("DSH_HOME", "").strip() or os.path.expanduser("~/.dsh")
            # Resolved: the run API's private DSH_HOME links `sessions` to the run's own root, and
            # names the shared one, where earlier runs' logs are (bridge/host/staging.py).
            roots = [os.path.realpath(os.path.join(os.path.abspath(home), "sessions"))]
            shared = os.environ.get(SHARED_SESSIONS_VAR, "")
            if shared and shared not in roots:
                roots.append(shared)
            self.mock = MockDriver(config.mock, self.trace, tuple(roots))
            hooks.append("llm")
        # The mock plan judges results by their error codes, which only tools/result carries.
        stubs = Stubs.load(config.stubs, config.cwd) if config.stubs else None
        guarded = config.live_tools is not None
        if (config.tool_cassette is not None or config.trace is not None or self.mock is not None or stubs
                or guarded):
            self.tools = ToolHooks.open(config.tool_cassette, self.trace, self.mock, stubs, config.live_tools,
                                        config.cwd, self.warn, config.strict_replay, plugins)
            if config.report is not None:
                self.tools.calls = []  # the run report names every call's structural path
            hooks.append("tools")
        if config.tool_cassette is not None:
            # What each model step is shown: kept as digests (record), compared (replay).
            hooks.append("steps")
        # Only a cassette, a stub, the offline guard or the trace looks at a call before its result.
        ask_execute = (config.tool_cassette is not None or config.trace is not None or stubs is not None
                       or guarded)
        if config.subagent_cassette is not None:
            self.subagents = SubagentHooks.open(
                config.subagent_cassette, host_version=host.get("@deepseek-ai/dsh-subagent"), trace=self.trace,
            )
            hooks.append("subagent")
            if self.mock is not None:
                # Replay serves the child from the file; record captures the live child so the
                # same script can replay it later. Without a subagent cassette it stays refused.
                self.mock.replayed_delegation = REPLAYED_DELEGATION
        if config.model_cassette is not None:
            self.model = ModelHooks.open(
                config.model_cassette, cwd=config.cwd, host_version=host.get("@deepseek-ai/dsh-llm"),
                trace=self.trace, children_owned=self.subagents is not None,
            )
            hooks.append("model")
        # A recording is published only once its turn really ended: the shim reports turns.
        if (config.tool_cassette is not None and config.tool_cassette.mode == "record") or (
            self.subagents is not None and self.subagents.cassette.config.mode == "record"
        ):
            hooks.append("turns")
        self.hooks = hooks
        self.ask_execute = ask_execute

    async def close(self) -> ShutdownResult:
        """Close every feature; report the errors that must fail the run (publish or refuse)."""
        groups: dict[str, list[SidecarError]] = {}
        notes: list[str] = []
        mock_fixes: list[str] = []
        interruption = self.turns.interruption()
        if self.tools is not None:
            groups["tool"], notes = await self.tools.close(interruption)
        if self.mock is not None:
            mock_fixes = self.mock.close()
        if self.subagents is not None:
            groups["subagent"], subagent_notes = await self.subagents.close(interruption)
            notes.extend(subagent_notes)
        if self.model is not None:
            groups["model"], model_notes = await self.model.close()
            notes.extend(model_notes)
        # The cassette that refused first in the turn caused the rest: its errors and fix lead.
        refused = {"tool": None if self.tools is None else self.tools.refused_at,
                   "model": None if self.model is None else self.model.refused_at}
        order = sorted(groups, key=lambda f: (0, at) if (at := refused.get(f)) is not None else (1, 0))
        errors: list[SidecarError] = [*self.startup_errors, *(e for f in order for e in groups[f])]
        self.trace.write("shutdown", errors=[e.code for e in errors])
        self.trace.close()
        # Several errors often share one fix (a mismatch and the records it left unconsumed).
        fixes = list(dict.fromkeys([*(e.hint for e in errors if e.hint), *mock_fixes]))
        result = ShutdownResult(
            exitCode=self._exit_code(errors), errors=[str(e) for e in errors], notes=notes, fixes=fixes,
        )
        if self.config is not None and self.config.report is not None:
            write_report(self.config.report, self._report(errors, result))
        return result

    def note_session(self, session_id: str) -> None:
        """Name a session of this state in its report (a warm session's own id)."""
        self._sessions.setdefault(session_id)

    def _exit_code(self, errors: list[SidecarError]) -> int:
        """The DSH process's exit code as far as the sidecar decides it (python_core/cli_errors.py): the
        highest one applies, and rc.8's own 1 for a failed turn stays when the sidecar has nothing to add."""
        if self.mock is not None and self.mock.refused:
            return EXIT_MOCK_REFUSED
        return EXIT_FAILED if errors else 0

    def _report(self, errors: list[SidecarError], result: ShutdownResult) -> RunReport:
        cassettes = []
        tool_report = None if self.tools is None else self.tools.closed
        if tool_report is not None:
            s = tool_report.stats
            cassettes.append(CassetteCounts(
                kind="tool", mode=s.mode, selected=s.selected, recorded=s.recorded, consumed=s.consumed,
                unconsumed=s.unconsumed, poisoned=s.poisoned, published=tool_report.published,
                injected=s.injected, faults=s.faults, failed=len(self.tools.failures.failed) if self.tools else 0,
                stoodUp=self.tools.stood_up if self.tools is not None else [],
            ))
        subagent_report = None if self.subagents is None else self.subagents.closed
        if subagent_report is not None:
            a = subagent_report.stats
            cassettes.append(CassetteCounts(
                kind="subagent", mode=a.mode, selected=a.started, recorded=a.recorded, consumed=a.replayed,
                unconsumed=a.unconsumed, missed=a.missed,
                published=a.mode == "record" and a.recorded > 0 and not subagent_report.errors,
                failed=len(self.subagents.failed_children) if self.subagents else 0,
            ))
        model_report = None if self.model is None else self.model.closed
        if model_report is not None:
            m = model_report.stats
            cassettes.append(CassetteCounts(
                kind="model", mode=m.mode, selected=m.admitted, recorded=m.recorded, consumed=m.consumed,
                unconsumed=m.unconsumed, poisoned=m.poisoned, published=model_report.published,
            ))
        return RunReport(
            cwd=self.config.cwd if self.config is not None else "", sessions=list(self._sessions),
            calls=[] if self.tools is None else list(self.tools.calls or ()), cassettes=cassettes,
            errors=[ReportedError(e.code, e.message) for e in errors],
            notes=result.notes, exitCode=result.exitCode,
        )

    def feature(self, name: Feature) -> object | None:
        """The part of this session that serves a routed method (``None``: the session has no such
        feature): a feature's hooks, or this state itself for ``session``."""
        return self if name == "session" else getattr(self, name)

    def session_turn(self, params: TurnParams) -> None:
        """``session/turn`` notification: count the turns a recording spans."""
        if self.config is None:
            raise NotInitialized("session/turn")
        if params.phase == "start":
            self.turns.start(params.sessionId, params.turn)
        else:
            busy = self.tools is not None and self.tools.busy()
            self.turns.end(params.sessionId, params.turn, params.reason, busy)
