// node --test (with --import ./host-resolve.mjs): the `mock` route, its routing hooks and the
// `/mock` command, with a fake host context and a fake sidecar; the rc.8 LLM classes are real.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { LlmAdapter, LlmError } from '@deepseek-ai/dsh-llm'
import { installMockRoute } from '../../node_shim/mock.js'

/** The route installed on a fake ctx; `answer(method, params)` plays the sidecar. */
function setup(answer) {
  const listeners = new Map()
  let adapter
  let command
  const ctx = {
    llm: { registerAdapter: (providers, a) => { assert.deepEqual(providers, ['mock']); adapter = a } },
    on: (name, fn) => listeners.set(name, fn),
    inject: (deps, fn) => { assert.deepEqual(deps, ['commands']); fn({ commands: { register: (c) => { command = c } } }) },
  }
  const requests = []
  const notes = []
  const rpc = {
    request: async (method, params, signal) => { requests.push({ method, params, signal }); return answer(method, params) },
    notify: (method, params) => notes.push({ method, params }),
  }
  installMockRoute(ctx, rpc)
  return { on: (name) => listeners.get(name), adapter: () => adapter, command: () => command, requests, notes }
}

function agent(id = 'session-1') {
  const appended = []
  const followups = []
  return {
    id, appended, followups,
    session: { header: { cwd: '/work' }, append: (type, data) => appended.push({ type, data }) },
    followup: (message) => followups.push(message),
  }
}

async function collect(iterable) {
  const out = []
  for await (const chunk of iterable) out.push(chunk)
  return out
}

const signal = new AbortController().signal

test('the adapter is an rc.8 LlmAdapter for the mock route only', () => {
  const { adapter } = setup(() => ({}))
  assert.ok(adapter() instanceof LlmAdapter)
  assert.deepEqual(adapter().providerInfo('mock'), { id: 'mock', name: 'Mock' })
})

test('the mock route names the provider Mock and its one model Deterministic Mock Model', async () => {
  const { adapter } = setup(() => ({}))
  const [listed] = await adapter().listModels('mock')
  assert.deepEqual([listed.provider, listed.id, listed.name], ['mock', 'mock', 'Deterministic Mock Model'])
  const resolved = await adapter().resolveModel('mock', 'mock')
  assert.deepEqual([resolved.provider, resolved.id, resolved.name], ['mock', 'mock', 'Deterministic Mock Model'])
})

test('agent/request asks mock/route and the stream then names that turn and step', async () => {
  const status = { state: 'running' }
  const { on, adapter, requests } = setup((method) => (method === 'mock/route'
    ? { route: { provider: 'mock', model: 'mock' } }
    : { kind: 'tool-calls', calls: [{ id: 'c1', name: 'echo', arguments: '{"text":"a"}' }], status }))
  const a = agent()
  const route = await on('agent/request')({ agent: a, turn: 2, step: 3, signal }, async () => ({ provider: 'deepseek', model: 'x' }))
  assert.deepEqual(route, { provider: 'mock', model: 'mock' })
  assert.deepEqual(requests[0].params, { sessionId: 'session-1', turn: 2, step: 3, proposed: { provider: 'deepseek', model: 'x' } })
  const messages = [
    { role: 'assistant', content: [{ type: 'tool-call', id: 'c0', name: 'sleepy', arguments: '{}' }] },
    { role: 'user', content: [{ type: 'tool-result', toolCallId: 'c0', isError: true, content: [] }] },
  ]
  const chunks = await collect(adapter().stream({ sessionId: 'session-1', messages, tools: [{ name: 'echo' }], signal }))
  assert.deepEqual(requests[1].params, {
    sessionId: 'session-1', purpose: null, turn: 2, step: 3,
    results: [{ callId: 'c0', isError: true, tool: 'sleepy' }], tools: ['echo'],
  })
  assert.deepEqual(chunks.map((c) => c.type), ['block-start', 'block-end', 'usage', 'finish'])
  assert.deepEqual(chunks[1].block, { type: 'tool-call', id: 'c1', name: 'echo', arguments: '{"text":"a"}' })
  assert.deepEqual(chunks[3].reason, { kind: 'tool-calls' })
  assert.deepEqual(a.appended, [{ type: 'mock/status', data: status }])
})

