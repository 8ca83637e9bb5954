"""The host's side of a ``start()``: the parent as rc.8 shows it, and what a replayed run settles to.

The shim reads these facts off ``request.parent`` as they are; every judgement about them (the
delegation depth, the origin that counts, which events are model-visible) is made here, so the
identity of a call does not depend on JavaScript.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.canonical import Count
from dsh_sidecar.python_core.subagent_cassette.format import FullRequest, NonEmpty
from dsh_sidecar.python_core.subagent_cassette.identity import ParentEvent, ParentRoute, StartRequest

__all__ = ["ABORTED_RESULT", "ONE_SHOT_PATCH", "PARENT_EVENT_TYPES", "ParentFacts", "start_request"]

# The parent events the identity reads (parent_surface); the shim sends only these types.
PARENT_EVENT_TYPES = ("user/message", "assistant/message", "tool/result")

# What a replayed run's result settles to when its caller aborts after publication: the
# outcome rc.8's own providers give an aborted child.
ABORTED_RESULT = msgspec.Raw(b'{"output":[],"stopReason":"aborted"}')


# rc.8's default `subagent` tool runs children through startContinuable, which never calls a
# provider's start(): recording needs the delegation tools in one-shot mode. An id-targeted
# patch replaces the whole config, so every key of the shipped rows is restated.
ONE_SHOT_PATCH = """\
# dsh-sidecar: delegation tools in one-shot mode, so the subagent cassette sees every child.
# Use with `dsh --profile headless --patch <this file> ...` or append to your profile layer.
- id: tool-subagent
  config:
    provider: spawn
    toolName: subagent
    backgroundMode: one-shot
- id: tool-subagent-fork
  config:
    provider: fork
    toolName: subagent_fork
    backgroundMode: one-shot
"""


class ParentFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """``request.parent`` as the host shows it: header and option fields, and its session events."""

    sessionId: NonEmpty
    origin: str | UnsetType = UNSET
    delegationDepth: Count | UnsetType = UNSET
    subagentDepth: Count | UnsetType = UNSET
    agentPreset: str | UnsetType = UNSET
    route: ParentRoute = ParentRoute()
    events: list[ParentEvent] = []


def start_request(request: FullRequest, parent: ParentFacts, *, signal_aborted: bool) -> StartRequest:
    """Decide a start's identity facts from the host's raw parent facts.

    The depth is rc.8's ``delegationDepthOf``: options may deepen the header's count, never
    lower it. Only a ``subagent`` origin is an origin; only model-visible events count.
    """
    depths = (parent.delegationDepth, parent.subagentDepth)
    return StartRequest(
        request=request,
        parentSessionId=parent.sessionId,
        parentOrigin="subagent" if parent.origin == "subagent" else UNSET,
        parentDepth=max((d for d in depths if not isinstance(d, UnsetType)), default=0),
        parentPreset=parent.agentPreset,
        parentRoute=parent.route,
        parentEvents=[event for event in parent.events if event.type in PARENT_EVENT_TYPES],
        signalAborted=signal_aborted,
    )
