// node --test: the subagent cassette provider, with a fake host context and a fake sidecar.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { installSubagentProvider } from '../../node_shim/subagent.js'

const SETUP = { name: 'cassette', upstream: 'spawn', parentEvents: ['user/message', 'tool/result'] }
const CAPS = { outputSchema: true, depthLimit: true, toolFilter: false, persona: true }
// Distinct from any value the shim could make up: the aborted result is Python's.
const ABORTED = { output: [], stopReason: 'aborted', diagnostic: 'named by the sidecar' }

/** The provider installed on a fake ctx; `answer(method, params)` plays the sidecar. */
function setup(answer, upstream, config = SETUP) {
  const listeners = new Map()
  const registered = []
  const ctx = {
    on: (name, fn) => listeners.set(name, fn),
    subagents: {
      getProvider: (name) => (name === 'spawn' ? upstream : undefined),
      registerProvider: (p) => { registered.push(p); return () => registered.splice(registered.indexOf(p), 1) },
    },
  }
  const requests = []
  const notes = []
  const rpc = {
    request: async (method, params) => { requests.push({ method, params }); return answer(method, params) },
    notify: (method, params) => notes.push({ method, params }),
  }
  installSubagentProvider(ctx, rpc, config)
  return { on: (name) => listeners.get(name), registered, requests, notes }
}

function upstreamProvider(run) {
  return { name: 'spawn', capabilities: CAPS, inheritsParentContext: false, start: async () => run() }
}

function startRequest(signal = new AbortController().signal) {
  return {
    label: 'audit', prompt: [{ type: 'text', text: 'go' }], maxDepth: 3, signal, descriptor: { secret: true },
    parent: {
      id: 'parent-1',
      options: { provider: 'mock', model: 'mock', subagentDepth: 2 },
      session: {
        header: { origin: 'subagent', delegationDepth: 1, agentPreset: 'coder', cwd: '/work' },
        events: [
          { type: 'user/message', seq: 1, time: 5, data: { content: [{ type: 'text', text: 'hi' }] } },
          { type: 'assistant/chunk', seq: 2, data: { chunk: {} } },
          { type: 'tool/result', seq: 3, data: { message: { content: [] } } },
        ],
      },
    },
  }
}

const replay = (outcome, extra = {}) => (method) => (method === 'subagent/start'
  ? { action: 'replay', handle: { sequence: 1, callKey: 'root/audit~1' }, outcome, aborted: ABORTED, ...extra }
  : {})

test('the cassette provider mirrors the upstream facts and sends them once', async () => {
  const { registered, requests } = setup(() => ({}), upstreamProvider(() => ({})))
  assert.equal(registered.length, 1)
  assert.deepEqual(
    [registered[0].name, registered[0].capabilities, registered[0].inheritsParentContext, 'prepareContinuable' in registered[0]],
    ['cassette', CAPS, false, false],
  )
  assert.deepEqual(requests, [{ method: 'subagent/hello', params: { name: 'spawn', capabilities: CAPS, inheritsParentContext: false, continuable: false } }])
})

test('a replaying cassette exposes the recorded provider facts, and still says hello with the live ones', async () => {
  const recorded = { capabilities: { ...CAPS, depthLimit: false }, inheritsParentContext: true }
  const { registered, requests } = setup(() => ({}), upstreamProvider(() => ({})), { ...SETUP, replayFacts: recorded })
  assert.deepEqual([registered[0].capabilities, registered[0].inheritsParentContext], [recorded.capabilities, true])
  assert.deepEqual(requests[0].params, { name: 'spawn', capabilities: CAPS, inheritsParentContext: false, continuable: false })
})

test('start sends the parent as the host shows it: raw depths and origin, only the event types Python named', async () => {
  const { registered, requests } = setup(replay({ kind: 'result', result: { output: [], stopReason: 'completed' } }), upstreamProvider(() => ({})))
  await registered[0].start(startRequest())
  assert.deepEqual(requests[1], {
    method: 'subagent/start',
    params: {
      request: { prompt: [{ type: 'text', text: 'go' }], label: 'audit', maxDepth: 3 },
      parent: {
        sessionId: 'parent-1', origin: 'subagent', delegationDepth: 1, subagentDepth: 2, agentPreset: 'coder',
        route: { provider: 'mock', model: 'mock' },
        events: [
          { type: 'user/message', data: { content: [{ type: 'text', text: 'hi' }] } },
          { type: 'tool/result', data: { message: { content: [] } } },
        ],
      },
      signalAborted: false,
    },
  })
})

