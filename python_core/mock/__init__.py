"""The deterministic mock model core: command grammar, canonical scripts, DSH JSONL
conversion, replay path policy and the sans-I/O plan the bridge drives (docs/mock.md)."""

from __future__ import annotations

from dsh_sidecar.python_core.mock.assemble import assemble_plan, find_command, refused_turn_status
from dsh_sidecar.python_core.mock.command import ReplayCommand, RunCommand, parse_arguments, parse_command
from dsh_sidecar.python_core.mock.machine import TURN_TRANSITIONS, MockTurns
from dsh_sidecar.python_core.mock.nested import DEFAULT_NESTED_TOOLS, reject_nested_tools
from dsh_sidecar.python_core.mock.paths import resolve_replay_path
from dsh_sidecar.python_core.mock.plan import (
    EmitFinal,
    EmitToolCalls,
    MockPlan,
    MockStatus,
    ObservedResult,
    PlannedCall,
    Stop,
    auxiliary_answer,
    refused_status,
)
from dsh_sidecar.python_core.mock.script import Script, encode_script, validate_script
from dsh_sidecar.python_core.mock.source import load_script, load_source, read_source, source_name_for

__all__ = [
    "DEFAULT_NESTED_TOOLS",
    "TURN_TRANSITIONS",
    "EmitFinal",
    "EmitToolCalls",
    "MockPlan",
    "MockStatus",
    "MockTurns",
    "ObservedResult",
    "PlannedCall",
    "ReplayCommand",
    "RunCommand",
    "Script",
    "Stop",
    "assemble_plan",
    "auxiliary_answer",
    "encode_script",
    "find_command",
    "load_script",
    "load_source",
    "parse_arguments",
    "parse_command",
    "read_source",
    "refused_status",
    "refused_turn_status",
    "reject_nested_tools",
    "resolve_replay_path",
    "source_name_for",
    "validate_script",
]
