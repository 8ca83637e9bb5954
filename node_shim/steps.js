// @ts-check
/**
 * What each model step of the agent loop is shown (its system prompt and offered tools),
 * forwarded as `model/step` for the tool cassette's divergence check. Observation only: the
 * listener is outermost on rc.8's `llm/stream` waterfall (a model cassette replay never calls
 * `next()`, so an inner listener would miss its steps) and passes every call through untouched.
 * Python digests, keeps and compares; nothing is judged here.
 */
import { isAgentLoopRequest } from '@deepseek-ai/dsh-llm'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 */

/** @param {Context} ctx @param {Rpc} rpc */
export function installStepWatch(ctx, rpc) {
  /** the turn and step of each session's last `agent/request` @type {Map<string, { turn: number, step: number }>} */
  const current = new Map()

  ctx.on('agent/request', async (payload, next) => {
    const config = await next()
    current.set(String(payload.agent.id), { turn: payload.turn, step: payload.step })
    return config
  })

  ctx.on('llm/stream', (options, next) => {
    const sessionId = options.sessionId === undefined ? undefined : String(options.sessionId)
    const where = sessionId === undefined ? undefined : current.get(sessionId)
    if (where !== undefined && sessionId !== undefined && options.purpose === undefined && isAgentLoopRequest(options)) {
      rpc.notify('model/step', {
        sessionId, turn: where.turn, step: where.step, system: options.system ?? null,
        tools: (options.tools ?? []).map((t) => ({ name: t.name, description: t.description, parameters: t.parameters })),
      })
    }
    return next()
  }, { prepend: true })

  ctx.on('agent/disposed', ({ agent }) => { current.delete(String(agent.id)) })
}
