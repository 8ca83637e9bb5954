"""The records dsh-sidecar writes into DSH session logs, shared by the mock that writes them and
the session log reader, the run API and the web UI that read them back.

A ``mock/status`` event (``MockStatus``) is appended to the session log at every status change
of a ``/mock`` turn; the log reader refuses one of the wrong shape by name.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["Card", "MockStatus", "Mode", "Phase", "PlanState"]

PlanState = Literal["ready", "awaiting-results", "succeeded", "failed", "cancelled"]
Mode = Literal["run", "replay"]
# What a person sees (docs/web-ui.md): the row's phase and which card, if any, to show.
Phase = Literal["queued", "running", "completed", "failed", "cancelled"]
Card = Literal["invalid-script", "tool-stop"]


class MockStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the web UI's status row and cards need (docs/web-ui.md); appended as a ``mock/status`` event.

    ``step_count`` counts executable top-level steps only (a parallel group is one step, waits
    are not steps). ``steps_started`` counts steps handed to the bridge (their wait included);
    ``steps_completed`` counts steps whose every result arrived without error.

    The UI fields are decided here so the browser part only renders: ``phase``; ``step``, the
    progress numerator over ``step_count`` (the step running, the failing step, or all steps
    once completed); ``card``, the card to show (``invalid-script`` for a turn refused before
    any tool ran, ``tool-stop`` when a real tool result stopped the plan); ``location``, where
    in the source an invalid script is wrong; ``runtime_code``, the code of the real failing
    tool result. ``mode`` is None only when the command was refused before its mode was known.
    """

    session_id: str
    turn_id: str
    mode: Mode | None
    source_format: str
    source_name: str | None
    script_id: str
    step_count: int
    steps_started: int
    steps_completed: int
    state: PlanState
    error_code: str | None = None
    error_message: str | None = None
    failed_tool: str | None = None
    failed_step: int | None = None
    steps_stopped: int = 0
    phase: Phase = "queued"
    step: int = 0
    card: Card | None = None
    location: str | None = None
    runtime_code: str | None = None
