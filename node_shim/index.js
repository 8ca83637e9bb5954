// @ts-check
/**
 * dsh-sidecar shim: forwards DSH rc.8 extension points to the Python sidecar over stdio
 * JSON-RPC. It computes only what the host alone can see (structural call path, turn/step,
 * session id) and turns Python's answers into host values. Every decision is Python's.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { randomUUID } from 'node:crypto'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import z from '@deepseek-ai/schemastery'
import { CallId, LlmAdapter, LlmError, createUserMessage, resolveRetryPolicy } from '@deepseek-ai/dsh-llm'
import { Rpc, SidecarUnavailable } from './rpc.js'

export const name = 'dsh-sidecar'
export const inject = ['tools', 'llm']
const PROTOCOL_VERSION = 1

const here = dirname(fileURLToPath(import.meta.url))

/** The Python the installer ran with, unless the row names one. */
function installedPython() {
  const file = join(here, 'install.json')
  if (!existsSync(file)) return ['python3']
  return JSON.parse(readFileSync(file, 'utf8')).python
}

// Sections other than `python` are validated by Python at `initialize` (unknown keys included).
export const Config = z.object({
  python: z.array(z.string()).description('argv prefix that starts Python (default: the installing interpreter)'),
  toolCassette: z.any(),
  mock: z.any(),
  subagentCassette: z.any(),
})

/** @param {string} pkg */
function versionOf(pkg) {
  const require = createRequire(import.meta.url)
  for (const dir of require.resolve.paths(pkg) ?? []) {
    const file = join(dir, pkg, 'package.json')
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')).version
  }
  return null
}

const HOST_PACKAGES = ['@deepseek-ai/dsh', '@deepseek-ai/dsh-tools', '@deepseek-ai/dsh-llm',
  '@deepseek-ai/dsh-agent', '@deepseek-ai/dsh-subagent', '@deepseek-ai/cordis']

/** @param {string} code @param {string} message */
function failure(code, message) {
  const text = message.startsWith(`${code}:`) ? message : `${code}: ${message}`
  return { isError: true, error: { message: text, info: { name: 'SidecarError', code } }, content: [{ type: 'text', text: `Error: ${text}` }] }
}

/** @param {unknown} error */
function codeOf(error) {
  return /** @type {any} */ (error)?.code ?? 'SIDECAR_UNAVAILABLE'
}

/** @param {unknown} value */
function plain(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value))
}

/** Start the sidecar and finish the handshake. @param {any} config */
async function startSidecar(config) {
  const python = config.python?.length ? config.python : installedPython()
  const argv = [...python, '-m', 'bridge']
  const child = spawn(argv[0], argv.slice(1), {
    cwd: process.cwd(),
    stdio: ['pipe', 'pipe', 'inherit'],
    // Bytecode caching stays on even where the environment turns it off: without it every
    // sidecar start recompiles bridge/ and python_core/, and DSH boot waits for the handshake.
    env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '' },
  })
  const rpc = new Rpc(/** @type {any} */ (child.stdin), /** @type {any} */ (child.stdout))
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
    child.on('error', (error) => resolve({ code: null, signal: null, error }))
  })
  exited.then((/** @type {any} */ how) => {
    const why = how.error ? `cannot start sidecar (${how.error.code ?? how.error.message})` : `sidecar exited (code ${how.code}, signal ${how.signal})`
    if (rpc.dead === undefined && !rpc.closing) {
      process.stderr.write(`dsh-sidecar: SIDECAR_UNAVAILABLE: ${why}; every later call fails closed\n`)
      process.once('exit', () => { process.exitCode = Math.max(Number(process.exitCode ?? 0), 1) })
    }
    rpc.fail(new SidecarUnavailable(why))
  })
  const versions = Object.fromEntries(HOST_PACKAGES.map((p) => [p, versionOf(p)]))
  try {
    const reply = await rpc.request('initialize', {
      protocolVersion: PROTOCOL_VERSION, host: versions, config: plain(config), cwd: process.cwd(), pid: process.pid,
    })
    return { rpc, child, exited, reply }
  } catch (error) {
    // The plugin will not activate, so no cleanup effect will run: close the child here.
    rpc.closing = true
    child.stdin?.end()
    throw error
  }
}

