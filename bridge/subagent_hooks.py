"""Subagent provider hooks: the wire side of the subagent cassette.

The shim registers a provider whose ``start()`` asks ``subagent/start``; the cassette decides
``forward`` (record: the shim calls the upstream provider object's ``start()`` and reports
``subagent/published`` and ``subagent/outcome``) or ``replay`` (the shim returns a run with a
fresh id, ``localAgent: undefined`` and the recorded outcome). A miss is an error answer, so
``start()`` rejects and the delegating tool sees it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from bridge.protocol import (
    SubagentDecision,
    SubagentOutcomeParams,
    SubagentPublishedParams,
    SubagentSetup,
    SubagentStartParams,
)
from bridge.trace import Trace
from python_core.errors import ConfigError, SidecarError
from python_core.subagent_cassette import (
    CloseReport,
    Forward,
    Miss,
    SubagentCassette,
    UpstreamFacts,
    parse_config,
)
from python_core.subagent_cassette.host import ABORTED_RESULT, PARENT_EVENT_TYPES, start_request
from python_core.subagent_cassette.store import display_name
from python_core.turns import RecordingInterrupted

__all__ = ["SubagentHooks"]


class SubagentHooks:
    """Route provider boundary events to the subagent cassette."""

    def __init__(self, cassette: SubagentCassette, setup: SubagentSetup, trace: Trace) -> None:
        self.cassette = cassette
        self.setup = setup
        self.trace = trace
        self.closed: CloseReport | None = None

    @classmethod
    def open(cls, raw: Mapping[str, Any], *, cwd: str, host_version: str | None, trace: Trace) -> SubagentHooks:
        """Parse the ``subagentCassette`` section and open the cassette.

        Raises:
            ConfigError: the section is invalid (names the field).
            SidecarError: the cassette cannot be opened (locked, exists, invalid, wrong target).
        """
        try:
            config = parse_config(raw)
        except ConfigError as error:
            # Name the field as the user wrote it in the row: `subagentCassette.<field>`.
            raise ConfigError(f"subagentCassette.{error.field}", error.reason) from None
        config = msgspec.structs.replace(config, file=os.path.join(cwd, config.file))
        cassette = SubagentCassette.open(config, host_version=host_version or "unknown", clock=time.time)
        name, upstream = config.provider.names()
        return cls(cassette, SubagentSetup(name=name, upstream=upstream, parentEvents=list(PARENT_EVENT_TYPES)), trace)

    def hello(self, facts: UpstreamFacts) -> None:
        """The upstream provider was found; record mirrors and stores its facts."""
        self.cassette.on_upstream(facts)
        self.trace.write("subagent/hello", upstream=facts.name)

    def start(self, params: SubagentStartParams) -> SubagentDecision:
        """Decide one ``start()``: forward to the upstream, replay, or refuse with a miss."""
        request = start_request(params.request, params.parent, signal_aborted=params.signalAborted)
        decision = self.cassette.on_start(request)
        if isinstance(decision, Miss):
            if decision.diagnostic is not None:
                diag = decision.diagnostic
                sys.stderr.write(
                    f"dsh-sidecar: {decision.error} (differed: {', '.join(diag.differed) or 'none'}; "
                    f"callKey {diag.callKey}, request {diag.requestFingerprint[:19]}…, "
                    f"parent context {diag.parentContextFingerprint[:19]}…)\n"
                )
            self.trace.write("subagent/start", action="miss", error=decision.error.code)
            raise decision.error
        if isinstance(decision, Forward):
            self.trace.write("subagent/start", action="forward", callKey=decision.handle.callKey)
            return SubagentDecision(action="forward", handle=decision.handle)
        self.trace.write("subagent/start", action="replay", callKey=decision.handle.callKey)
        return SubagentDecision(
            action="replay", handle=decision.handle, outcome=decision.outcome,
            delayMs=decision.delay_ms, startDelayMs=decision.start_delay_ms, aborted=ABORTED_RESULT,
        )

    def published(self, params: SubagentPublishedParams) -> None:
        """A forwarded run was published (its child id keys grandchildren)."""
        self.cassette.on_published(params.handle, params.childId)

    def outcome(self, params: SubagentOutcomeParams) -> None:
        """A forwarded run settled: append it (fsync-ed before this returns)."""
        self.cassette.on_outcome(params.handle, params.outcome)
        self.trace.write("subagent/outcome", callKey=params.handle.callKey)

    def close(self, interruption: str | None = None) -> tuple[list[SidecarError], list[str]]:
        """Close the cassette; return its errors and a summary line.

        A recording whose turn did not really end (``interruption``) fails the run: the
        format has no completeness mark, so the file keeps the settled interactions only.
        """
        report = self.closed = self.cassette.close()
        s = report.stats
        errors: list[SidecarError] = list(report.errors)
        if interruption is not None and s.mode == "record" and s.started:
            errors.append(RecordingInterrupted(
                f"subagent cassette {display_name(self.cassette.config.file)}", interruption,
                f"it holds {s.recorded} interactions, not the whole turn; record again",
            ))
        note = (
            f"subagent cassette {s.mode}: {s.started} starts, {s.recorded} recorded, {s.replayed} replayed, "
            f"{s.missed} missed, {s.unconsumed} unconsumed"
        )
        return errors, [note]
