"""The public surface is pinned: ``dsh_sidecar`` and every module of its ``bridge`` and
``python_core`` declare ``__all__``, and this table holds each one exactly (names below are
relative to ``dsh_sidecar``).

A new module, or a name added to or removed from a module's ``__all__``, fails here until the
table says so: the surface changes on purpose, never by accident.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

import dsh_sidecar
import dsh_sidecar.bridge
import dsh_sidecar.python_core

EXPORTS: dict[str, list[str]] = {
    "": [
        "CassetteMissing", "CassetteSummary", "Diagnostic", "HostNotFound", "ModelCassette", "RecordMode", "Row",
        "RunFailed", "RunResult", "StubFailure", "SubagentCassette", "ToolCall", "ToolCassette", "ToolResult",
        "WarmPool", "__version__", "run",
    ],
    "bridge": [],
    "bridge.__main__": ["main"],
    "bridge.cli": ["main"],
    "bridge.connection": [
        "Action", "CANCELLED", "CANCEL_MARK", "Cancel", "Dispatch", "INVALID_PARAMS", "INVALID_REQUEST", "MAX_DEPTH",
        "METHOD_NOT_FOUND", "PARSE_ERROR", "RpcConnection", "SERVER_ERROR", "Send", "nesting_depth",
    ],
    "bridge.doctor": ["Boot", "Row", "boot_check", "parse_row", "python_check", "read_row"],
    "bridge.hostenv": [
        "DSH_VERSION", "HMR_VERSION", "HostEnv", "HostError", "MIN_NODE", "PNPM_VERSION", "ensure_host", "find_node",
        "host_env",
    ],
    "bridge.install": [
        "HMR_BLOCK", "HMR_FIX_PROFILES", "PACKAGE", "compile_sidecar", "heal_module_fallback", "install_package",
        "install_plugin", "pack_package", "record_local_plugin", "stale_local_plugins",
    ],
    "bridge.framing": ["LineFramer"],
    "bridge.later": ["Later", "Pending", "durable"],
    "bridge.line_writer": ["LineWriter", "Ticket"],
    "bridge.mock_driver": ["MOCK_ROUTE", "MockDriver", "ORDINARY_TURN_TEXT", "sleep_ms"],
    "bridge.model_hooks": ["ModelHooks"],
    "bridge.protocol": [
        "AlreadyInitialized", "CallHandle", "CancelParams", "CancelResult", "Empty", "ExecuteDecision",
        "ExecuteParams", "Hook", "HookNotEnabled", "INITIALIZE", "InitializeParams", "InitializeResult", "Lifecycle",
        "LlmResponse", "LlmStreamParams", "METHODS", "Method", "MockCommandParams", "MockCommandResult",
        "ModelDecision", "ModelRecordedParams", "ModelRequestParams", "NotInitialized", "PROTOCOL_VERSION",
        "PostExecuteDecision", "PostExecuteParams", "PreStepParams", "PreStepResult", "RegisteredTool",
        "RegistryParams", "ReplayFacts", "ResultParams",
        "Route", "RouteParams", "RouteResult", "RunOutcome", "SeenResult", "SessionEndParams", "ShutdownParams",
        "ShutdownResult", "StandIn", "StandInFailure",
        "SubagentDecision", "SubagentOutcomeParams", "SubagentPublishedParams", "SubagentSetup",
        "SubagentStartParams", "ToolCallOut", "TurnParams", "UpstreamFacts", "WarmDoneParams", "WarmJob",
        "WarmNextParams", "WireResult", "WireResultError", "WireStartError",
    ],
    "bridge.pytest_plugin": ["DshRunner"],
    "bridge.recorded_failures": ["CODE", "RecordedFailures"],
    "bridge.references": ["resolve", "with_filter_functions"],
    "bridge.report": ["CallPath", "CassetteCounts", "ReportedError", "RunReport", "read_report", "write_report"],
    "bridge.run": [
        "CassetteMissing", "CassetteSummary", "Diagnostic", "HostNotFound", "LOGIC_KEYS", "ModelCassette",
        "RecordMode", "RecordedFailure", "Row", "RunFailed", "RunResult", "StalePlugin", "StubFailure",
        "SubagentCassette", "ToolCall", "ToolCassette", "ToolResult", "WarmPool", "default_dsh_home", "find_host",
        "run", "unused_rows",
    ],
    "bridge.server": ["MAX_LINE", "Server"],
    "bridge.session_staging": ["SHARED_SESSIONS_VAR", "STAGING_DIR", "settle", "staging_root"],
    "bridge.session_state": ["EXIT_FAILED", "EXIT_MOCK_REFUSED", "SessionState"],
    "bridge.sidecar": ["Sidecar"],
    "bridge.stdio": ["FdReceiveStream", "FdSendStream", "NowaitReceive", "claim_stdout"],
    "bridge.stubs": ["Stubs"],
    "bridge.subagent_hooks": ["SubagentHooks"],
    "bridge.tool_hooks": ["ToolHooks"],
    "bridge.trace": ["Trace"],
    "bridge.warm": ["MAX_CONTROL_LINE", "WarmHost", "WarmReply", "WarmRun", "WarmSessionUnknown"],
    "bridge.warm_pool": ["HostBootFailed", "WarmBoot", "WarmOutcome", "WarmPool", "composition_key", "default_pool"],
    "python_core": ["__version__"],
    "python_core.canonical": [
        "Count", "DEPTH_REASON", "MAX_DEPTH", "MAX_SAFE_INTEGER", "NOT_CANONICAL", "canonical_bytes", "check_depth",
        "decode_canonical", "digest", "digest_bytes", "is_canonical", "loads_strict", "pointer", "too_deep",
        "too_deep_lines", "value_too_deep",
    ],
    "python_core.cassette_io": [
        "Chain", "ChainFrame", "FrameScanner", "GENESIS", "Invalid", "LineSink", "PartialFile", "check_header_line",
        "decode_line", "display_name", "frame_hash", "fsync_dir", "line_hash", "make_directories", "mapping_hash",
        "partial_path", "probe_header", "reason_of", "scan_file", "schema_location", "seal", "seal_mapping",
    ],
    "python_core.cli_errors": [
        "EXIT_DIFFERENT", "EXIT_FAILED", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_USAGE", "NamedFailure",
        "NotComparableFailure",
    ],
    "python_core.config": ["SidecarConfig", "parse_sidecar_config"],
    "python_core.config_fields": ["ConfigSection", "Mode", "convert_section", "field_of"],
    "python_core.config_paths": ["check_nul", "check_path"],
    "python_core.errors": [
        "CanonicalJsonError", "ConfigError", "FilterRaised", "FilterUnresolved", "LiveToolBlocked", "ProtocolError",
        "SidecarError", "printable",
    ],
    "python_core.files": ["FileRefused", "display_name", "open_regular", "reason_of"],
    "python_core.filters": [
        "CREDENTIAL_KEYS", "FilterFunction", "FilterRule", "Filters", "PLACEHOLDER", "parse_filters", "rules_digest",
    ],
    "python_core.json_pointers": [
        "PointerChange", "describe", "differing_pointers", "encodable", "escape_token", "parse_pointer", "without",
    ],
    "python_core.mock": [
        "DEFAULT_NESTED_TOOLS", "EmitFinal", "EmitToolCalls", "MockPlan", "MockStatus", "MockTurns", "ObservedResult",
        "ReplayCommand", "RunCommand", "Script", "Stop", "TURN_TRANSITIONS", "ToolCall", "assemble_plan",
        "auxiliary_answer", "encode_script", "find_command", "load_script", "load_source", "parse_arguments",
        "parse_command", "read_source", "refused_status", "refused_turn_status", "reject_nested_tools",
        "resolve_replay_path", "source_name_for", "validate_script",
    ],
    "python_core.mock.assemble": ["assemble_plan", "find_command", "refused_turn_status"],
    "python_core.mock.cli": ["mock"],
    "python_core.mock.command": [
        "OVERWRITE_WAIT_OPTION", "ReplayCommand", "RunCommand", "parse_arguments", "parse_command",
    ],
    "python_core.mock.config": ["MAX_GAP_MS", "MockConfig", "parse_config"],
    "python_core.mock.convert": ["SESSION_LOG_VERSION", "convert_session"],
    "python_core.mock.errors": [
        "ConversionMismatch", "DuplicateMockTurn", "InvalidArgsStop", "InvalidCommand", "InvalidScript",
        "MidTurnMockCommand", "MissingResult", "MissingSessionId", "MockCancelled", "MockError", "MockIllegalEvent",
        "PathRefused", "PlanClosed", "SessionsDisposed", "SourceUnreadable", "StaleResult", "ToolFailedStop",
        "UnknownToolStop", "UnsupportedNestedTool",
    ],
    "python_core.mock.machine": [
        "MockTurns", "ModelRoute", "SeenResult", "TURN_TRANSITIONS", "ToolOutcome", "TurnEvent", "TurnState",
        "TurnsStats",
    ],
    "python_core.mock.nearmiss": ["MAX_DISTANCE", "closest_subcommand", "distance", "is_near_miss"],
    "python_core.mock.nested": ["DEFAULT_NESTED_TOOLS", "reject_nested_tools"],
    "python_core.mock.paths": ["resolve_replay_path"],
    "python_core.mock.plan": [
        "Action", "DEFAULT_GAP_MS", "EmitFinal", "EmitToolCalls", "MockPlan", "MockStatus", "ObservedResult", "Phase",
        "PlanState", "Stop", "TRANSITIONS", "ToolCall", "auxiliary_answer", "error_location", "refused_status",
    ],
    "python_core.mock.reasons": ["full_message_hint", "refusal_hint", "schema_reasons"],
    "python_core.mock.script": [
        "ExecutableStep", "MAX_WAIT_MS", "ParallelStep", "SCRIPT_TYPE", "SCRIPT_VERSION", "Script", "Step",
        "TOOL_NAME_RULE", "ToolStep", "WaitStep", "decode_script", "encode_script", "executable_steps", "script_id",
        "validate_script",
    ],
    "python_core.mock.source": [
        "MAX_DECODED_BYTES", "MAX_SOURCE_BYTES", "SourceFormat", "decode_source", "detect_format", "load_script",
        "load_source", "read_source", "source_name_for",
    ],
    "python_core.model_cassette": [
        "CloseReport", "Forward", "ModelCassette", "ModelCassetteConfig", "ModelStats", "Pass", "Serve",
        "VerifyReport", "load", "parse_config", "verify_file",
    ],
    "python_core.model_cassette.cli": ["cli", "diff_cassettes"],
    "python_core.model_cassette.config": ["ModelCassetteConfig", "parse_config"],
    "python_core.model_cassette.engine": ["CloseReport", "Forward", "ModelCassette", "ModelStats", "Pass", "Serve"],
    "python_core.model_cassette.diff": ["Difference", "diff_cassettes", "split_chunks"],
    "python_core.model_cassette.endpoints": ["ENDPOINT", "HOST", "scrub_endpoints", "scrub_text"],
    "python_core.model_cassette.errors": [
        "ModelCallLeftOut", "ModelCassetteClosed", "ModelCassetteExists", "ModelCassetteIOError",
        "ModelCassetteInvalid", "ModelCassetteMismatch", "ModelExtraCall", "ModelRecordingIncomplete",
        "ModelReplayPoisoned", "ModelRequestInvalid", "ModelRulesDiffer", "ModelUnconsumed", "rerecord_hint", "short",
    ],
    "python_core.model_cassette.initiator": ["InitiatorFacts", "delegation_depth"],
    "python_core.model_cassette.format": [
        "ABANDONABLE", "AnyFrame", "CallFrame", "ChunkFacts", "CompleteFrame", "Frame", "GENESIS", "HeaderFrame",
        "PROTOCOL", "READABLE", "VERSION", "checked_chunks", "chunk_facts", "decode_frame", "encode", "line_hash",
        "probe_header", "seal",
    ],
    "python_core.model_cassette.pacing": ["INSTANT_RETRY_AFTER_MS", "instant_failures"],
    "python_core.model_cassette.request": [
        "CWD_TOKEN", "FilterView", "MessageDigest", "RequestParts", "ToolDigest", "checked_parts", "compare",
        "filter_view", "lane_of", "normalize", "parts_of", "parts_of_canonical",
    ],
    "python_core.model_cassette.reseal": ["reseal_file", "reseal_lines"],
    "python_core.model_cassette.store": ["Cassette", "Recorder", "VerifyReport", "check_lines", "load", "verify_file"],
    "python_core.references": ["check_reference", "reference_identity"],
    "python_core.reseal_io": ["ResealReport", "changed_lines", "reseal_chain", "reseal_path"],
    "python_core.stubs": ["StubFailure", "StubRaised", "StubUnresolved", "parse_stubs"],
    "python_core.session_log": [
        "LOG_NAMES", "SessionLogInvalid", "SessionSummary", "SessionToolCall", "SessionToolResult",
        "decode_session_log", "encode_segment", "final_text",
        "mock_statuses", "project_key", "read_session_log", "session_log_candidates", "summarize", "tool_calls",
        "tool_results",
    ],
    "python_core.subagent_cassette": [
        "CallHandle", "CassetteConfig", "CloseReport", "Forward", "Miss", "Replay", "SettledRun", "StartRequest",
        "SubagentCassette", "Upstream", "parse_config",
    ],
    "python_core.subagent_cassette.cli": ["cli"],
    "python_core.subagent_cassette.config": ["CassetteConfig", "ProviderConfig", "parse_config", "parse_section"],
    "python_core.subagent_cassette.diff": ["Change", "DiffReport", "diff_cassettes"],
    "python_core.subagent_cassette.engine": [
        "CallHandle", "CassetteStats", "CloseReport", "Decision", "Forward", "Miss", "MissDiagnostic", "Replay",
        "SettledRun", "SubagentCassette", "Upstream",
    ],
    "python_core.subagent_cassette.errors": [
        "AmbiguousCassette", "AppendIncompatible", "CassetteExists", "CassetteFormatError", "CassetteIntegrityError",
        "CassetteLocked", "CassetteMiss", "CassetteNotFound", "CassetteReadError", "CassetteStateError",
        "InvalidStartRequest", "NotComparable", "NothingRecorded", "RedactedReplayRefused", "ReplayPoisoned",
        "TargetMismatch", "UnconsumedInteractions", "UnsettledCalls", "escape",
    ],
    "python_core.subagent_cassette.format": [
        "Capabilities", "Cassette", "CassetteParser", "DIAGNOSTIC_MAX_BYTES", "FORMAT", "FullRequest", "FullView",
        "Header", "Interaction", "MetadataView", "Outcome", "ProviderFacts", "RecordedError", "RequestMetadata",
        "RequestView", "ResultErrorOutcome", "ResultOutcome", "SUPPORTED_TARGETS", "StartErrorOutcome", "Target",
        "Timing", "ToolFilter", "VERSION", "ambiguous_groups", "check_blocks", "check_header", "check_interaction",
        "group_key", "outcome_fingerprint", "outcome_kind", "project_stop_reason", "seal_header",
        "seal_interaction", "to_json",
    ],
    "python_core.subagent_cassette.host": ["ABORTED_RESULT", "PARENT_EVENT_TYPES", "ParentFacts", "start_request"],
    "python_core.subagent_cassette.identity": [
        "ParentEvent", "ParentRoute", "StartRequest", "call_key", "fingerprint", "parent_context_fingerprint",
        "parent_key", "parent_surface", "request_fingerprint", "request_metadata",
    ],
    "python_core.subagent_cassette.redact": ["BUILTIN_PATTERNS", "REDACTED", "Redactor", "build_redactor"],
    "python_core.subagent_cassette.reseal": ["reseal_file", "reseal_lines"],
    "python_core.subagent_cassette.store": ["CassetteWriter", "WriterLock", "display_name", "load", "verify_file"],
    "python_core.tool_cassette": [
        "CloseReport", "ExecuteEvent", "Passthrough", "PostEvent", "Refuse", "ResultEvent", "Serve",
        "ToolCassetteConfig", "ToolCassetteSession", "ToolResult", "VerifyReport", "load", "parse_config",
        "verify_file",
    ],
    "python_core.tool_cassette.calls": ["CallSummary", "OutcomeKind", "outcome_json", "summarize"],
    "python_core.tool_cassette.cli": ["main"],
    "python_core.tool_cassette.config": ["ToolCassetteConfig", "parse_config", "same_selection"],
    "python_core.tool_cassette.diff": [
        "CallChange", "ContractChange", "DiffReport", "FieldChange", "diff_cassettes", "outcome_label",
    ],
    "python_core.tool_cassette.engine": [
        "CALL_TRANSITIONS", "CallPhase", "CassetteStats", "CloseReport", "Event", "ExecuteEvent",
        "FAILURE_TRANSITIONS", "Passthrough", "PostEvent", "RecordSession", "Refuse", "ReplaySession", "ResultEvent",
        "Serve", "SessionState", "ToolCassetteSession", "ToolContract", "ToolResult",
    ],
    "python_core.tool_cassette.errors": [
        "ArgumentsUnreadable", "CassetteExists", "CassetteIOError", "CassetteInvalid", "CassetteMismatch", "ExtraCall",
        "FilterRaised", "FilterUnresolved", "IllegalEvent", "IncludeDiffers", "NestedSelection", "NothingSelected",
        "OutcomeUnrecordable", "RecordingIncomplete", "RedactedReplay", "ReplayPoisoned", "RulesDiffer",
        "ShortCircuited", "ToolUnregistered", "UnconsumedRecords", "UnmatchedPattern", "UnsupportedConcludesTurn",
        "ValueRejected",
        "fingerprint", "rerecord_hint",
    ],
    "python_core.tool_cassette.format": [
        "AnyFrame", "Cancellation", "CompleteFrame", "DefinitionFrame", "Frame", "GENESIS", "HeaderFrame",
        "HostEvent", "HostState", "PROTOCOL", "READABLE_VERSIONS", "ResultFrame", "StartFrame", "ToolErrorInfo",
        "ToolFailure", "VERSION",
        "canonical_payload", "canonical_text", "decode_frame", "encode", "probe_header", "seal",
    ],
    "python_core.tool_cassette.dependencies": ["DependencyTracker", "PATH_ARGUMENTS", "ToolDependency"],
    "python_core.tool_cassette.host_state": [
        "HostCapture", "HostEvent", "HostState", "Observed", "RESTORED_EVENTS", "kept", "relocated", "restored",
    ],
    "python_core.tool_cassette.store": [
        "Cassette", "RecordedCall", "Recorder", "VerifyReport", "check_lines", "load", "verify_file",
    ],
    "python_core.tool_cassette.faults": ["FaultOverlay", "FaultRule", "parse_faults"],
    "python_core.tool_cassette.matching": ["MatchRule", "parse_match", "reduce_args"],
    "python_core.tool_cassette.reseal": ["reseal_file", "reseal_lines"],
    "python_core.turns": ["INTERRUPTED_REASONS", "RecordingInterrupted", "TurnLedger"],
}


def _modules() -> list[str]:
    found = [""]
    for package in (dsh_sidecar.bridge, dsh_sidecar.python_core):
        found.append(package.__name__)
        found += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(name.removeprefix("dsh_sidecar").removeprefix(".") for name in found)


def test_every_module_is_pinned() -> None:
    assert _modules() == sorted(EXPORTS)


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_the_module_exports_exactly_its_pinned_names(name: str) -> None:
    module: ModuleType = importlib.import_module(f"dsh_sidecar.{name}".rstrip("."))
    exported = module.__dict__.get("__all__")
    assert isinstance(exported, list), f"{name} declares no __all__ list"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    assert sorted(exported) == EXPORTS[name]
    for export in exported:
        assert hasattr(module, export), f"{name}.{export} is exported but not defined"
