// @ts-check
/**
 * The tool pipeline hooks: `tools/execute` (outermost), `tools/post-execute`, `tools/result`.
 * The structural call path is stamped here, synchronously at entry; Python decides the rest.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { HarnessError } from '@deepseek-ai/dsh-llm'
import { codeOf, messageOf } from './rpc.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('./types').ToolCall} ToolCall
 * @typedef {import('./types').HostCapture} HostCapture
 * @typedef {import('./types').HostRestore} HostRestore
 * @typedef {import('./types').StandIn} StandIn
 * @typedef {import('./types').ToolContract} ToolContract
 * @typedef {import('@deepseek-ai/dsh-tools').ToolDefinition} ToolDefinition
 * @typedef {import('@deepseek-ai/dsh-tools').ToolExecution} ToolExecution
 * @typedef {import('@deepseek-ai/dsh-tools').ToolExecutionToken} ToolExecutionToken
 * @typedef {import('@deepseek-ai/dsh-tools').ToolExecutionFailure} ToolExecutionFailure
 * @typedef {import('@deepseek-ai/dsh-tools').ToolExecutionResult} ToolExecutionResult
 */

/** @param {string} code @param {string} message */
const named = (code, message) => (message.startsWith(`${code}:`) ? message : `${code}: ${message}`)

/** @param {string} code @param {string} message @returns {ToolExecutionFailure} */
function failure(code, message) {
  const text = named(code, message)
  return { isError: true, error: { message: text, info: { name: 'SidecarError', code } }, content: [{ type: 'text', text: `Error: ${text}` }] }
}

/**
 * A refusal at post-execute. rc.8 turns a listener's thrown HarnessError into the call's failure
 * with `info: { name, code }` (a `block` decision would carry no code), matching `failure`.
 */
class SidecarError extends HarnessError {}

/**
 * Forward the tool pipeline; the structural path is stamped synchronously at entry.
 * `ask`: whether Python decides each call (the initialize reply's `askExecute`); when it does
 * not, calls run untouched and only their results are reported. `standIns`, `registry`: see
 * `installRegistry`.
 * @param {Context} ctx @param {Rpc} rpc @param {boolean} [ask] @param {StandIn[]} [standIns]
 * @param {'none' | 'names' | 'contracts'} [registry]
 */
