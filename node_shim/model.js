// @ts-check
/**
 * The model cassette's host side: one listener on rc.8's `llm/stream` waterfall, the public
 * interception point around every provider `stream()` call (dsh-llm `lib/types/index.d.ts`,
 * `Events['llm/stream']`: "call `next()` to reach the resolved adapter's stream, or yield your
 * own chunks to short-circuit"). Python decides per call: pass, forward (record) or replay.
 * The route, `request/header` and `assistant/message` provenance stay the provider's own.
 */
import { performance } from 'node:perf_hooks'
import { codeOf, messageOf, plain } from './rpc.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('@deepseek-ai/dsh-llm').GenerateOptions} GenerateOptions
 * @typedef {import('@deepseek-ai/dsh-llm').StreamChunk} StreamChunk
 */

/** The request as JSON, without the live `signal`. @param {GenerateOptions} options */
function requestOf(options) {
  /** @type {Record<string, unknown>} */
  const out = {}
  for (const [key, value] of Object.entries(options)) if (key !== 'signal' && value !== undefined) out[key] = value
  return plain(out)
}

/**
 * The session header facts of the agent driving this call, unjudged (Python derives the depth),
 * or undefined outside any agent: `agents.currentInitiator()` follows the async context into the
 * waterfall.
 * @param {Context} ctx
 */
function initiatorOf(ctx) {
  const header = ctx.get('agents')?.currentInitiator()?.session.header
  return header === undefined ? undefined : plain({ origin: header.origin, delegationDepth: header.delegationDepth })
}

/** The initiator's session id (a warm host routes the call by it). @param {Context} ctx */
function sessionOf(ctx) {
  const session = ctx.get('agents')?.currentInitiator()?.session
  return session === undefined ? undefined : String(session.id)
}

/**
 * A terminal chunk carrying a named failure.
 * @param {'error' | 'aborted'} kind @param {unknown} error @returns {StreamChunk}
 */
function failed(kind, error) {
  const code = codeOf(error) ?? 'SIDECAR_ERROR'
  const message = messageOf(error)
  // The host prints `<code>: <message>`; the sidecar's message already starts with its code.
  return { type: 'finish', reason: { kind, failure: { code, message: message.startsWith(`${code}: `) ? message.slice(code.length + 2) : message } } }
}

/** Resolve `ms` after `t0`, or as soon as `signal` aborts. @param {number} ms @param {number} t0 @param {AbortSignal | undefined} signal */
function until(ms, t0, signal) {
  const left = ms - (performance.now() - t0)
  if (left <= 0 || signal?.aborted) return Promise.resolve()
  return new Promise((done) => {
    const stop = () => { clearTimeout(timer); done(undefined) }
    const timer = setTimeout(() => { signal?.removeEventListener('abort', stop); done(undefined) }, left)
    signal?.addEventListener('abort', stop, { once: true })
  })
}

/**
 * One call through the cassette.
 * @param {Rpc} rpc @param {GenerateOptions} options @param {() => AsyncIterable<StreamChunk>} next
 * @param {{ origin?: string, delegationDepth?: number } | undefined} initiator
 * @param {string | undefined} sessionId
 * @returns {AsyncGenerator<StreamChunk>}
 */
async function* cassetteStream(rpc, options, next, initiator, sessionId) {
  const t0 = performance.now()
  const signal = options.signal
  let decision
  try {
    decision = await rpc.request('model/request', { request: requestOf(options), initiator, ...(sessionId === undefined ? {} : { sessionId }) }, signal)
  } catch (error) {
    // Fail closed: a refusal or a dead sidecar never reaches the provider.
    yield failed(signal?.aborted ? 'aborted' : 'error', error)
    return
  }
  if (decision.action === 'pass') {
    yield* next()
    return
  }
  if (decision.action === 'replay') {
    for (let i = 0; i < decision.chunks.length; i++) {
      if (decision.atMs) await until(decision.atMs[i], t0, signal)
      if (signal?.aborted) {
        yield failed('aborted', Object.assign(new Error('model cassette replay aborted by the caller'), { code: 'ABORTED' }))
        return
      }
      yield decision.chunks[i]
    }
    return
  }
  /** @type {StreamChunk[]} */
  const chunks = []
  /** @type {number[]} */
  const atMs = []
  let reported = false
  try {
    for await (const chunk of next()) {
      chunks.push(plain(chunk))
      atMs.push(performance.now() - t0)
      if (chunk.type === 'finish') {
        // The call is durable (fsync-ed) before anything downstream sees its end.
        reported = true
        await rpc.request('model/recorded', { handle: decision.handle, chunks, atMs, complete: true, aborted: Boolean(signal?.aborted) })
      }
      yield chunk
    }
  } finally {
    if (!reported) rpc.request('model/recorded', { handle: decision.handle, chunks, atMs, complete: false }).catch(() => {})
  }
}

/** Front every provider route the cassette captures. @param {Context} ctx @param {Rpc} rpc */
export function installModelCassette(ctx, rpc) {
  ctx.on('llm/stream', (options, next) => cassetteStream(rpc, options, next, initiatorOf(ctx), sessionOf(ctx)))
}
