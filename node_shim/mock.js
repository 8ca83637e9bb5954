// @ts-check
/**
 * The `mock` model route served by Python, the per-turn routing hooks it needs
 * (`agent/pre-step`, `agent/request`), the `/mock` slash command and `mock/status` events.
 */
import { CallId, LlmAdapter, LlmError, createUserMessage, resolveRetryPolicy } from '@deepseek-ai/dsh-llm'

import { SidecarUnavailable, messageOf } from './rpc.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('./types').Status} Status
 * @typedef {import('@deepseek-ai/dsh-agent').Agent} Agent
 * @typedef {import('@deepseek-ai/dsh-llm').Message} Message
 * @typedef {import('@deepseek-ai/dsh-llm').StreamChunk} StreamChunk
 * @typedef {import('@deepseek-ai/dsh-llm').GenerateOptions} GenerateOptions
 * @typedef {import('@deepseek-ai/dsh-llm').LlmModelInfo} LlmModelInfo
 */

// The display names of the route's provider and its one model (docs/mock.md).
const PROVIDER_NAME = 'Mock'
const MODEL_NAME = 'Deterministic Mock Model'

/**
 * A chunk stream for one complete response Python decided.
 * @param {import('./types').LlmResponse} response @returns {Generator<StreamChunk>}
 */
function* chunksOf(response) {
  /** @type {StreamChunk} */
  const usage = { type: 'usage', usage: { inputTokens: 0, outputTokens: 0 } }
  if (response.kind === 'tool-calls') {
    let index = 0
    for (const call of response.calls ?? []) {
      yield { type: 'block-start', index, blockType: 'tool-call' }
      yield { type: 'block-end', index, block: { type: 'tool-call', id: CallId(call.id), name: call.name, arguments: call.arguments } }
      index++
    }
    yield usage
    yield { type: 'finish', reason: { kind: 'tool-calls' } }
    return
  }
  const text = response.text ?? ''
  yield { type: 'block-start', index: 0, blockType: 'text' }
  yield { type: 'text-delta', index: 0, text }
  yield { type: 'block-end', index: 0, block: { type: 'text', text } }
  yield usage
  yield { type: 'finish', reason: { kind: 'stop' } }
}

/**
 * Tool results the model sees since its last message, named by that message's calls.
 * @param {readonly Message[]} messages
 */
function latestResults(messages) {
  /** @type {Array<{ callId: string, isError: boolean }>} */
  const out = []
  let i = messages.length - 1
  for (; i >= 0 && messages[i].role !== 'assistant'; i--) {
    for (const block of messages[i].content ?? []) {
      if (block.type === 'tool-result') out.unshift({ callId: String(block.toolCallId), isError: block.isError === true })
    }
  }
  /** @type {Map<string, string>} */
  const names = new Map()
  for (const block of messages[i]?.content ?? []) if (block.type === 'tool-call') names.set(String(block.id), block.name)
  return out.map((r) => ({ ...r, tool: names.get(r.callId) ?? '' }))
}

/** Text of the user messages entering a step. @param {readonly Message[]} messages */
function userTexts(messages) {
  return messages.map((m) => (m.content ?? []).map((b) => (b.type === 'text' ? b.text : '')).join(''))
}

/** Append Python's `mock/status` record to the agent's session log, if any. @param {Agent | undefined} agent @param {Status | undefined} status */
function appendStatus(agent, status) {
  if (agent !== undefined && status) agent.session.append('mock/status', status)
}

/**
 * An error that ends the turn, which rc.8 prints as `code: message`. A dead sidecar was already
 * reported once by the shim's exit watcher, with why: the turn's line says what failed instead.
 * @param {unknown} error
 */
function turnError(error) {
  if (!(error instanceof SidecarUnavailable)) return error
  return new LlmError('the mock model cannot answer without the sidecar (its exit is reported above)', 'SIDECAR_UNAVAILABLE')
}

