"""Wire shapes live in one place: every method table row's payload types are bridge.transport.protocol's."""

from __future__ import annotations

import msgspec

from dsh_sidecar.bridge.transport.protocol import METHODS, CallHandle, RunOutcome, SubagentDecision


def test_every_method_row_uses_payload_types_of_the_protocol_module() -> None:
    owners = {
        (name, role): kind.__module__
        for name, row in METHODS.items()
        for role, kind in (("params", row.params), ("result", row.result))
        if kind is not None
    }
    outside = {name: owner for (name, _), owner in owners.items() if owner != "dsh_sidecar.bridge.transport.protocol"}

    assert outside == {}


def test_moved_subagent_payloads_keep_their_wire_bytes() -> None:
    outcome = {
        "published": True,
        "local": False,
        "childId": "c-1",
        "timing": {"startedAt": "2027-01-15T08:00:00.000Z", "startLatencyMs": 1.0, "durationMs": 2.0},
        "outcome": {"kind": "start-error", "error": {"name": "Error", "message": "no", "code": "E"}},
    }
    decoded = msgspec.json.decode(msgspec.json.encode(outcome), type=RunOutcome)
    decision = SubagentDecision(action="forward", handle=CallHandle(sequence=3, callKey="k"))

    assert msgspec.json.decode(msgspec.json.encode(decoded)) == outcome
    assert msgspec.json.encode(decision) == b'{"action":"forward","handle":{"sequence":3,"callKey":"k"}}'

