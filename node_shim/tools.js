// @ts-check
/**
 * The tool pipeline hooks: `tools/execute` (outermost), `tools/post-execute`, `tools/result`.
 * The structural call path is stamped here, synchronously at entry; Python decides the rest.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { HarnessError } from '@deepseek-ai/dsh-llm'
import { codeOf, messageOf } from './rpc.js'
import { contractOf, installRegistry } from './standins.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('./types').ToolCall} ToolCall
 * @typedef {import('./types').HostCapture} HostCapture
 * @typedef {import('./types').HostRestore} HostRestore
 * @typedef {import('./types').StandIn} StandIn
 * @typedef {import('./standins.js').StandUp} StandUp
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
 * `installRegistry`; `warm`: a warm host reports the registry once its plugins are loaded.
 * @param {Context} ctx @param {Rpc} rpc @param {boolean} [ask] @param {StandIn[]} [standIns]
 * @param {'none' | 'names' | 'contracts'} [registry] @param {boolean} [warm]
 * @returns {StandUp} registers a warm session's stand-ins on its own agent
 */
export function installToolHooks(ctx, rpc, ask = true, standIns = [], registry = 'none', warm = false) {
  /** a call's path and how many children it has numbered so far @typedef {{ path: string, children: number }} CallNode */
  /** the call whose context this is @type {AsyncLocalStorage<CallNode>} */
  const als = new AsyncLocalStorage()
  /** @type {WeakMap<ToolExecutionToken, CallNode>} */
  const tokenNode = new WeakMap()
  /** @type {WeakMap<ToolExecutionToken, string>} */
  const tokenHandle = new WeakMap()
  /** calls whose post-execute Python said it does not need (`post: false`) @type {WeakSet<ToolExecutionToken>} */
  const noPost = new WeakSet()
  /** calls whose tool definition Python asked for (`describe`) @type {WeakSet<ToolExecutionToken>} */
  const describe = new WeakSet()
  const standing = installRegistry(ctx, rpc, standIns, registry, warm)
  /** the handle of the call whose real body runs in this async context @type {AsyncLocalStorage<string>} */
  const bodyOf = new AsyncLocalStorage()
  /**
   * What DSH tracked while a body ran (file observations, appended session events), sent with
   * its post-execute; Python keeps what a replay must restore.
   * @type {Map<string, HostCapture>}
   */
  const hostState = new Map()
  /** top-level calls so far, per calling agent @type {WeakMap<object, number>} */
  const roots = new WeakMap()
  let agentless = 0
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
    const parent = exec.parent !== undefined ? tokenNode.get(exec.parent) : als.getStore()
    let path
    if (parent === undefined) {
      // Numbered per session: sessions sharing a warm host number their calls as a process of their own.
      const n = exec.agent === undefined ? agentless++ : roots.get(exec.agent) ?? 0
      if (exec.agent !== undefined) roots.set(exec.agent, n + 1)
      path = `root/${n}`
    }
    else path = `${parent.path}/${parent.children++}`
    /** @type {CallNode} */
    const node = { path, children: 0 }
    tokenNode.set(exec.token, node)
    if (!ask) return als.run(node, next)
    const handle = handleOf(exec)
    return als.run(node, async () => {
      let decision
      try {
        decision = await rpc.request('tools/execute', {
          handle, path, tool: exec.name, callId: exec.callId, args: JSON.stringify(exec.arguments ?? null),
          sessionId: exec.agent === undefined ? null : String(exec.agent.id),
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
        handle, path: tokenNode.get(exec.token)?.path ?? null, tool: exec.name, result, host,
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
      handle: handleOf(exec), path: tokenNode.get(exec.token)?.path ?? null, tool: exec.name, callId: String(exec.callId), result,
      sessionId: exec.agent === undefined ? null : String(exec.agent.id),
    })
  })
  return standing.standUp
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
