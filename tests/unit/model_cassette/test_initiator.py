"""The delegation depth of a model call, decided from the initiator's raw header facts."""

from __future__ import annotations

import msgspec
import pytest

from dsh_sidecar.bridge.transport.protocol import ModelRequestParams
from dsh_sidecar.python_core.model_cassette.initiator import InitiatorFacts, delegation_depth


@pytest.mark.parametrize(("wire", "depth"), [
    (b'{"request":{}}', 0),                                            # outside any agent
    (b'{"request":{},"initiator":{}}', 0),                             # the root agent
    (b'{"request":{},"initiator":{"delegationDepth":2}}', 2),
    (b'{"request":{},"initiator":{"origin":"subagent"}}', 1),          # a child without a count
    (b'{"request":{},"initiator":{"origin":"subagent","delegationDepth":0}}', 1),
    (b'{"request":{},"initiator":{"origin":"subagent","delegationDepth":3}}', 3),
    (b'{"request":{},"initiator":{"origin":"user","delegationDepth":0}}', 0),
])
def test_depth_from_the_wire_facts(wire: bytes, depth: int) -> None:
    """The count wins when deeper; a ``subagent`` origin alone makes a child."""
    params = msgspec.json.decode(wire, type=ModelRequestParams)
    assert delegation_depth(params.initiator) == depth


@pytest.mark.parametrize("facts", [b'{"delegationDepth":-1}', b'{"delegationDepth":1.5}', b'{"depth":1}'])
def test_malformed_facts_are_refused(facts: bytes) -> None:
    """A negative or fractional count, or an unknown field, is a protocol error, not depth 0."""
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(facts, type=InitiatorFacts)
