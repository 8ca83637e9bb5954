// node --test: the tool pipeline hooks, with a fake host context and a fake sidecar.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { HarnessError } from '@deepseek-ai/dsh-llm'
import { installToolHooks } from '../../node_shim/tools.js'

/** The hooks installed on a fake ctx; `answer(method, params)` plays the sidecar. */
function setup(answer = () => ({ action: 'next' })) {
  const listeners = new Map()
  const ctx = { on: (name, fn, options) => listeners.set(name, { fn, options }) }
  const requests = []
  const notes = []
  const rpc = {
    request: async (method, params, signal) => { requests.push({ method, params, signal }); return answer(method, params) },
    notify: (method, params) => notes.push({ method, params }),
  }
  installToolHooks(ctx, rpc)
  const on = (name) => listeners.get(name).fn
  return { listeners, requests, notes, on, ctx }
}

let tokens = 0
function exec(name = 'echo', extra = {}) {
  const deferred = []
  return {
    token: Symbol(`t${tokens++}`), callId: `call-${tokens}`, name, arguments: { text: 'hi' },
    signal: new AbortController().signal, deferContext: (c) => deferred.push(c), deferred, ...extra,
  }
}

const OK = { isError: false, value: 1, content: [{ type: 'text', text: 'ran' }] }

test('execute and post-execute are outermost; the result listener is not', () => {
  const { listeners } = setup()
  assert.deepEqual(listeners.get('tools/execute').options, { prepend: true })
  assert.deepEqual(listeners.get('tools/post-execute').options, { prepend: true })
  assert.equal(listeners.get('tools/result').options, undefined)
})

test('paths: roots count up, a parent token or the calling context nests a child', async () => {
  const { requests, on } = setup()
  const execute = on('tools/execute')
  const outer = exec('outer')
  await execute(outer, async () => {
    await execute(exec('inner'), async () => OK)
    return OK
  })
  await execute(exec('by-token', { parent: outer.token }), async () => OK)
  await execute(exec('second'), async () => OK)
  assert.deepEqual(requests.map((r) => [r.params.tool, r.params.path]), [
    ['outer', 'root/0'], ['inner', 'root/0/0'], ['by-token', 'root/0/1'], ['second', 'root/1'],
  ])
  assert.deepEqual(requests[0].params, { handle: 'h1', path: 'root/0', tool: 'outer', callId: requests[0].params.callId, args: '{"text":"hi"}', sessionId: null })
})

test('paths: each calling agent numbers its own roots, and execute names its session', async () => {
  // Sessions of one warm host share the hooks: each session's first call is root/0.
  const { requests, on } = setup()
  const execute = on('tools/execute')
  const a = { id: 'session-a' }
  const b = { id: 'session-b' }
  for (const agent of [a, b, a, b, b]) await execute(exec('echo', { agent }), async () => OK)
  assert.deepEqual(requests.map((r) => [r.params.sessionId, r.params.path]), [
    ['session-a', 'root/0'], ['session-b', 'root/0'], ['session-a', 'root/1'], ['session-b', 'root/1'],
    ['session-b', 'root/2'],
  ])
})

test('paths: a child is numbered under its own parent call, not under another session\'s same path', async () => {
  // Two sessions' root/0 calls each nest a child: both are root/0/0 (a count kept by path string
  // made the second one root/0/1).
  const { requests, on } = setup()
  const execute = on('tools/execute')
  for (const agent of [{ id: 'session-a' }, { id: 'session-b' }]) {
    const outer = exec('relay', { agent })
    await execute(outer, async () => {
      await execute(exec('echo', { agent }), async () => OK)
      return OK
    })
    await execute(exec('echo', { agent, parent: outer.token }), async () => OK)
  }
  assert.deepEqual(requests.map((r) => [r.params.sessionId, r.params.path]), [
    ['session-a', 'root/0'], ['session-a', 'root/0/0'], ['session-a', 'root/0/1'],
    ['session-b', 'root/0'], ['session-b', 'root/0/0'], ['session-b', 'root/0/1'],
  ])
})

