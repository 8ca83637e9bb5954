"""The ``mock`` route's driver: per-session plans, per-turn routing, cancellation-aware waits."""

from __future__ import annotations

from bridge.protocol import LlmResponse, LlmStreamParams, PreStepParams, PreStepResult, RouteParams, RouteResult
from bridge.trace import Trace
from python_core.config import MockConfig
from python_core.errors import SidecarError

__all__ = ["MockDriver"]


class MockDriver:
    """Drive mock turns from ``/mock`` commands."""

    def __init__(self, config: MockConfig, trace: Trace) -> None:
        self.config = config
        self.trace = trace

    def pre_step(self, params: PreStepParams) -> PreStepResult:
        """Start a mock turn when a ``/mock`` command enters the step."""
        return PreStepResult(mock=False)

    def route(self, params: RouteParams) -> RouteResult:
        """Route the mock turn to ``mock/mock``."""
        return RouteResult(route=None)

    async def stream(self, params: LlmStreamParams) -> LlmResponse:
        """Answer one request to the mock route."""
        self.trace.write("llm/stream", session=params.sessionId, turn=params.turn, step=params.step)
        return LlmResponse(kind="text", text="dsh-sidecar mock route: no /mock command in this turn")

    def close(self) -> list[SidecarError]:
        """Drop every plan."""
        return []