/** @param {import('@deepseek-ai/cordis').Context} ctx @param {any} config */
export async function apply(ctx, config) {
  /** @type {Rpc | undefined} */
  let rpc
  /** @type {any} */
  let reply
  await ctx.effect(async () => {
    const started = await startSidecar(config)
    rpc = started.rpc
    reply = started.reply
    return async () => {
      const sidecar = started.rpc
      let status = { exitCode: 0, errors: [], notes: [] }
      if (sidecar.dead === undefined) {
        try { status = await sidecar.request('shutdown', {}) } catch (error) {
          status = { exitCode: 1, errors: [/** @type {Error} */ (error).message], notes: [] }
        }
      }
      sidecar.closing = true
      started.child.stdin?.end()
      const timer = setTimeout(() => started.child.kill('SIGKILL'), 10_000)
      await started.exited
      clearTimeout(timer)
      for (const line of [...status.notes ?? [], ...status.errors]) process.stderr.write(`dsh-sidecar: ${line}\n`)
      if (status.exitCode !== 0) {
        process.once('exit', () => { process.exitCode = Math.max(Number(process.exitCode ?? 0), status.exitCode) })
      }
    }
  }, 'dsh-sidecar process')
  const live = /** @type {Rpc} */ (rpc)
  const hooks = new Set(reply.hooks)
  if (hooks.has('tools')) installToolHooks(ctx, live)
  if (hooks.has('llm')) installMockRoute(ctx, live)
  if (hooks.has('subagent')) {
    ctx.inject(['subagents'], (/** @type {any} */ sctx) => installSubagentProvider(sctx, live, reply.subagent))
  }
}

/** Forward the tool pipeline; the structural path is stamped synchronously at entry. */
function installToolHooks(/** @type {any} */ ctx, /** @type {Rpc} */ rpc) {
  const als = new AsyncLocalStorage()
  /** @type {WeakMap<symbol, string>} */
  const tokenPath = new WeakMap()
  /** @type {WeakMap<symbol, string>} */
  const tokenHandle = new WeakMap()
  /** @type {Map<string, number>} */
  const children = new Map()
  let roots = 0
  let handles = 0
  const handleOf = (/** @type {any} */ exec) => {
    let handle = tokenHandle.get(exec.token)
    if (handle === undefined) tokenHandle.set(exec.token, handle = `h${++handles}`)
    return handle
  }

  ctx.on('tools/execute', (/** @type {any} */ exec, /** @type {() => Promise<any>} */ next) => {
    const parentPath = exec.parent !== undefined ? tokenPath.get(exec.parent) : als.getStore()
    let path
    if (parentPath === undefined) path = `root/${roots++}`
    else {
      const n = children.get(parentPath) ?? 0
      children.set(parentPath, n + 1)
      path = `${parentPath}/${n}`
    }
    tokenPath.set(exec.token, path)
    const handle = handleOf(exec)
    return als.run(path, async () => {
      let decision
      try {
        decision = await rpc.request('tools/execute', {
          handle, path, tool: exec.name, callId: exec.callId, args: JSON.stringify(exec.arguments ?? null),
        }, exec.signal)
      } catch (error) {
        if (exec.signal.aborted) return failure('ABORTED', 'tool call aborted')
        return failure(codeOf(error), /** @type {Error} */ (error).message)
      }
      if (decision.action === 'next') return next()
      if (decision.action === 'refuse') return failure(decision.code, decision.message)
      for (const context of decision.deferContexts ?? []) exec.deferContext(context)
      return exec.signal.aborted && decision.cancellation ? decision.cancellation : decision.result
    })
  }, { prepend: true })

  ctx.on('tools/post-execute', async (/** @type {any} */ exec, /** @type {any} */ result, /** @type {() => Promise<any>} */ next) => {
    let decision
    try {
      decision = await rpc.request('tools/post-execute', {
        handle: handleOf(exec), path: tokenPath.get(exec.token) ?? null, tool: exec.name, result: plain(result),
      })
    } catch (error) {
      decision = { action: 'refuse', message: /** @type {Error} */ (error).message }
    }
    if (decision.action === 'refuse') return { kind: 'block', feedback: [{ type: 'text', text: `Error: ${decision.message}` }] }
    return next()
  }, { prepend: true })

  ctx.on('tools/result', (/** @type {any} */ exec, /** @type {any} */ result) => {
    rpc.notify('tools/result', {
      handle: handleOf(exec), path: tokenPath.get(exec.token) ?? null, tool: exec.name, callId: String(exec.callId), result: plain(result),
    })
  })
}

