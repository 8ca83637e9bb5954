// node --test: the model cassette's llm/stream listener, with a fake sidecar and a fake route.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { installModelCassette } from '../../node_shim/model.js'

const TEXT = [
  { type: 'block-start', index: 0, blockType: 'text' },
  { type: 'text-delta', index: 0, text: 'hi' },
  { type: 'block-end', index: 0, block: { type: 'text', text: 'hi' } },
  { type: 'finish', reason: { kind: 'stop' } },
]

/**
 * A listener installed on a fake ctx, a fake rpc answering `decide`, and the calls it saw.
 * `header: null` is a call with no agent driving it (`undefined` would take the default).
 */
function setup(decide, header = { delegationDepth: 0 }) {
  const calls = []
  let listener
  const ctx = {
    on: (name, fn) => { assert.equal(name, 'llm/stream'); listener = fn },
    get: (name) => (name === 'agents' ? { currentInitiator: () => (header === null ? undefined : { session: { header } }) } : undefined),
  }
  const rpc = {
    request: async (method, params) => {
      calls.push({ method, params })
      if (method === 'model/request') return decide(params)
      return {}
    },
  }
  installModelCassette(ctx, rpc)
  let upstream = 0
  const next = async function* () { upstream++; yield* TEXT }
  const stream = (options) => listener(options, next)
  return { calls, stream, upstreamCalls: () => upstream }
}

async function collect(iterable) {
  const out = []
  for await (const chunk of iterable) out.push(chunk)
  return out
}

test('replay yields the recorded chunks and never calls the route', async () => {
  const { calls, stream, upstreamCalls } = setup(() => ({ action: 'replay', handle: 1, chunks: TEXT }))
  const signal = new AbortController().signal
  assert.deepEqual(await collect(stream({ provider: 'deepseek-official', model: 'm', messages: [], signal })), TEXT)
  assert.equal(upstreamCalls(), 0)
  assert.deepEqual(Object.keys(calls[0].params.request).sort(), ['messages', 'model', 'provider'])  // no signal
  assert.deepEqual(calls[0].params.initiator, { delegationDepth: 0 })
})

test('a call outside any agent sends no initiator', async () => {
  const { calls, stream } = setup(() => ({ action: 'pass' }), null)
  await collect(stream({ provider: 'p', model: 'm', messages: [] }))
  assert.equal(calls[0].params.initiator, undefined)
})

test('recorded timing paces the replayed chunks in order', async () => {
  const { stream } = setup(() => ({ action: 'replay', handle: 1, chunks: TEXT, atMs: [0, 5, 10, 20] }))
  const started = performance.now()
  assert.deepEqual(await collect(stream({ provider: 'p', model: 'm', messages: [] })), TEXT)
  assert.ok(performance.now() - started >= 19)
})

test('forward streams the route and reports the chunks before yielding finish', async () => {
  const { calls, stream, upstreamCalls } = setup(() => ({ action: 'forward', handle: 7 }), { origin: 'subagent', delegationDepth: 2, agentPreset: 'x' })
  const seen = []
  for await (const chunk of stream({ provider: 'p', model: 'm', messages: [] })) {
    seen.push(chunk)
    if (chunk.type === 'finish') assert.equal(calls.at(-1).method, 'model/recorded')
  }
  assert.deepEqual(seen, TEXT)
  assert.equal(upstreamCalls(), 1)
  const recorded = calls.at(-1).params
  assert.deepEqual([recorded.handle, recorded.complete, recorded.chunks, recorded.atMs.length], [7, true, TEXT, 4])
  // The header facts go unjudged, and only the two the depth reads.
  assert.deepEqual(calls[0].params.initiator, { origin: 'subagent', delegationDepth: 2 })
})

test('a consumer that stops early reports an incomplete call', async () => {
  const { calls, stream } = setup(() => ({ action: 'forward', handle: 3 }))
  for await (const chunk of stream({ provider: 'p', model: 'm', messages: [] })) { if (chunk.type === 'text-delta') break }
  await new Promise((done) => setImmediate(done))
  assert.deepEqual([calls.at(-1).method, calls.at(-1).params.complete, calls.at(-1).params.chunks.length], ['model/recorded', false, 2])
})

test('a refusal becomes one error finish with the code once, and the route is never called', async () => {
  const refusal = Object.assign(new Error('MODEL_CASSETTE_MISMATCH: model call model#0: option maxTokens differs'), { code: 'MODEL_CASSETTE_MISMATCH' })
  const { stream, upstreamCalls } = setup(() => { throw refusal })
  const chunks = await collect(stream({ provider: 'p', model: 'm', messages: [] }))
  assert.deepEqual(chunks, [{ type: 'finish', reason: { kind: 'error', failure: { code: 'MODEL_CASSETTE_MISMATCH', message: 'model call model#0: option maxTokens differs' } } }])
  assert.equal(upstreamCalls(), 0)
})

test('pass hands the call to the route untouched', async () => {
  const { stream, upstreamCalls } = setup(() => ({ action: 'pass' }))
  assert.deepEqual(await collect(stream({ provider: 'mock', model: 'mock', messages: [] })), TEXT)
  assert.equal(upstreamCalls(), 1)
})