export function installToolHooks(ctx, rpc, ask = true, standIns = [], registry = 'none') {
  /** @type {AsyncLocalStorage<string>} */
  const als = new AsyncLocalStorage()
  /** @type {WeakMap<ToolExecutionToken, string>} */
  const tokenPath = new WeakMap()
  /** @type {WeakMap<ToolExecutionToken, string>} */
  const tokenHandle = new WeakMap()
  /** calls whose post-execute Python said it does not need (`post: false`) @type {WeakSet<ToolExecutionToken>} */
  const noPost = new WeakSet()
  /** calls whose tool definition Python asked for (`describe`) @type {WeakSet<ToolExecutionToken>} */
  const describe = new WeakSet()
  const standing = installRegistry(ctx, rpc, standIns, registry)
  /** @type {Map<string, number>} */
  const children = new Map()
  /** the handle of the call whose real body runs in this async context @type {AsyncLocalStorage<string>} */
  const bodyOf = new AsyncLocalStorage()
  /**
   * What DSH tracked while a body ran (file observations, appended session events), sent with
   * its post-execute; Python keeps what a replay must restore.
   * @type {Map<string, HostCapture>}
   */
  const hostState = new Map()
  let roots = 0
  let handles = 0
  /** @param {{ token: ToolExecutionToken }} exec */
  const handleOf = (exec) => {
    let handle = tokenHandle.get(exec.token)
    if (handle === undefined) tokenHandle.set(exec.token, handle = `h${++handles}`)
    return handle
  }

  ctx.on('tools/execute', (dispatched, next) => {
    // rc.8 hands this listener the registry's run context (see ToolCall in types.d.ts).
    const exec = /** @type {ToolCall} */ (dispatched)
    const parentPath = exec.parent !== undefined ? tokenPath.get(exec.parent) : als.getStore()
    let path
    if (parentPath === undefined) path = `root/${roots++}`
    else {
      const n = children.get(parentPath) ?? 0
      children.set(parentPath, n + 1)
      path = `${parentPath}/${n}`
    }
    tokenPath.set(exec.token, path)
    if (!ask) return als.run(path, next)
    const handle = handleOf(exec)
    return als.run(path, async () => {
      let decision
      try {
        decision = await rpc.request('tools/execute', {
          handle, path, tool: exec.name, callId: exec.callId, args: JSON.stringify(exec.arguments ?? null),
        }, exec.signal)
      } catch (error) {
        if (exec.signal.aborted) return failure('ABORTED', 'tool call aborted')
        return failure(codeOf(error) ?? 'SIDECAR_UNAVAILABLE', messageOf(error))
      }
      if (decision.post === false) noPost.add(exec.token)
      if (decision.describe) describe.add(exec.token)
      if (decision.action === 'next') {
        if (decision.post === false) return next()
        hostState.set(handle, { observed: [], events: [] })
        return bodyOf.run(handle, next)
      }
      if (decision.action === 'refuse') return failure(decision.code, decision.message)
      for (const context of decision.deferContexts ?? []) exec.deferContext(context)
      await restoreHost(ctx, exec, decision.host)
      standing.served(exec, decision.result)
      return exec.signal.aborted && decision.cancellation ? decision.cancellation : decision.result
    })
  }, { prepend: true })

  ctx.on('fs/observed', (target, observation) => {
    hostState.get(bodyOf.getStore() ?? '')?.observed.push({ path: target.displayPath, kind: observation.kind })
  })
  ctx.on('session/event', (_session, event) => {
    hostState.get(bodyOf.getStore() ?? '')?.events.push({ type: event.type, data: event.data })
  })

  ctx.on('tools/post-execute', async (exec, result, next) => {
    if (!ask || noPost.has(exec.token)) return next()
    const handle = handleOf(exec)
    const host = hostState.get(handle)
    hostState.delete(handle)
    let decision
    try {
      decision = await rpc.request('tools/post-execute', {
        handle, path: tokenPath.get(exec.token) ?? null, tool: exec.name, result, host,
        ...(describe.has(exec.token) ? { definition: contractOf(ctx.tools.get(exec.name, exec.agent)) } : {}),
      })
    } catch (error) {
      decision = { action: 'refuse', code: codeOf(error) ?? 'SIDECAR_UNAVAILABLE', message: messageOf(error) }
    }
    if (decision.action === 'refuse') throw new SidecarError(named(decision.code, decision.message), decision.code)
    return next()
  }, { prepend: true })

  // Results are serialized as they are sent, so the wire carries a snapshot without a copy here.
  ctx.on('tools/result', (exec, result) => {
    hostState.delete(handleOf(exec))
    rpc.notify('tools/result', {
      handle: handleOf(exec), path: tokenPath.get(exec.token) ?? null, tool: exec.name, callId: String(exec.callId), result,
      sessionId: exec.agent === undefined ? null : String(exec.agent.id),
    })
  })
}

/**
 * A registered tool's contract as JSON: what a replay needs to stand it up again.
 * @param {ToolDefinition | undefined} tool @returns {ToolContract | null}
 */
function contractOf(tool) {
  if (tool === undefined) return null
  return {
    description: tool.description,
    parameters: tool.parameters,
    output: tool.output.schema,
    ...(tool.output.presentationMeta !== undefined ? { presentationMeta: true } : {}),
    ...(tool.timeoutMs !== undefined ? { timeoutMs: tool.timeoutMs } : {}),
  }
}