/** A chunk stream for one complete response Python decided. @param {any} response */
function* chunksOf(response) {
  const usage = { type: 'usage', usage: { inputTokens: 0, outputTokens: 0 } }
  if (response.kind === 'tool-calls') {
    let index = 0
    for (const call of response.calls) {
      const block = { type: 'tool-call', id: CallId(call.id), name: call.name, arguments: call.arguments }
      yield { type: 'block-start', index, blockType: 'tool-call' }
      yield { type: 'block-end', index, block }
      index++
    }
    yield usage
    yield { type: 'finish', reason: { kind: 'tool-calls' } }
    return
  }
  yield { type: 'block-start', index: 0, blockType: 'text' }
  yield { type: 'text-delta', index: 0, text: response.text }
  yield { type: 'block-end', index: 0, block: { type: 'text', text: response.text } }
  yield usage
  yield { type: 'finish', reason: { kind: 'stop' } }
}

/** Tool results the model sees since its last message, named by that message's calls. @param {any[]} messages */
function latestResults(messages) {
  const out = []
  let i = messages.length - 1
  for (; i >= 0 && messages[i].role !== 'assistant'; i--) {
    for (const block of messages[i].content ?? []) {
      if (block.type === 'tool-result') out.unshift({ callId: String(block.toolCallId), isError: block.isError === true })
    }
  }
  const names = new Map((messages[i]?.content ?? []).filter((/** @type {any} */ b) => b.type === 'tool-call').map((/** @type {any} */ b) => [String(b.id), b.name]))
  return out.map((r) => ({ ...r, tool: names.get(r.callId) ?? '' }))
}

/** Text of the user messages entering a step. @param {any[]} messages */
function userTexts(messages) {
  return messages.map((m) => (m.content ?? []).filter((/** @type {any} */ b) => b.type === 'text').map((/** @type {any} */ b) => b.text).join(''))
}

/** Append Python's `mock/status` record to the agent's session log, if any. @param {any} agent @param {any} status */
function appendStatus(agent, status) {
  if (agent !== undefined && status) agent.session.append('mock/status', status)
}

