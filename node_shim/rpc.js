// @ts-check
/**
 * JSON-RPC 2.0 over a child's stdio, one message per line. Only the shim sends requests and
 * notifications; the sidecar only answers. Mechanics only: framing, ids, pending map,
 * cancellation. No decisions.
 */

/** @typedef {{ code: number, message: string, data?: { code?: string, hint?: string } }} RpcErrorObject */
/** @typedef {import('./types').Methods} Methods @typedef {import('./types').Notifications} Notifications */

/** Longest line accepted from the sidecar (its own cap for the lines it reads, 64 MiB). */
export const MAX_LINE = 64 * 1024 * 1024

export class SidecarUnavailable extends Error {
  /** @param {string} message */
  constructor(message) {
    super(`SIDECAR_UNAVAILABLE: ${message}`)
    this.name = 'SidecarUnavailable'
    this.code = 'SIDECAR_UNAVAILABLE'
  }
}

export class RemoteError extends Error {
  /** @param {RpcErrorObject} error */
  constructor(error) {
    const code = error.data?.code ?? 'INTERNAL'
    super(error.message.startsWith(`${code}:`) ? error.message : `${code}: ${error.message}`)
    this.name = 'SidecarError'
    this.code = code
    /** how to fix it, when Python knows */
    this.hint = error.data?.hint
  }
}

export class Rpc {
  /**
   * @param {import('node:stream').Writable} output
   * @param {import('node:stream').Readable} input
   */
  constructor(output, input) {
    this.output = output
    /** @type {Map<number, {resolve: (value: unknown) => void, reject: (error: Error) => void}>} */
    this.pending = new Map()
    this.nextId = 1
    /** @type {Error | undefined} */
    this.dead = undefined
    /** set once shutdown starts, so the exit that follows is not reported as a death */
    this.closing = false
    let buffer = ''
    input.setEncoding('utf8')
    input.on('data', (chunk) => {
      buffer += chunk
      let start = 0
      let newline
      while ((newline = buffer.indexOf('\n', start)) >= 0) {
        if (newline > start) this.receive(buffer.slice(start, newline))
        start = newline + 1
      }
      buffer = start === 0 ? buffer : buffer.slice(start)
      // The sidecar's own cap: an answer can never be longer, so this is a broken stream.
      if (buffer.length > MAX_LINE) {
        buffer = ''
        this.fail(new SidecarUnavailable(`the sidecar wrote a line longer than ${MAX_LINE} characters`))
      }
    })
    output.on('error', (error) => this.fail(new SidecarUnavailable(`write failed: ${error.message}`)))
  }

  /** @param {string} line */
  receive(line) {
    let message
    try {
      message = JSON.parse(line)
    } catch {
      this.fail(new SidecarUnavailable('the sidecar wrote a line that is not JSON on the protocol stream'))
      return
    }
    // Only answers travel this way: anything else (a request, a stray id) settles nothing.
    if (message === null || typeof message !== 'object' || message.method !== undefined) return
    const waiter = this.pending.get(message.id)
    if (waiter === undefined) return
    this.pending.delete(message.id)
    if (message.error !== undefined) waiter.reject(new RemoteError(message.error))
    else waiter.resolve(message.result)
  }

  /** @param {object} message */
  write(message) {
    if (this.dead !== undefined) return
    this.output.write(JSON.stringify(message) + '\n')
  }

  /**
   * Send a request; an aborted `signal` sends `$/cancelRequest` and rejects.
   * @template {keyof Methods} M
   * @param {M} method
   * @param {Methods[M]['params']} params
   * @param {AbortSignal} [signal]
   * @returns {Promise<Methods[M]['result']>}
   */
  request(method, params, signal) {
    if (this.dead !== undefined) return Promise.reject(this.dead)
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      /** @type {(() => void) | undefined} */
      let onAbort
      const settle = () => { if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort) }
      this.pending.set(id, {
        // The sidecar answers `method` with its result shape (bridge/protocol.py METHODS).
        resolve: (value) => { settle(); resolve(/** @type {Methods[M]['result']} */ (value)) },
        reject: (error) => { settle(); reject(error) },
      })
      if (signal !== undefined) {
        onAbort = () => {
          if (!this.pending.has(id)) return
          this.pending.delete(id)
          this.write({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } })
          reject(signal.reason ?? new Error('aborted'))
        }
        if (signal.aborted) { onAbort(); return }
        signal.addEventListener('abort', onAbort, { once: true })
      }
      this.write({ jsonrpc: '2.0', id, method, params })
    })
  }

  /**
   * @template {keyof Notifications} N
   * @param {N} method @param {Notifications[N]} params
   */
  notify(method, params) {
    this.write({ jsonrpc: '2.0', method, params })
  }

  /** Fail every pending and future call closed. @param {Error} error */
  fail(error) {
    if (this.dead !== undefined) return
    this.dead = error
    for (const waiter of this.pending.values()) waiter.reject(error)
    this.pending.clear()
  }
}

/** The message of a thrown value. @param {unknown} error */
export function messageOf(error) {
  return error instanceof Error ? error.message : String(error)
}

/** The `code` of a thrown value, if it has a string one. @param {unknown} error @returns {string | undefined} */
export function codeOf(error) {
  const code = error instanceof Error && 'code' in error ? error.code : undefined
  return typeof code === 'string' ? code : undefined
}

/**
 * A JSON snapshot of a host value, as it travels on the wire.
 * @template T @param {T} value @returns {T}
 */
export function plain(value) {
  return value === undefined ? value : JSON.parse(JSON.stringify(value))
}
