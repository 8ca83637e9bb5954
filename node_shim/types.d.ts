/**
 * Types for the shim's JSDoc (checked by `tsc -p node_shim`, never shipped or loaded): the
 * rc.8 service augmentations the shim relies on, and the answers the sidecar sends
 * (bridge/transport/protocol.py is their source of truth; docs/protocol.md describes them).
 */
import type { Context } from '@deepseek-ai/cordis'
import type { StreamChunk } from '@deepseek-ai/dsh-llm'
import type { SubagentResult } from '@deepseek-ai/dsh-subagent'
import type { ToolDispatchExecution, ToolExecutionResult, ToolRunContext } from '@deepseek-ai/dsh-tools'
import type { SessionEventMap, UserMessage } from '@deepseek-ai/dsh-session'

// Each package augments cordis' `Context` and `Events` with its service and events.
import '@deepseek-ai/dsh-agent'
import '@deepseek-ai/dsh-agent-default-model'
import '@deepseek-ai/dsh-commands'
import '@deepseek-ai/dsh-fs'
import '@deepseek-ai/dsh-llm'
import '@deepseek-ai/dsh-session'
import '@deepseek-ai/dsh-subagent'
import '@deepseek-ai/dsh-tools'
import '@deepseek-ai/dsh-tool-todo'

export type { Context }

/**
 * What a `tools/execute` listener receives: rc.8 passes the registry's run context, so
 * `deferContext` is there although the event's typing names only `ToolDispatchExecution`.
 */
export type ToolCall = ToolDispatchExecution & Pick<ToolRunContext, 'deferContext'>

/**
 * The `initialize` result; `askExecute: false`: the tools hooks run every call without asking
 * and only report `tools/result`; `standIns`: a replay's recorded tool contracts, registered
 * where no plugin registered the tool when the first agent is created.
 */
export interface InitializeResult {
  protocolVersion: number
  hooks: Array<'tools' | 'llm' | 'subagent' | 'model' | 'turns' | 'warm' | 'steps'>
  sidecarVersion: string
  subagent?: SubagentSetup
  askExecute?: boolean
  standIns?: StandIn[]
  registry?: 'none' | 'names' | 'contracts'
  warm?: boolean
}

/** One session a warm host runs (`stop`: no more, exit). */
export interface WarmJob {
  sessionId?: string
  cwd?: string
  task?: string
  /** recorded tools to register on this session's agent only (no plugin registered them) */
  standIns?: StandIn[]
  processCwd?: string
  stop?: boolean
}

/** A warm session's end, as the shim saw it. */
export interface WarmDone {
  sessionId: string
  text?: string
  reason?: string | null
  code?: string
  message?: string
  failure?: string
}

/** A tool's contract as registered: what the cassette records and a stand-in registers. */
export interface ToolContract {
  description: string
  parameters: import('@deepseek-ai/dsh-tools').ToolSchema['parameters']
  output: import('@deepseek-ai/dsh-tools').ToolOutputDefinition['schema']
  presentationMeta?: boolean
  timeoutMs?: number
}

/** A recorded tool contract with its name. */
/** `shadow`: registered on the session's agent even where a plugin registered the tool (an imported cassette). */
export type StandIn = ToolContract & { name: string, shadow?: boolean }

/** Provider names: register the cassette as `name` once `upstream` exists. */
export interface SubagentSetup {
  name: string
  upstream: string
  /** the parent session event types `subagent/start` carries */
  parentEvents: string[]
  /** replay only: the recorded provider facts the cassette provider shows instead of the live ones */
  replayFacts?: { capabilities: UpstreamFacts['capabilities']; inheritsParentContext: boolean }
}

/** The `shutdown` result. */
export interface ShutdownResult {
  exitCode: number
  errors: string[]
  notes?: string[]
  /** the errors' hints, each once */
  fixes?: string[]
}

/**
 * The `tools/execute` answer (fields equal to their default are omitted on the wire);
 * `post: false`: the call's `tools/post-execute` accepts without a round trip.
 */
export type ExecuteDecision = { post?: boolean, describe?: boolean } & (
  | { action: 'next' }
  | { action: 'serve', result: ToolExecutionResult, deferContexts?: UserMessage[], cancellation?: ToolExecutionResult, host?: HostRestore | null }
  | { action: 'refuse', code: string, message: string })

/** What DSH tracked while a real body ran (`tools/post-execute`'s `host`). */
export type HostCapture = { observed: { path: string, kind: string }[], events: { type: string, data: unknown }[] }

/**
 * The host state Python chose to restore for a served call: absolute paths to observe, and
 * the session events of the types it restores (host_state.RESTORED_EVENTS), verbatim.
 */
export type HostRestore = { observe?: string[], events?: { type: 'todo/write', data: SessionEventMap['todo/write'] }[] }

/** The `tools/post-execute` answer. */
export type PostExecuteDecision = { action: 'accept' } | { action: 'refuse', code: string, message: string }

/** A `mock/status` record, appended verbatim to the agent's session log. */
export type Status = Record<string, unknown>

/** The `llm/stream` answer (an empty `text` or `calls` is omitted on the wire). */
export interface LlmResponse {
  kind: 'tool-calls' | 'text' | 'error'
  calls?: Array<{ id: string, name: string, arguments: string }>
  text?: string
  code?: string
  status?: Status
}

/** The `mock/pre-step` answer. */
export interface PreStepResult { mock: boolean, status?: Status }

/** The `mock/route` answer. */
export interface RouteResult { route: { provider: string, model: string } | null }

