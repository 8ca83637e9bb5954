// @ts-check
/**
 * The subagent provider whose `start()` Python decides: forward to the upstream provider
 * object (record) or return a replayed run. Registered only while the upstream exists.
 */
import { randomUUID } from 'node:crypto'
import { performance } from 'node:perf_hooks'
import { codeOf, plain } from './rpc.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('./types').ErrorInfo} ErrorInfo
 * @typedef {import('./types').RunTiming} RunTiming
 * @typedef {import('./types').RunOutcome} RunOutcome
 * @typedef {import('./types').CallHandle} CallHandle
 * @typedef {import('./types').SubagentSetup} SubagentSetup
 * @typedef {import('@deepseek-ai/dsh-subagent').SubagentProvider} SubagentProvider
 * @typedef {import('@deepseek-ai/dsh-subagent').SubagentRun} SubagentRun
 * @typedef {import('@deepseek-ai/dsh-subagent').SubagentResult} SubagentResult
 * @typedef {import('@deepseek-ai/dsh-subagent').ResolvedSubagentStartRequest} StartRequest
 * @typedef {import('@deepseek-ai/dsh-session').SessionId} SessionId
 */

/** `{name, message, code?}` of a thrown value. @param {unknown} error @returns {ErrorInfo} */
function errorInfo(error) {
  const e = error instanceof Error ? error : new Error(String(error))
  const code = codeOf(e)
  return { name: e.name, message: e.message, ...(code !== undefined ? { code } : {}) }
}

/** An Error carrying a recorded `{name, message, code?}`. @param {ErrorInfo} info */
function recordedError(info) {
  return Object.assign(new Error(info.message), { name: info.name, ...(info.code ? { code: info.code } : {}) })
}

/** The start request as JSON, without `parent`, `signal` and `descriptor`. @param {StartRequest} request */
function requestView(request) {
  /** @type {Record<string, unknown>} */
  const out = { prompt: plain(request.prompt) }
  /** @type {Array<'label' | 'agentOptions' | 'outputSchema' | 'maxDepth' | 'toolFilter' | 'persona'>} */
  const keys = ['label', 'agentOptions', 'outputSchema', 'maxDepth', 'toolFilter', 'persona']
  for (const key of keys) {
    if (request[key] !== undefined) out[key] = plain(request[key])
  }
  return out
}

/**
 * The parent as the host shows it, unjudged: Python derives the call's identity from these
 * facts. `eventTypes` are the session event types Python reads (the initialize reply names them).
 * @param {StartRequest} request @param {ReadonlySet<string>} eventTypes
 * @returns {import('./types').SubagentStartParams}
 */
function startParams(request, eventTypes) {
  const parent = request.parent
  const header = parent.session.header
  const options = parent.options
  return {
    request: requestView(request),
    parent: plain({
      sessionId: String(parent.id),
      origin: header.origin,
      delegationDepth: header.delegationDepth,
      subagentDepth: options.subagentDepth,
      agentPreset: header.agentPreset,
      route: { provider: options.provider, model: options.model },
      events: parent.session.events.filter((e) => eventTypes.has(e.type)).map((e) => ({ type: e.type, data: e.data })),
    }),
    signalAborted: request.signal.aborted,
  }
}

/** Resolve `ms` after `t0`, or as soon as `signal` aborts. @param {number} ms @param {number} t0 @param {AbortSignal} signal */
function until(ms, t0, signal) {
  const left = ms - (performance.now() - t0)
  if (left <= 0 || signal.aborted) return Promise.resolve()
  return new Promise((done) => {
    const timer = setTimeout(() => { signal.removeEventListener('abort', stop); done(undefined) }, left)
    const stop = () => { clearTimeout(timer); done(undefined) }
    signal.addEventListener('abort', stop, { once: true })
  })
}

/**
 * A subagent provider whose `start()` Python decides: forward to the upstream provider object
 * (record), or return a replayed run. Registered only while the upstream exists.
 */