/**
 * Once, when the first agent is created (every plugin has activated by then: headless awaits
 * the loader first; no model request has been built yet): register a replay's recorded tool
 * contracts where no plugin registered the tool (its MCP server down, its row absent), and
 * report the registered tools (`registry`: their names, or names and contracts) and the
 * stand-ins. A stand-in renders what the real renderer produced for the served value (sent
 * with it); its body never runs, since the cassette serves or refuses every call of a selected tool.
 * @param {Context} ctx @param {Rpc} rpc @param {StandIn[]} standIns
 * @param {'none' | 'names' | 'contracts'} registry
 */
function installRegistry(ctx, rpc, standIns, registry) {
  /** the recorded rendering of each served call, by its frozen arguments @type {WeakMap<object, Readonly<ToolExecutionResult>>} */
  const byArgs = new WeakMap()
  /** @type {Map<unknown, Readonly<ToolExecutionResult>>} */
  const byValue = new Map()
  /** @type {Set<string>} */
  const stood = new Set()
  /** @param {unknown} args */
  const rendered = (args) => (typeof args === 'object' && args !== null ? byArgs.get(args) : byValue.get(args))
  if (standIns.length > 0 || registry !== 'none') {
    let done = false
    ctx.on('agent/created', () => {
      if (done) return
      done = true
      const names = ctx.tools.schemas().map((schema) => schema.name)
      const tools = names.map((name) => (registry === 'contracts' ? { name, contract: contractOf(ctx.tools.get(name)) } : { name }))
      /** @type {{ tool: string, message: string }[]} */
      const failed = []
      for (const contract of standIns) {
        if (ctx.tools.get(contract.name) !== undefined) continue
        try {
          ctx.tools.register(standIn(contract, rendered))
          stood.add(contract.name)
        } catch (error) {
          failed.push({ tool: contract.name, message: messageOf(error) })
        }
      }
      rpc.notify('tools/registry', { tools, standIns: [...stood], failed })
    })
  }
  return {
    /** @param {ToolCall} exec @param {Readonly<ToolExecutionResult>} result */
    served(exec, result) {
      if (!stood.has(exec.name) || result.isError) return
      const args = exec.arguments
      if (typeof args === 'object' && args !== null) byArgs.set(args, result)
      else byValue.set(args, result)
    },
  }
}

/**
 * @param {StandIn} contract
 * @param {(args: unknown) => Readonly<ToolExecutionResult> | undefined} rendered
 * @returns {ToolDefinition}
 */
function standIn(contract, rendered) {
  const name = contract.name
  /** @param {unknown} args */
  const recorded = (args) => {
    const result = rendered(args)
    if (result === undefined) throw new Error(`CASSETTE_STANDIN: tool ${name} is stood up from the cassette and has no recorded rendering for this value`)
    return result
  }
  return {
    name,
    description: contract.description,
    parameters: contract.parameters,
    ...(contract.timeoutMs !== undefined ? { timeoutMs: contract.timeoutMs } : {}),
    output: {
      schema: contract.output,
      render: (args) => [...recorded(args).content],
      ...(contract.presentationMeta ? { presentationMeta: (/** @type {unknown} */ args) => recorded(args).meta ?? null } : {}),
    },
    async execute() {
      throw new SidecarError(`CASSETTE_STANDIN: tool ${name} is stood up from the cassette: only its recorded calls are served`, 'CASSETTE_STANDIN')
    },
  }
}

/**
 * Apply the host state Python chose for a served call: observe each file as it is now (the
 * version token is the backend's and cannot be replayed), then append each session event.
 * @param {Context} ctx @param {ToolCall} exec
 * @param {HostRestore | null | undefined} host
 */
async function restoreHost(ctx, exec, host) {
  for (const path of host?.observe ?? []) {
    // The paths came from fs/observed at record time: the fs service that emitted them is loaded.
    const fs = /** @type {NonNullable<Context['fs']>} */ (ctx.get('fs'))
    const target = await fs.resolve(path)
    const info = await fs.stat(target)
    ctx.emit('fs/observed', target, info ? { kind: 'present', version: info.version } : { kind: 'absent' }, exec)
  }
  for (const event of host?.events ?? []) exec.agent?.session.append(event.type, event.data)
}
