// @ts-check
/**
 * The tool pipeline hooks: `tools/execute` (outermost), `tools/post-execute`, `tools/result`.
 * The structural call path is stamped here, synchronously at entry; Python decides the rest.
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { plain } from './rpc.js'

/** @typedef {import('./rpc.js').Rpc} Rpc */

/** @param {string} code @param {string} message */
function failure(code, message) {
  const text = message.startsWith(`${code}:`) ? message : `${code}: ${message}`
  return { isError: true, error: { message: text, info: { name: 'SidecarError', code } }, content: [{ type: 'text', text: `Error: ${text}` }] }
}

/** @param {unknown} error */
function codeOf(error) {
  return /** @type {any} */ (error)?.code ?? 'SIDECAR_UNAVAILABLE'
}

/** Forward the tool pipeline; the structural path is stamped synchronously at entry. */
export function installToolHooks(/** @type {any} */ ctx, /** @type {Rpc} */ rpc) {
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

