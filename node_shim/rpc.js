// @ts-check
/**
 * JSON-RPC 2.0 over a child's stdio, one message per line. Only the shim sends requests and
 * notifications; the sidecar only answers. Mechanics only: framing, ids, pending map,
 * cancellation, the line cap. No decisions.
 */

/**
 * @typedef {import('./types').Methods} Methods
 * @typedef {import('./types').Notifications} Notifications
 */

/** Longest line either side accepts, in UTF-8 bytes without the newline (the sidecar's cap too). */
export const MAX_LINE = 64 * 1024 * 1024

/**
 * Longest a notification waits for a request to carry it (ms). Notifications need no answer,
 * so they leave with the next request's write instead of waking the sidecar on their own.
 */
export const NOTIFY_DELAY_MS = 10

const NEWLINE = 0x0a
// A UTF-16 code unit is at most 3 UTF-8 bytes: shorter strings cannot exceed the cap.
const SURELY_UNDER_CAP = Math.floor(MAX_LINE / 3)

export class SidecarUnavailable extends Error {
  /** @param {string} message */
  constructor(message) {
    super(`SIDECAR_UNAVAILABLE: ${message}`)
    this.name = 'SidecarUnavailable'
    this.code = 'SIDECAR_UNAVAILABLE'
  }
}

/** A message the shim refuses to send: the sidecar would refuse the line and stop reading. */
export class MessageTooLarge extends Error {
  /** @param {string} method @param {number} bytes */
  constructor(method, bytes) {
    super(`MESSAGE_TOO_LARGE: ${method} is ${bytes} bytes as a protocol line, over the ${MAX_LINE}-byte cap; `
      + 'it was not sent (keep tool arguments, results and requests under 64 MiB)')
    this.name = 'MessageTooLarge'
    this.code = 'MESSAGE_TOO_LARGE'
  }
}

/** @param {unknown} value @returns {value is Record<string, unknown>} */
function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

export class RemoteError extends Error {
  /** @param {unknown} error the answer's `error` member */
  constructor(error) {
    const object = isObject(error) ? error : {}
    const data = isObject(object.data) ? object.data : {}
    const code = typeof data.code === 'string' ? data.code : 'INTERNAL'
    const text = typeof object.message === 'string' ? object.message : 'the sidecar answered an error without a message'
    super(text.startsWith(`${code}:`) ? text : `${code}: ${text}`)
    this.name = 'SidecarError'
    this.code = code
    /** how to fix it, when Python knows */
    this.hint = typeof data.hint === 'string' ? data.hint : undefined
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
    /** lines waiting for the next write */
    this.queued = ''
    /** a flush is queued for the end of this turn of the event loop */
    this.flushQueued = false
    /** @type {NodeJS.Timeout | undefined} */
    this.flushTimer = undefined
    /** @type {Buffer[]} the start of a line whose newline has not arrived yet */
    let held = []
    let heldSize = 0
    input.on('data', (/** @type {Buffer} */ chunk) => {
      if (this.dead !== undefined) return
      let start = 0
      let newline = chunk.indexOf(NEWLINE)
      if (held.length > 0) {
        if (newline < 0) {
          held.push(chunk)
          heldSize += chunk.length
          if (heldSize > MAX_LINE) this.tooLong()
          return
        }
        held.push(chunk.subarray(0, newline))
        const line = Buffer.concat(held, heldSize + newline)
        held = []
        heldSize = 0
        if (line.length > MAX_LINE) return this.tooLong()
        this.receive(line.toString('utf8'))
        start = newline + 1
        newline = chunk.indexOf(NEWLINE, start)
      }
      while (newline >= 0) {
        if (newline - start > MAX_LINE) return this.tooLong()
        if (newline > start) this.receive(chunk.toString('utf8', start, newline))
        start = newline + 1
        newline = chunk.indexOf(NEWLINE, start)
      }
      if (start < chunk.length) {
        held.push(start === 0 ? chunk : chunk.subarray(start))
        heldSize = chunk.length - start
        if (heldSize > MAX_LINE) this.tooLong()
      }
    })
    output.on('error', (error) => this.fail(new SidecarUnavailable(`write failed: ${error.message}`)))
  }

