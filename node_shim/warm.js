// @ts-check
/**
 * A warm host's runner (docs/warm-host.md): in place of rc.8's one-shot `headless-runner`, it
 * runs the sessions Python hands it, each the way that runner runs its only one: the public
 * agent service creates the session, the task goes in as a user message, the turn is awaited
 * to quiescence and the session log flushed. Python opens and closes each session's state and
 * answers its run; this loop only relays.
 */
import { installModelSelection } from '@deepseek-ai/dsh-agent'
import { createUserMessage } from '@deepseek-ai/dsh-llm'
import { SessionId } from '@deepseek-ai/dsh-session'
import { SidecarUnavailable, messageOf } from './rpc.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('./types').WarmDone} WarmDone
 * @typedef {import('./types').StandIn} StandIn
 * @typedef {import('./standins.js').StandUp} StandUp
 * @typedef {import('@deepseek-ai/dsh-session').SessionEvent} SessionEvent
 */

/**
 * The last assistant text and the turn's end after `firstSeq`, as rc.8's headless runner reads them.
 * @param {readonly SessionEvent[]} events @param {number} firstSeq @param {string} sessionId @returns {WarmDone}
 */
function summarize(events, firstSeq, sessionId) {
  /** @type {WarmDone} */
  const done = { sessionId, text: '', reason: null }
  let started = false
  for (const event of events) {
    if (event.seq < firstSeq) continue
    if (event.type === 'turn/start') started = true
    else if (started && event.type === 'assistant/message') {
      const joined = event.data.message.content.filter((block) => block.type === 'text').map((block) => block.text).join('')
      if (joined !== '') done.text = joined
    } else if (started && event.type === 'turn/end') {
      const reason = event.data.reason
      done.reason = reason.kind
      if (reason.kind === 'error') Object.assign(done, { code: String(reason.error.code), message: reason.error.message })
    }
  }
  return done
}

/**
 * One session, start to flush; its end goes to Python whatever happened. The process's working
 * directory is the one Python names for it (`processCwd`), set before anything of it runs; its
 * stand-ins (`standIns`, chosen by Python) are registered on its own agent as it is set up.
 * @param {Context} ctx @param {Rpc} rpc @param {StandUp | undefined} standUp
 * @param {{ sessionId: string, cwd: string, task: string, processCwd: string, standIns: StandIn[] }} job
 */
async function runSession(ctx, rpc, standUp, job) {
  /** @type {WarmDone} */
  let done = { sessionId: job.sessionId, failure: '' }
  /** @type {(() => void) | undefined} */
  let forget
  try {
    if (job.processCwd !== '') process.chdir(job.processCwd)
    const selection = ctx.agentDefaultModel.currentSelection()
    const handle = await ctx.agents.create({
      sessionId: SessionId(job.sessionId),
      meta: { cwd: job.cwd },
      agentOptions: { provider: selection.provider, model: selection.model },
      setup: (agentCtx) => {
        installModelSelection(agentCtx, { current: selection, assembled: undefined })
        if (job.standIns.length > 0 && standUp !== undefined) forget = standUp(agentCtx, job.sessionId, job.standIns)
      },
    })
    const { agent } = handle
    try {
      await agent.whenIdle()
      const firstSeq = agent.session.seq
      agent.followup(createUserMessage({ content: [{ type: 'text', text: job.task }], source: { kind: 'user' } }))
      await agent.whenIdle()
      await ctx.sessions.flush(agent.session)
      done = summarize(agent.session.events, firstSeq, job.sessionId)
    } finally {
      await handle.dispose()
    }
  } catch (error) {
    done = { ...done, failure: messageOf(error) }
  }
  forget?.()
  await rpc.request('warm/done', done).catch((/** @type {unknown} */ error) => {
    // Python can no longer answer the run: the turn's error goes where rc.8's runner prints it.
    if (done.reason === 'error') process.stderr.write(`dsh: ${done.code}: ${done.message}\n`)
    throw error
  })
}

/**
 * Ask for sessions until Python says stop, running each as it comes (they may overlap), then
 * request the process's exit. `standUp`: the tool hooks' way to stand a session's tools up.
 * @param {Context} ctx @param {Rpc} rpc @param {StandUp} [standUp]
 */
export function runWarmHost(ctx, rpc, standUp) {
  ctx.inject(['agents', 'agentDefaultModel', 'sessions'], async (wctx) => {
    const exit = wctx.get('appExit')
    // The host's own folder: the process's cwd whenever no session runs (a run's folder may go away).
    const home = process.cwd()
    await wctx.get('loader')?.await()
    /** the sessions still running, each gone from the set when it ends @type {Set<Promise<void>>} */
    const running = new Set()
    try {
      for (;;) {
        const job = await rpc.request('warm/next', {})
        if (job.stop || job.sessionId === undefined) break
        // A dead sidecar fails warm/done too: the run API hears of it on its control socket.
        const session = runSession(wctx, rpc, standUp, {
          sessionId: job.sessionId, cwd: job.cwd ?? '', task: job.task ?? '', processCwd: job.processCwd ?? '', standIns: job.standIns ?? [],
        })
          .catch(() => {}).finally(() => {
            running.delete(session)
            if (running.size === 0) process.chdir(home)
          })
        running.add(session)
      }
    } catch (error) {
      // A dead sidecar was told once by its exit watcher.
      if (!(error instanceof SidecarUnavailable)) process.stderr.write(`dsh-sidecar: warm host: ${messageOf(error)}\n`)
    }
    await Promise.allSettled(running)
    exit?.(0)
  })
}