export function installSubagentProvider(/** @type {Context} */ ctx, /** @type {Rpc} */ rpc, /** @type {SubagentSetup} */ setup) {
  const eventTypes = new Set(setup.parentEvents)
  /** @param {SubagentProvider} upstream @returns {SubagentProvider} */
  const wrap = (upstream) => {
    const continuable = typeof upstream.prepareContinuable === 'function'
    const facts = { name: upstream.name, capabilities: { ...upstream.capabilities }, inheritsParentContext: upstream.inheritsParentContext, continuable }
    const hello = rpc.request('subagent/hello', facts)
    /** @type {SubagentProvider['start']} */
    const start = async (request) => {
      const t0 = performance.now()
      await hello
      const decision = await rpc.request('subagent/start', startParams(request, eventTypes), request.signal)
      if (decision.action === 'replay') return replayRun(request, decision, t0)
      return forwardRun(upstream, request, decision.handle, t0)
    }
    const prepare = upstream.prepareContinuable?.bind(upstream)
    // What the host is shown: the live facts, or in replay the recorded ones Python sends.
    const shown = { ...facts, ...setup.replayFacts }
    // Continuable children never pass through start(); forwarding keeps continuable tool rows
    // mounting, and Python reports at shutdown when a recording saw no start() at all.
    return {
      name: setup.name, capabilities: shown.capabilities, inheritsParentContext: shown.inheritsParentContext, start,
      ...(prepare !== undefined ? { prepareContinuable: prepare } : {}),
    }
  }

  /**
   * @param {StartRequest} request @param {Extract<import('./types').SubagentDecision, { action: 'replay' }>} decision
   * @param {number} t0 @returns {Promise<SubagentRun>}
   */
  const replayRun = async (request, decision, t0) => {
    const outcome = decision.outcome
    await until(decision.startDelayMs ?? 0, t0, request.signal)
    if (request.signal.aborted) throw request.signal.reason ?? new Error('subagent request was aborted before child publication')
    if (outcome.kind === 'start-error') throw recordedError(outcome.error)
    /** @type {PromiseWithResolvers<SubagentResult>} */
    const { promise: result, resolve, reject } = Promise.withResolvers()
    const aborted = () => resolve(decision.aborted)
    request.signal.addEventListener('abort', aborted, { once: true })
    until(decision.delayMs ?? 0, t0, request.signal).then(() => {
      if (request.signal.aborted) return
      if (outcome.kind === 'result-error') reject(recordedError(outcome.error))
      else resolve(outcome.result)
    })
    return {
      // A replayed run has no session: its id is a fresh opaque string, branded as the type asks.
      id: /** @type {SessionId} */ (`cassette-${randomUUID()}`),
      localAgent: undefined,
      result: result.finally(() => request.signal.removeEventListener('abort', aborted)),
      async dispose() { request.signal.removeEventListener('abort', aborted); aborted() },
    }
  }

  /**
   * @param {SubagentProvider} upstream @param {StartRequest} request @param {CallHandle} handle
   * @param {number} t0 @returns {Promise<SubagentRun>}
   */
  const forwardRun = async (upstream, request, handle, t0) => {
    /** @type {RunTiming} */
    const timing = { startedAt: new Date().toISOString() }
    const onAbort = () => { timing.signalAbortedAtMs ??= performance.now() - t0 }
    request.signal.addEventListener('abort', onAbort, { once: true })
    /** @param {Omit<RunOutcome, 'timing'>} outcome */
    const report = (outcome) => {
      timing.durationMs = performance.now() - t0
      request.signal.removeEventListener('abort', onAbort)
      return rpc.request('subagent/outcome', { handle, outcome: { ...outcome, timing } })
    }
    let run
    try {
      run = await upstream.start(request)
    } catch (error) {
      timing.startLatencyMs = performance.now() - t0
      await report({ published: false, local: false, outcome: { kind: 'start-error', error: errorInfo(error) } })
      throw error
    }
    timing.startLatencyMs = performance.now() - t0
    rpc.notify('subagent/published', { handle, childId: String(run.id) })
    const local = run.localAgent !== undefined
    const result = run.result.then(
      async (value) => {
        await report({ published: true, local, childId: String(run.id), outcome: { kind: 'result', result: plain(value) } })
        return value
      },
      async (error) => {
        await report({ published: true, local, childId: String(run.id), outcome: { kind: 'result-error', error: errorInfo(error) } })
        throw error
      },
    )
    return {
      id: run.id,
      localAgent: run.localAgent,
      result,
      dispose() {
        timing.disposeCalledAtMs ??= performance.now() - t0
        return run.dispose()
      },
    }
  }

  /** @type {(() => void) | undefined} */
  let unregister
  const mount = (/** @type {SubagentProvider} */ upstream) => { unregister = ctx.subagents.registerProvider(wrap(upstream)) }
  ctx.on('subagent/provider-added', (p) => {
    if (p.name === setup.upstream && unregister === undefined) mount(p)
  })
  ctx.on('subagent/provider-removed', (removed) => {
    if (removed !== setup.upstream || unregister === undefined) return
    unregister()
    unregister = undefined
  })
  const present = ctx.subagents.getProvider(setup.upstream)
  if (present !== undefined) mount(present)
}