test('replay returns a fresh local-less run settling to the recorded result', async () => {
  const result = { output: [{ type: 'text', text: 'done' }], stopReason: 'completed' }
  const { registered } = setup(replay({ kind: 'result', result }), upstreamProvider(() => assert.fail('no upstream start')))
  const run = await registered[0].start(startRequest())
  assert.match(run.id, /^cassette-[0-9a-f-]{36}$/)
  assert.equal(run.localAgent, undefined)
  assert.deepEqual(await run.result, result)
})

test('a replayed run whose caller aborts settles to the result Python named', async () => {
  const controller = new AbortController()
  const { registered } = setup(replay({ kind: 'result', result: { output: [], stopReason: 'completed' } }, { delayMs: 60_000 }),
    upstreamProvider(() => ({})))
  const run = await registered[0].start(startRequest(controller.signal))
  controller.abort()
  assert.deepEqual(await run.result, ABORTED)
})

test('recorded errors replay as rejections carrying name, message and code', async () => {
  const error = { name: 'SubagentError', message: 'no child', code: 'E_CHILD' }
  const started = setup(replay({ kind: 'start-error', error }), upstreamProvider(() => ({})))
  await assert.rejects(started.registered[0].start(startRequest()), (e) => e.name === 'SubagentError' && e.code === 'E_CHILD')
  const settled = setup(replay({ kind: 'result-error', error }), upstreamProvider(() => ({})))
  const run = await settled.registered[0].start(startRequest())
  await assert.rejects(run.result, (e) => e.message === 'no child' && e.code === 'E_CHILD')
})

test('forward runs the upstream, reports publication and the outcome before the result settles', async () => {
  const result = { output: [{ type: 'text', text: 'child says hi' }], stopReason: 'completed' }
  let reported
  const { registered, requests, notes } = setup((method, params) => {
    if (method === 'subagent/start') return { action: 'forward', handle: { sequence: 1, callKey: 'root/audit~1' } }
    if (method === 'subagent/outcome') reported = params
    return {}
  }, upstreamProvider(() => ({ id: 'child-7', localAgent: {}, result: Promise.resolve(result), dispose: async () => {} })))
  const run = await registered[0].start(startRequest())
  assert.equal(run.id, 'child-7')
  assert.deepEqual(notes, [{ method: 'subagent/published', params: { handle: { sequence: 1, callKey: 'root/audit~1' }, childId: 'child-7' } }])
  assert.equal(await run.result, result)
  assert.deepEqual(requests.map((r) => r.method), ['subagent/hello', 'subagent/start', 'subagent/outcome'])
  assert.deepEqual({ ...reported.outcome, timing: undefined }, {
    published: true, local: true, childId: 'child-7', outcome: { kind: 'result', result }, timing: undefined,
  })
  assert.equal(typeof reported.outcome.timing.durationMs, 'number')
  assert.equal(typeof reported.outcome.timing.startLatencyMs, 'number')
})

test('a forwarded start that throws is reported as a start-error and rethrown', async () => {
  let reported
  const { registered } = setup((method, params) => {
    if (method === 'subagent/start') return { action: 'forward', handle: { sequence: 1, callKey: 'k' } }
    if (method === 'subagent/outcome') reported = params.outcome
    return {}
  }, upstreamProvider(() => { throw Object.assign(new Error('spawn failed'), { code: 'E_SPAWN' }) }))
  await assert.rejects(registered[0].start(startRequest()), /spawn failed/)
  assert.deepEqual(reported.outcome, { kind: 'start-error', error: { name: 'Error', message: 'spawn failed', code: 'E_SPAWN' } })
  assert.equal(reported.published, false)
})

test('the provider mounts when the upstream appears and unmounts when it leaves', () => {
  const { on, registered } = setup(() => ({}), undefined)
  assert.equal(registered.length, 0)
  on('subagent/provider-added')({ name: 'fork', capabilities: CAPS })
  assert.equal(registered.length, 0)
  on('subagent/provider-added')(upstreamProvider(() => ({})))
  assert.equal(registered.length, 1)
  on('subagent/provider-removed')('spawn')
  assert.equal(registered.length, 0)
})