/** The `mock` route, served by Python, plus the per-turn routing hooks and the `/mock` command. @param {Context} ctx @param {Rpc} rpc */
export function installMockRoute(ctx, rpc) {
  /** @type {Map<string, {turn: number, step: number}>} */
  const current = new Map()
  /** @type {Map<string, Agent>} */
  const agents = new Map()

  class SidecarAdapter extends LlmAdapter {
    /** @param {string} provider */
    providerInfo(provider) { return { id: provider, name: PROVIDER_NAME } }
    /** @param {string} provider */
    providerRetryPolicy(provider) { return resolveRetryPolicy({ mode: 'normal', maxRetries: 0 }, `mock ${provider}`) }
    /** @param {string} provider @returns {Promise<LlmModelInfo[]>} */
    async listModels(provider) { return [{ provider, id: 'mock', name: MODEL_NAME, inputModalities: ['text'] }] }
    /** @param {string} provider @param {string} model */
    async resolveModel(provider, model) { return { provider, id: model, name: MODEL_NAME, context: { contextWindow: 1_000_000 } } }
    /** @param {GenerateOptions} options @returns {AsyncGenerator<StreamChunk>} */
    async *stream(options) {
      const sessionId = String(options.sessionId ?? '')
      const where = current.get(sessionId)
      let reply
      try {
        reply = await rpc.request('llm/stream', {
          sessionId, purpose: options.purpose ?? null, turn: where?.turn ?? null, step: where?.step ?? null,
          results: latestResults(options.messages ?? []),
          tools: (options.tools ?? []).map((t) => t.name),
        }, options.signal)
      } catch (error) {
        if (options.signal?.aborted && where !== undefined) {
          const final = await rpc.request('mock/cancel', { sessionId, turn: where.turn }).catch(() => null)
          appendStatus(agents.get(sessionId), final?.status ?? undefined)
        }
        throw turnError(error)
      }
      appendStatus(agents.get(sessionId), reply.status)
      if (reply.kind === 'error') throw new LlmError(reply.text ?? '', reply.code ?? '')
      yield* chunksOf(reply)
    }
  }
  ctx.llm.registerAdapter(['mock'], new SidecarAdapter())

  ctx.on('agent/pre-step', async (payload, next) => {
    const decision = await next()
    if (decision.kind !== 'enter' || decision.messages.length === 0) return decision
    const reply = await rpc.request('mock/pre-step', {
      sessionId: String(payload.agent.id), turn: payload.turn, step: payload.step,
      cwd: payload.agent.session?.header?.cwd ?? process.cwd(), texts: userTexts(decision.messages),
    }, payload.signal).catch((error) => { throw turnError(error) })
    appendStatus(payload.agent, reply.status)
    return decision
  }, { prepend: true })

  ctx.on('agent/request', async (payload, next) => {
    const proposed = await next()
    const sessionId = String(payload.agent.id)
    agents.set(sessionId, payload.agent)
    const reply = await rpc.request('mock/route', {
      sessionId, turn: payload.turn, step: payload.step, proposed: { provider: proposed.provider, model: proposed.model },
    }, payload.signal).catch((error) => { throw turnError(error) })
    current.set(sessionId, { turn: payload.turn, step: payload.step })
    return reply.route ?? proposed
  }, { prepend: true })

  ctx.on('agent/disposed', ({ agent }) => {
    const sessionId = String(agent.id)
    agents.delete(sessionId)
    current.delete(sessionId)
    rpc.notify('mock/session-end', { sessionId })
  })

  // Web UI, followup and steer: Python checks the grammar now; the turn itself starts when the
  // queued message enters a step (mock/pre-step), exactly like a headless `/mock` task.
  ctx.inject(['commands'], (cctx) => {
    cctx.commands.register({
      name: 'mock',
      description: 'Run one turn against the deterministic mock model',
      input: { hint: 'run tool({...}) | run [a({...}) b({...})] | replay <path> [--overwrite-wait-time-ms N]', images: false },
      handler: async ({ agent, rawInput, signal }) => {
        try {
          const reply = await rpc.request('mock/command', { sessionId: String(agent.id), rawInput }, signal)
          agent.followup(createUserMessage({ content: [{ type: 'text', text: `/mock${rawInput}` }], source: { kind: 'plugin', plugin: 'dsh-sidecar' } }))
          return { kind: 'success', text: reply.text }
        } catch (error) {
          return { kind: 'error', text: messageOf(error) }
        }
      },
    })
  })
}