test('next runs the body; post: false skips the post-execute round trip', async () => {
  const { requests, on } = setup(() => ({ action: 'next', post: false }))
  const call = exec()
  assert.equal(await on('tools/execute')(call, async () => OK), OK)
  assert.deepEqual(await on('tools/post-execute')(call, OK, async () => ({ kind: 'accept' })), { kind: 'accept' })
  assert.deepEqual(requests.map((r) => r.method), ['tools/execute'])
})

test('without post: false, post-execute asks, and a refusal fails the call with its code', async () => {
  const { requests, on } = setup((method) => (method === 'tools/post-execute'
    ? { action: 'refuse', code: 'CASSETTE_CONCLUDES_TURN', message: 'CASSETTE_CONCLUDES_TURN: echo at root/0' }
    : { action: 'next' }))
  const call = exec()
  await on('tools/execute')(call, async () => OK)
  // rc.8 makes a listener's thrown HarnessError the call's failure, `info` from its name and code.
  await assert.rejects(on('tools/post-execute')(call, OK, async () => assert.fail('must not accept')),
    (error) => error instanceof HarnessError && error.name === 'SidecarError' && error.code === 'CASSETTE_CONCLUDES_TURN'
      && error.message === 'CASSETTE_CONCLUDES_TURN: echo at root/0')
  assert.deepEqual(requests[1].params, { handle: 'h1', path: 'root/0', tool: 'echo', result: OK, host: { observed: [], events: [] } })
  const dead = setup((method) => { if (method === 'tools/post-execute') throw new Error('pipe closed'); return { action: 'next' } })
  const other = exec()
  await dead.on('tools/execute')(other, async () => OK)
  await assert.rejects(dead.on('tools/post-execute')(other, OK, async () => assert.fail('must not accept')),
    (error) => error.code === 'SIDECAR_UNAVAILABLE' && error.message === 'SIDECAR_UNAVAILABLE: pipe closed')
})

test('serve returns the recorded result without the body, after deferring its contexts', async () => {
  const context = { role: 'user', content: [{ type: 'text', text: 'note' }] }
  const { on } = setup(() => ({ action: 'serve', result: OK, deferContexts: [context], cancellation: { isError: true } }))
  const call = exec()
  assert.equal(await on('tools/execute')(call, async () => assert.fail('the body must not run')), OK)
  assert.deepEqual(call.deferred, [context])
})

test('a real body reports what DSH tracked in its context; serve restores the host state Python sent', async () => {
  const { requests, listeners, on } = setup((method) => (method === 'tools/post-execute' ? { action: 'accept' } : { action: 'next' }))
  const call = exec()
  await on('tools/execute')(call, async () => {
    on('fs/observed')({ displayPath: '/w/a.txt', targetKey: 'k' }, { kind: 'present', version: 'v1' })
    on('session/event')({}, { type: 'todo/write', data: { todos: [] } })
    return OK
  })
  on('fs/observed')({ displayPath: '/w/outside.txt' }, { kind: 'absent' })  // no body runs here
  await on('tools/post-execute')(call, OK, async () => ({ kind: 'accept' }))
  assert.deepEqual(requests[1].params.host, {
    observed: [{ path: '/w/a.txt', kind: 'present' }], events: [{ type: 'todo/write', data: { todos: [] } }],
  })
  const emitted = []
  const appended = []
  const served = setup(() => ({ action: 'serve', result: OK, host: { observe: ['/w/a.txt', '/w/gone'], events: [{ type: 'todo/write', data: { todos: [1] } }] } }))
  const fs = { resolve: async (path) => ({ displayPath: path }), stat: async (target) => (target.displayPath === '/w/a.txt' ? { version: 'v2' } : undefined) }
  served.ctx.get = (name) => (name === 'fs' ? fs : undefined)
  served.ctx.emit = (...args) => emitted.push(args)
  const replayed = exec('echo', { agent: { session: { append: (type, data) => appended.push({ type, data }) } } })
  assert.equal(await served.on('tools/execute')(replayed, async () => assert.fail('the body must not run')), OK)
  assert.deepEqual(emitted.map(([name, target, observation]) => [name, target.displayPath, observation]), [
    ['fs/observed', '/w/a.txt', { kind: 'present', version: 'v2' }], ['fs/observed', '/w/gone', { kind: 'absent' }],
  ])
  assert.deepEqual(appended, [{ type: 'todo/write', data: { todos: [1] } }])
  assert.equal(listeners.has('fs/observed'), true)
})