/** The `mock` route, served by Python, plus the per-turn routing hooks and the `/mock` command. */
function installMockRoute(/** @type {any} */ ctx, /** @type {Rpc} */ rpc) {
  /** @type {Map<string, {turn: number, step: number}>} */
  const current = new Map()
  /** @type {Map<string, any>} */
  const agents = new Map()

  class SidecarAdapter extends LlmAdapter {
    /** @param {string} provider */
    providerInfo(provider) { return { id: provider, name: 'dsh-sidecar mock' } }
    /** @param {string} provider */
    providerRetryPolicy(provider) { return resolveRetryPolicy({ mode: 'normal', maxRetries: 0 }, `mock ${provider}`) }
    /** @param {string} provider */
    async listModels(provider) { return [{ provider, id: 'mock', name: 'dsh-sidecar mock', inputModalities: ['text'] }] }
    /** @param {string} provider @param {string} model */
    async resolveModel(provider, model) { return { provider, id: model, name: 'dsh-sidecar mock', context: { contextWindow: 1_000_000 } } }
    /** @param {any} options */
    async *stream(options) {
      const sessionId = String(options.sessionId ?? '')
      const where = current.get(sessionId)
      let reply
      try {
        reply = await rpc.request('llm/stream', {
          sessionId, purpose: options.purpose ?? null, turn: where?.turn ?? null, step: where?.step ?? null,
          results: latestResults(options.messages ?? []),
          tools: (options.tools ?? []).map((/** @type {any} */ t) => t.name),
        }, options.signal)
      } catch (error) {
        if (options.signal?.aborted && where !== undefined) {
          const final = await rpc.request('mock/cancel', { sessionId, turn: where.turn }).catch(() => null)
          appendStatus(agents.get(sessionId), final?.status)
        }
        throw error
      }
      appendStatus(agents.get(sessionId), reply.status)
      if (reply.kind === 'error') throw new LlmError(reply.text, reply.code)
      yield* chunksOf(reply)
    }
  }
  ctx.llm.registerAdapter(['mock'], new SidecarAdapter())

  ctx.on('agent/pre-step', async (/** @type {any} */ payload, /** @type {() => Promise<any>} */ next) => {
    const decision = await next()
    if (decision.kind !== 'enter' || decision.messages.length === 0) return decision
    const reply = await rpc.request('mock/pre-step', {
      sessionId: String(payload.agent.id), turn: payload.turn, step: payload.step,
      cwd: payload.agent.session?.header?.cwd ?? process.cwd(), texts: userTexts(decision.messages),
    }, payload.signal)
    appendStatus(payload.agent, reply.status)
    return decision
  }, { prepend: true })

  ctx.on('agent/request', async (/** @type {any} */ payload, /** @type {() => Promise<any>} */ next) => {
    const proposed = await next()
    const sessionId = String(payload.agent.id)
    agents.set(sessionId, payload.agent)
    const reply = await rpc.request('mock/route', {
      sessionId, turn: payload.turn, step: payload.step, proposed: { provider: proposed.provider, model: proposed.model },
    }, payload.signal)
    current.set(sessionId, { turn: payload.turn, step: payload.step })
    return reply.route ?? proposed
  }, { prepend: true })

  ctx.on('agent/disposed', (/** @type {any} */ { agent }) => {
    const sessionId = String(agent.id)
    agents.delete(sessionId)
    current.delete(sessionId)
    rpc.notify('mock/session-end', { sessionId })
  })

  // Web UI, followup and steer: Python checks the grammar now; the turn itself starts when the
  // queued message enters a step (mock/pre-step), exactly like a headless `/mock` task.
  ctx.inject(['commands'], (/** @type {any} */ cctx) => {
    cctx.commands.register({
      name: 'mock',
      description: 'Run one turn against the deterministic mock model',
      input: { hint: 'run tool({...}) | run [a({...}) b({...})] | replay <path> [--overwrite-wait-time-ms N]', images: false },
      handler: async (/** @type {any} */ { agent, rawInput, signal }) => {
        try {
          const reply = await rpc.request('mock/command', { sessionId: String(agent.id), rawInput }, signal)
          agent.followup(createUserMessage({ content: [{ type: 'text', text: `/mock${rawInput}` }], source: { kind: 'plugin', plugin: name } }))
          return { kind: 'success', text: reply.text }
        } catch (error) {
          return { kind: 'error', text: /** @type {Error} */ (error).message }
        }
      },
    })
  })
}

/** `{name, message, code?}` of a thrown value. @param {unknown} error */
function errorInfo(error) {
  const e = error instanceof Error ? error : new Error(String(error))
  const code = /** @type {any} */ (e).code
  return { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}) }
}

/** An Error carrying a recorded `{name, message, code?}`. @param {any} info */
function recordedError(info) {
  return Object.assign(new Error(info.message), { name: info.name, ...(info.code ? { code: info.code } : {}) })
}

/** The start request as JSON, without `parent`, `signal` and `descriptor`. @param {any} request */
function requestView(request) {
  /** @type {any} */
  const out = { prompt: plain(request.prompt) }
  for (const key of ['label', 'agentOptions', 'outputSchema', 'maxDepth', 'toolFilter', 'persona']) {
    if (request[key] !== undefined) out[key] = plain(request[key])
  }
  return out
}

