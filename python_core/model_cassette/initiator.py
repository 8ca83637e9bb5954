"""The agent driving a model call, as the host shows it, and the delegation depth it implies.

The shim reads the initiator's session header facts as they are; the judgement (which depth
counts, which origin makes a child) is made here, so whether a call belongs to a child agent
does not depend on JavaScript.
"""

from __future__ import annotations

import msgspec
from msgspec import UNSET, UnsetType

from dsh_sidecar.python_core.canonical import Count

__all__ = ["InitiatorFacts", "delegation_depth"]


class InitiatorFacts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """The initiator's session header fields the depth reads: ``origin`` and ``delegationDepth``."""

    origin: str | UnsetType = UNSET
    delegationDepth: Count | UnsetType = UNSET


def delegation_depth(initiator: InitiatorFacts | None) -> int:
    """Depth of the agent driving a call: 0 outside any agent; a ``subagent`` origin is at least 1.

    A subagent header written before the count existed still marks a child, hence the floor.
    """
    if initiator is None:
        return 0
    counted = 0 if isinstance(initiator.delegationDepth, UnsetType) else initiator.delegationDepth
    return max(counted, 1 if initiator.origin == "subagent" else 0)