test('serve on an aborted call returns the recorded cancellation', async () => {
  const cancellation = { isError: true, error: { message: 'aborted' }, content: [] }
  const { on } = setup(() => ({ action: 'serve', result: OK, cancellation }))
  const controller = new AbortController()
  controller.abort()
  assert.equal(await on('tools/execute')(exec('echo', { signal: controller.signal }), async () => OK), cancellation)
})

test('refuse and a failed request become error results named by their code', async () => {
  const refused = await setup(() => ({ action: 'refuse', code: 'CASSETTE_MISS', message: 'CASSETTE_MISS: no call' }))
    .on('tools/execute')(exec(), async () => OK)
  assert.deepEqual(refused, {
    isError: true, error: { message: 'CASSETTE_MISS: no call', info: { name: 'SidecarError', code: 'CASSETTE_MISS' } },
    content: [{ type: 'text', text: 'Error: CASSETTE_MISS: no call' }],
  })
  const dead = await setup(() => { throw new Error('pipe closed') }).on('tools/execute')(exec(), async () => OK)
  assert.equal(dead.error.info.code, 'SIDECAR_UNAVAILABLE')
  assert.equal(dead.error.message, 'SIDECAR_UNAVAILABLE: pipe closed')
})

test('a request that fails because the call was aborted is an ABORTED result', async () => {
  const controller = new AbortController()
  const { on } = setup(() => { controller.abort(); throw new Error('cancelled') })
  const result = await on('tools/execute')(exec('echo', { signal: controller.signal }), async () => OK)
  assert.equal(result.error.info.code, 'ABORTED')
})

test('tools/result is a notification with the call path and session, even for a call never executed here', async () => {
  const { notes, on } = setup()
  const call = exec('echo', { agent: { id: 'session-1' } })
  await on('tools/execute')(call, async () => OK)
  on('tools/result')(call, OK)
  const denied = exec('denied')
  on('tools/result')(denied, { isError: true })
  assert.deepEqual(notes, [
    { method: 'tools/result', params: { handle: 'h1', path: 'root/0', tool: 'echo', callId: call.callId, result: OK, sessionId: 'session-1' } },
    { method: 'tools/result', params: { handle: 'h2', path: null, tool: 'denied', callId: denied.callId, result: { isError: true }, sessionId: null } },
  ])
})

test('when Python asks for no decisions, calls run untouched and only their results are reported', async () => {
  const listeners = new Map()
  const ctx = { on: (name, fn) => listeners.set(name, fn) }
  const requests = []
  const notes = []
  const rpc = { request: async (method) => { requests.push(method); return {} }, notify: (method, params) => notes.push({ method, params }) }
  installToolHooks(ctx, rpc, false)
  const outer = exec('outer')
  const inner = exec('inner')
  await listeners.get('tools/execute')(outer, async () => listeners.get('tools/execute')(inner, async () => OK))
  assert.deepEqual(await listeners.get('tools/post-execute')(outer, OK, async () => ({ kind: 'accept' })), { kind: 'accept' })
  listeners.get('tools/result')(inner, OK)
  assert.deepEqual(requests, [])
  assert.deepEqual(notes.map((n) => [n.params.tool, n.params.path]), [['inner', 'root/0/0']])
})