  /** The sidecar's own cap bounds its answers, so a longer line is a broken stream. */
  tooLong() {
    this.fail(new SidecarUnavailable(`the sidecar wrote a line longer than ${MAX_LINE} bytes`))
  }

  /** @param {string} line */
  receive(line) {
    /** @type {unknown} */
    let message
    try {
      message = JSON.parse(line)
    } catch {
      this.fail(new SidecarUnavailable('the sidecar wrote a line that is not JSON on the protocol stream'))
      return
    }
    // Only answers travel this way: anything else (a request, a stray id) settles nothing.
    if (!isObject(message) || message.method !== undefined || typeof message.id !== 'number') return
    const waiter = this.pending.get(message.id)
    if (waiter === undefined) return
    this.pending.delete(message.id)
    if (message.error !== undefined) waiter.reject(new RemoteError(message.error))
    else waiter.resolve(message.result)
  }

  /**
   * One message as a protocol line, or the refusal when the line would be over the cap.
   * @param {string} method @param {object} message @returns {string | MessageTooLarge}
   */
  line(method, message) {
    const text = JSON.stringify(message)
    if (text.length > SURELY_UNDER_CAP) {
      const bytes = Buffer.byteLength(text)
      if (bytes > MAX_LINE) return new MessageTooLarge(method, bytes)
    }
    return text + '\n'
  }

  /**
   * Queue `line` after the queued notifications; everything sent in the same turn of the event
   * loop (the calls one chunk of answers wakes, say) leaves in one write, before any I/O.
   * @param {string} line
   */
  send(line) {
    if (this.dead !== undefined) return
    this.queued += line
    if (!this.flushQueued) {
      this.flushQueued = true
      queueMicrotask(() => { this.flushQueued = false; this.flush() })
    }
  }

  /** Write the queued lines now. */
  flush() {
    if (this.dead !== undefined || this.queued === '') return
    const data = this.queued
    this.queued = ''
    clearTimeout(this.flushTimer)
    this.flushTimer = undefined
    this.output.write(data)
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
    const line = this.line(method, { jsonrpc: '2.0', id, method, params })
    if (line instanceof MessageTooLarge) return Promise.reject(line)
    return new Promise((resolve, reject) => {
      /** @type {(() => void) | undefined} */
      let onAbort
      const settle = () => { if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort) }
      this.pending.set(id, {
        // The sidecar answers `method` with its result shape (bridge/transport/protocol.py METHODS).
        resolve: (value) => { settle(); resolve(/** @type {Methods[M]['result']} */ (value)) },
        reject: (error) => { settle(); reject(error) },
      })
      if (signal !== undefined) {
        onAbort = () => {
          if (!this.pending.has(id)) return
          this.pending.delete(id)
          this.send(JSON.stringify({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id } }) + '\n')
          reject(signal.reason ?? new Error('aborted'))
        }
        if (signal.aborted) { onAbort(); return }
        signal.addEventListener('abort', onAbort, { once: true })
      }
      this.send(line)
    })
  }

  /**
   * Queue a notification, serialized now: it leaves with the next request, or after
   * NOTIFY_DELAY_MS. One over the cap is not sent: nothing can answer it, so the host's stderr
   * says so, once per message.
   * @template {keyof Notifications} N
   * @param {N} method @param {Notifications[N]} params
   */
  notify(method, params) {
    if (this.dead !== undefined) return
    const line = this.line(method, { jsonrpc: '2.0', method, params })
    if (line instanceof MessageTooLarge) {
      process.stderr.write(`dsh-sidecar: ${line.message}\n`)
      return
    }
    this.queued += line
    if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => { this.flushTimer = undefined; this.flush() }, NOTIFY_DELAY_MS)
      // Queued notifications alone do not keep the host alive: `shutdown` (a request) carries them.
      this.flushTimer.unref()
    }
  }

  /** Fail every pending and future call closed. @param {Error} error */
  fail(error) {
    if (this.dead !== undefined) return
    this.dead = error
    clearTimeout(this.flushTimer)
    this.queued = ''
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