/** What Python needs of the parent: identity facts and its model-visible events. @param {any} request */
function startParams(request) {
  const parent = request.parent
  const header = parent.session.header ?? {}
  return {
    request: requestView(request),
    parentSessionId: String(parent.id),
    ...(header.origin === 'subagent' ? { parentOrigin: 'subagent' } : {}),
    parentDepth: Math.max(header.delegationDepth ?? 0, parent.options?.subagentDepth ?? 0),
    ...(header.agentPreset !== undefined ? { parentPreset: header.agentPreset } : {}),
    parentRoute: plain({ provider: parent.options?.provider, model: parent.options?.model }),
    parentEvents: parent.session.events
      .filter((/** @type {any} */ e) => e.type === 'user/message' || e.type === 'assistant/message' || e.type === 'tool/result')
      .map((/** @type {any} */ e) => ({ type: e.type, data: plain(e.data) })),
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
function installSubagentProvider(/** @type {any} */ ctx, /** @type {Rpc} */ rpc, /** @type {{name: string, upstream: string}} */ setup) {
  const wrap = (/** @type {any} */ upstream) => {
    const continuable = typeof upstream.prepareContinuable === 'function'
    const facts = { name: upstream.name, capabilities: { ...upstream.capabilities }, inheritsParentContext: upstream.inheritsParentContext, continuable }
    const hello = rpc.request('subagent/hello', facts)
    /** @type {any} */
    const provider = {
      name: setup.name,
      capabilities: facts.capabilities,
      inheritsParentContext: facts.inheritsParentContext,
      async start(/** @type {any} */ request) {
        const t0 = performance.now()
        await hello
        const decision = await rpc.request('subagent/start', startParams(request), request.signal)
        if (decision.action === 'replay') return replayRun(request, decision, t0)
        return forwardRun(upstream, request, decision.handle, t0)
      },
    }
    // Continuable children never pass through start(); forwarding keeps continuable tool rows
    // mounting, and Python reports at shutdown when a recording saw no start() at all.
    if (continuable) provider.prepareContinuable = (/** @type {any} */ request) => upstream.prepareContinuable(request)
    return provider
  }

  const replayRun = async (/** @type {any} */ request, /** @type {any} */ decision, /** @type {number} */ t0) => {
    const outcome = decision.outcome
    await until(decision.startDelayMs, t0, request.signal)
    if (request.signal.aborted) throw request.signal.reason ?? new Error('subagent request was aborted before child publication')
    if (outcome.kind === 'start-error') throw recordedError(outcome.error)
    /** @type {(value: any, failed?: boolean) => void} */
    let settle = () => {}
    const result = new Promise((resolve, reject) => { settle = (value, failed) => (failed ? reject(value) : resolve(value)) })
    const aborted = () => settle({ output: [], stopReason: 'aborted' })
    request.signal.addEventListener('abort', aborted, { once: true })
    until(decision.delayMs, t0, request.signal).then(() => {
      if (request.signal.aborted) return
      if (outcome.kind === 'result-error') settle(recordedError(outcome.error), true)
      else settle(outcome.result)
    })
    return {
      id: `cassette-${randomUUID()}`,
      localAgent: undefined,
      result: result.finally(() => request.signal.removeEventListener('abort', aborted)),
      async dispose() { request.signal.removeEventListener('abort', aborted); aborted() },
    }
  }

  const forwardRun = async (/** @type {any} */ upstream, /** @type {any} */ request, /** @type {any} */ handle, /** @type {number} */ t0) => {
    /** @type {any} */
    const timing = { startedAt: new Date().toISOString() }
    const onAbort = () => { timing.signalAbortedAtMs ??= performance.now() - t0 }
    request.signal.addEventListener('abort', onAbort, { once: true })
    const report = (/** @type {any} */ outcome) => {
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
      async (/** @type {any} */ value) => {
        await report({ published: true, local, childId: String(run.id), outcome: { kind: 'result', result: plain(value) } })
        return value
      },
      async (/** @type {unknown} */ error) => {
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
  const mount = (/** @type {any} */ upstream) => { unregister = ctx.subagents.registerProvider(wrap(upstream)) }
  ctx.on('subagent/provider-added', (/** @type {any} */ p) => {
    if (p.name === setup.upstream && unregister === undefined) mount(p)
  })
  ctx.on('subagent/provider-removed', (/** @type {string} */ removed) => {
    if (removed !== setup.upstream || unregister === undefined) return
    unregister()
    unregister = undefined
  })
  const present = ctx.subagents.getProvider(setup.upstream)
  if (present !== undefined) mount(present)
}