test('a null route keeps the proposal; a text answer streams one text block', async () => {
  const { on, adapter } = setup((method) => (method === 'mock/route' ? { route: null } : { kind: 'text' }))
  const proposed = { provider: 'deepseek', model: 'x' }
  assert.equal(await on('agent/request')({ agent: agent(), turn: 1, step: 1, signal }, async () => proposed), proposed)
  const chunks = await collect(adapter().stream({ sessionId: 'session-1', messages: [], signal }))
  assert.deepEqual(chunks.slice(0, 3).map((c) => c.text ?? c.block?.text), [undefined, '', ''])
  assert.deepEqual(chunks.at(-1).reason, { kind: 'stop' })
})

test('an error answer throws LlmError with its code after appending the status', async () => {
  const { on, adapter } = setup((method) => (method === 'mock/route' ? { route: null }
    : { kind: 'error', text: 'the script ended', code: 'MOCK_SCRIPT_EXHAUSTED', status: { state: 'failed' } }))
  const a = agent()
  await on('agent/request')({ agent: a, turn: 1, step: 1, signal }, async () => ({ provider: 'mock', model: 'mock' }))
  await assert.rejects(collect(adapter().stream({ sessionId: 'session-1', messages: [], signal })),
    (error) => error instanceof LlmError && error.code === 'MOCK_SCRIPT_EXHAUSTED' && error.message === 'the script ended')
  assert.deepEqual(a.appended, [{ type: 'mock/status', data: { state: 'failed' } }])
})

test('an aborted stream asks mock/cancel and appends the final status', async () => {
  const controller = new AbortController()
  const { on, adapter, requests } = setup((method) => {
    if (method === 'mock/route') return { route: null }
    if (method === 'mock/cancel') return { status: { state: 'cancelled' } }
    controller.abort()
    throw new Error('cancelled')
  })
  const a = agent()
  await on('agent/request')({ agent: a, turn: 4, step: 1, signal }, async () => ({ provider: 'mock', model: 'mock' }))
  await assert.rejects(collect(adapter().stream({ sessionId: 'session-1', messages: [], signal: controller.signal })), /cancelled/)
  assert.deepEqual(requests.at(-1), { method: 'mock/cancel', params: { sessionId: 'session-1', turn: 4 }, signal: undefined })
  assert.deepEqual(a.appended, [{ type: 'mock/status', data: { state: 'cancelled' } }])
})

test('pre-step sends the entering user text only when messages enter', async () => {
  const { on, requests } = setup(() => ({ mock: true, status: { state: 'started' } }))
  const a = agent()
  const entering = { kind: 'enter', messages: [{ role: 'user', content: [{ type: 'text', text: '/mock ' }, { type: 'image' }, { type: 'text', text: 'run' }] }] }
  assert.equal(await on('agent/pre-step')({ agent: a, turn: 1, step: 1, signal }, async () => entering), entering)
  const empty = { kind: 'enter', messages: [] }
  assert.equal(await on('agent/pre-step')({ agent: a, turn: 1, step: 2, signal }, async () => empty), empty)
  assert.deepEqual(requests.map((r) => r.params), [{ sessionId: 'session-1', turn: 1, step: 1, cwd: '/work', texts: ['/mock run'] }])
  assert.deepEqual(a.appended, [{ type: 'mock/status', data: { state: 'started' } }])
})

test('a disposed agent ends its session in the sidecar', () => {
  const { on, notes } = setup(() => ({}))
  on('agent/disposed')({ agent: agent('s-9') })
  assert.deepEqual(notes, [{ method: 'mock/session-end', params: { sessionId: 's-9' } }])
})

test('the /mock command queues its turn when Python accepts it, and shows Python\'s refusal', async () => {
  let refuse = false
  const { command } = setup(() => {
    if (refuse) throw new Error('INVALID_COMMAND: unknown verb')
    return { text: 'mock turn queued' }
  })
  const a = agent()
  assert.deepEqual(await command().handler({ agent: a, rawInput: ' run echo({})', signal }), { kind: 'success', text: 'mock turn queued' })
  assert.equal(a.followups.length, 1)
  assert.deepEqual(a.followups[0].content, [{ type: 'text', text: '/mock run echo({})' }])
  refuse = true
  assert.deepEqual(await command().handler({ agent: a, rawInput: ' fly', signal }), { kind: 'error', text: 'INVALID_COMMAND: unknown verb' })
  assert.equal(a.followups.length, 1)
})