/** The `mock/cancel` answer. */
export interface CancelResult { status: Status | null }

/** The `mock/command` answer. */
export interface MockCommandResult { text: string }

/** A recorded thrown value. */
export interface ErrorInfo { name: string, message: string, code?: string }

/** A recorded subagent run outcome. */
export type SubagentOutcome =
  | { kind: 'result', result: SubagentResult }
  | { kind: 'start-error', error: ErrorInfo }
  | { kind: 'result-error', error: ErrorInfo }

/** A subagent cassette call handle. */
export interface CallHandle { sequence: number, callKey: string }

/**
 * The `subagent/start` answer (a zero delay is omitted on the wire); `aborted` is what a
 * replayed run's result settles to when its caller aborts.
 */
export type SubagentDecision =
  | { action: 'forward', handle: CallHandle }
  | {
    action: 'replay', handle: CallHandle, outcome: SubagentOutcome, delayMs?: number, startDelayMs?: number,
    aborted: SubagentResult
  }

/** The `model/request` answer. */
export type ModelDecision =
  | { action: 'pass' }
  | { action: 'forward', handle: number }
  | { action: 'replay', handle: number, chunks: StreamChunk[], atMs?: number[] }

/** Node-side timing of a forwarded subagent run. */
export interface RunTiming {
  startedAt: string
  startLatencyMs?: number
  durationMs?: number
  signalAbortedAtMs?: number
  disposeCalledAtMs?: number
}

/** A tool result as it travels on the wire (serialized as it is sent). */
export type WireResult = Readonly<ToolExecutionResult>

/** One loader row as the shim reports it at `initialize`: Python decides what the composition is. */
export interface PluginRow { name: string, enabled: boolean, package: string | null, version: string | null }

/** Every request the shim sends: its params and the sidecar's result. */
export interface Methods {
  'initialize': {
    params: { protocolVersion: number, host: Record<string, string | null>, config: unknown, cwd: string, pid: number, plugins?: PluginRow[] }
    result: InitializeResult
  }
  'shutdown': { params: Record<string, never>, result: ShutdownResult }
  'tools/execute': {
    params: { handle: string, path: string, tool: string, callId: string, args: string, sessionId: string | null }
    result: ExecuteDecision
  }
  'tools/post-execute': {
    params: { handle: string, path: string | null, tool: string, result: WireResult, host?: HostCapture, definition?: ToolContract | null }
    result: PostExecuteDecision
  }
  'llm/stream': {
    params: {
      sessionId: string, purpose: string | null, turn: number | null, step: number | null,
      results: Array<{ callId: string, tool: string, isError: boolean }>, tools: string[]
    }
    result: LlmResponse
  }
  'mock/pre-step': {
    params: { sessionId: string, turn: number, step: number, cwd: string, texts: string[] }
    result: PreStepResult
  }
  'mock/route': {
    params: { sessionId: string, turn: number, step: number, proposed: { provider: string, model: string } }
    result: RouteResult
  }
  'mock/cancel': { params: { sessionId: string, turn: number }, result: CancelResult }
  'mock/command': { params: { sessionId: string, rawInput: string }, result: MockCommandResult }
  'subagent/hello': { params: UpstreamFacts, result: Record<string, never> }
  'subagent/start': { params: SubagentStartParams, result: SubagentDecision }
  'subagent/outcome': { params: { handle: CallHandle, outcome: RunOutcome }, result: Record<string, never> }
  'model/request': { params: { request: Record<string, unknown>, initiator?: { origin?: string, delegationDepth?: number }, sessionId?: string }, result: ModelDecision }
  'model/recorded': {
    params: { handle: number, chunks: StreamChunk[], atMs: number[], complete: boolean, aborted?: boolean }
    result: Record<string, never>
  }
  'warm/next': { params: Record<string, never>, result: WarmJob }
  'warm/done': { params: WarmDone, result: Record<string, never> }
}

/** Every notification the shim sends, with its params. */
export interface Notifications {
  'tools/result': { handle: string, path: string | null, tool: string, callId: string, result: WireResult, sessionId: string | null }
  'tools/registry': { tools: { name: string, contract?: ToolContract | null }[], standIns: string[], failed: { tool: string, message: string }[] }
  'mock/session-end': { sessionId: string }
  'subagent/published': { handle: CallHandle, childId: string }
  'session/turn': { sessionId: string, turn: number, phase: 'start' | 'end', reason?: string | null }
  'model/step': { sessionId: string, turn: number, step: number, system: string | null, tools: { name: string, description?: string, parameters?: unknown }[] }
}

/** The upstream subagent provider's facts. */
export interface UpstreamFacts {
  name: string
  capabilities: { outputSchema: boolean, depthLimit: boolean, toolFilter: boolean, persona: boolean }
  inheritsParentContext: boolean
  continuable: boolean
}

/** `subagent/start` params: the request without its live parts, and the parent as the host shows it. */
export interface SubagentStartParams {
  request: Record<string, unknown>
  parent: {
    sessionId: string
    origin?: string
    delegationDepth?: number
    subagentDepth?: number
    agentPreset?: string
    route: { provider?: string, model?: string }
    events: Array<{ type: string, data: unknown }>
  }
  signalAborted: boolean
}

/** A forwarded subagent run's terminal facts. */
export interface RunOutcome {
  published: boolean
  local: boolean
  childId?: string
  timing: RunTiming
  outcome: SubagentOutcome
}

declare module '@deepseek-ai/dsh-session' {
  interface SessionEventMap {
    /** The mock plan's progress, appended by the shim as Python decided it. */
    'mock/status': Status
  }
}
