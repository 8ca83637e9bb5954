// node --test: the shim's JSON-RPC client, against in-memory streams.
import assert from 'node:assert/strict'
import { PassThrough, Writable } from 'node:stream'
import { test } from 'node:test'
import { MAX_LINE, NOTIFY_DELAY_MS, Rpc, SidecarUnavailable } from '../../node_shim/rpc.js'

function pair() {
  const toPython = new PassThrough()
  const fromPython = new PassThrough()
  const rpc = new Rpc(toPython, fromPython)
  const sent = []
  toPython.setEncoding('utf8')
  toPython.on('data', (chunk) => sent.push(...chunk.split('\n').filter(Boolean).map((l) => JSON.parse(l))))
  return { rpc, sent, fromPython }
}

test('answers split across chunks and joined in one chunk resolve the right requests', async () => {
  const { rpc, fromPython } = pair()
  const first = rpc.request('a', {})
  const second = rpc.request('b', {})
  fromPython.write('{"jsonrpc":"2.0","id":2,"res')
  fromPython.write('ult":"two"}\n{"jsonrpc":"2.0","id":1,"result":"one"}\n')
  assert.deepEqual(await Promise.all([first, second]), ['one', 'two'])
})

test('an error answer rejects with the sidecar error code', async () => {
  const { rpc, fromPython } = pair()
  const call = rpc.request('tools/execute', {})
  fromPython.write('{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"CASSETTE_MISMATCH: echo at root/0","data":{"code":"CASSETTE_MISMATCH"}}}\n')
  await assert.rejects(call, (error) => error.code === 'CASSETTE_MISMATCH' && error.message === 'CASSETTE_MISMATCH: echo at root/0')
})

test('an aborted signal sends $/cancelRequest and rejects at once', async () => {
  const { rpc, sent } = pair()
  const controller = new AbortController()
  const call = rpc.request('llm/stream', {}, controller.signal)
  controller.abort(new Error('user cancelled'))
  await assert.rejects(call, /user cancelled/)
  await new Promise((done) => setImmediate(done))
  assert.deepEqual(sent.map((m) => m.method), ['llm/stream', '$/cancelRequest'])
  assert.deepEqual(sent[1].params, { id: 1 })
})

test('a dead sidecar fails pending and later calls closed', async () => {
  const { rpc } = pair()
  const pending = rpc.request('tools/execute', {})
  rpc.fail(new SidecarUnavailable('sidecar exited (code null, signal SIGKILL)'))
  await assert.rejects(pending, (error) => error.code === 'SIDECAR_UNAVAILABLE')
  await assert.rejects(rpc.request('tools/execute', {}), (error) => error.code === 'SIDECAR_UNAVAILABLE')
})

test('a non-JSON line on the protocol stream kills the connection', async () => {
  const { rpc, fromPython } = pair()
  const pending = rpc.request('x', {})
  fromPython.write('hello from a stray print\n')
  await assert.rejects(pending, (error) => error.code === 'SIDECAR_UNAVAILABLE')
})

test('a line from the sidecar that is not an answer settles nothing', async () => {
  const { rpc, fromPython } = pair()
  const call = rpc.request('tools/execute', {})
  fromPython.write('null\n{"jsonrpc":"2.0","id":1,"method":"host/call","params":{}}\n[1]\n')
  fromPython.write('{"jsonrpc":"2.0","id":1,"result":{"action":"next"}}\n')
  assert.deepEqual(await call, { action: 'next' })
})

test('a line from the sidecar longer than the cap fails the connection closed', async () => {
  const { rpc, fromPython } = pair()
  const pending = rpc.request('tools/execute', {})
  const piece = Buffer.alloc(1024 * 1024, 'x')
  for (let i = 0; i <= 64; i++) fromPython.write(piece)
  await assert.rejects(pending, (error) => error.code === 'SIDECAR_UNAVAILABLE' && /longer than 67108864 bytes/.test(error.message))
})

test('the cap counts UTF-8 bytes: a line of 2-byte characters under the cap in characters is over it', async () => {
  const { rpc, fromPython } = pair()
  const pending = rpc.request('tools/execute', {})
  const head = '{"jsonrpc":"2.0","id":1,"result":"'
  const text = 'é'.repeat(MAX_LINE / 2)
  assert.ok((head + text).length < MAX_LINE)
  fromPython.write(head + text + '"}\n')
  await assert.rejects(pending, (error) => error.code === 'SIDECAR_UNAVAILABLE' && /longer than 67108864 bytes/.test(error.message))
})

test('a line of exactly the cap, split across chunks, is an answer', async () => {
  const { rpc, fromPython } = pair()
  const pending = rpc.request('tools/execute', {})
  const head = '{"jsonrpc":"2.0","id":1,"result":"'
  const line = Buffer.from(head + 'y'.repeat(MAX_LINE - head.length - 2) + '"}')
  assert.equal(line.length, MAX_LINE)
  for (let at = 0; at < line.length; at += 3_000_001) fromPython.write(line.subarray(at, at + 3_000_001))
  fromPython.write('\n')
  assert.equal((await pending).length, MAX_LINE - head.length - 2)
})

test('a request over the cap in UTF-8 bytes is refused MESSAGE_TOO_LARGE, unsent, and the connection lives on', async () => {
  const { rpc, sent, fromPython } = pair()
  const big = rpc.request('tools/execute', { args: 'é'.repeat(MAX_LINE / 2) })
  await assert.rejects(big, (error) => error.code === 'MESSAGE_TOO_LARGE' && /tools\/execute is \d+ bytes/.test(error.message))
  const next = rpc.request('tools/execute', {})
  await new Promise((done) => setImmediate(done)) // the request leaves at the end of this turn
  fromPython.write(`{"jsonrpc":"2.0","id":${sent.at(-1).id},"result":{"action":"next"}}\n`)
  assert.deepEqual(await next, { action: 'next' })
  assert.deepEqual(sent.map((m) => m.method), ['tools/execute'])
})

test('a notification over the cap is not sent and says so on stderr once', async () => {
  const { rpc, sent } = pair()
  const lines = []
  const write = process.stderr.write
  process.stderr.write = (text) => { lines.push(String(text)); return true }
  try {
    rpc.notify('tools/result', { result: 'x'.repeat(MAX_LINE) })
  } finally {
    process.stderr.write = write
  }
  rpc.notify('tools/result', { result: 'small' })
  rpc.flush()
  await new Promise((done) => setImmediate(done))
  assert.equal(lines.length, 1)
  assert.match(lines[0], /^dsh-sidecar: MESSAGE_TOO_LARGE: tools\/result is \d+ bytes .* over the 67108864-byte cap/)
  assert.deepEqual(sent.map((m) => m.params.result), ['small'])
})

/** An Rpc whose output records each write() call as it is made. */
function writes() {
  const chunks = []
  const output = new Writable({ write(chunk, _encoding, done) { chunks.push(String(chunk)); done() } })
  const fromPython = new PassThrough()
  return { rpc: new Rpc(output, fromPython), chunks, fromPython }
}

test('notifications ride with the next request, in order, in one write', async () => {
  const { rpc, chunks } = writes()
  rpc.notify('tools/result', { handle: 'h1' })
  rpc.notify('session/turn', { turn: 1 })
  rpc.request('llm/stream', { sessionId: 's' })
  await new Promise((done) => setImmediate(done))
  assert.equal(chunks.length, 1)
  assert.deepEqual(chunks[0].trimEnd().split('\n').map((l) => JSON.parse(l).method), ['tools/result', 'session/turn', 'llm/stream'])
})

test('requests sent in one turn of the event loop leave in one write, in order', async () => {
  const { rpc, chunks, fromPython } = writes()
  const calls = [1, 2, 3].map((n) => rpc.request('tools/execute', { handle: `h${n}` }))
  assert.equal(chunks.length, 0)
  await new Promise((done) => setImmediate(done))
  assert.equal(chunks.length, 1)
  assert.deepEqual(chunks[0].trimEnd().split('\n').map((l) => JSON.parse(l).params.handle), ['h1', 'h2', 'h3'])
  // Answers that wake all three callers in one chunk: their next requests share a write too.
  const next = calls.map((call, n) => call.then(() => rpc.request('tools/post-execute', { handle: `h${n + 1}` })))
  fromPython.write([1, 2, 3].map((id) => `{"jsonrpc":"2.0","id":${id},"result":{}}\n`).join(''))
  await new Promise((done) => setImmediate(done))
  assert.equal(chunks.length, 2)
  assert.deepEqual(chunks[1].trimEnd().split('\n').map((l) => JSON.parse(l).method), Array(3).fill('tools/post-execute'))
  fromPython.write([4, 5, 6].map((id) => `{"jsonrpc":"2.0","id":${id},"result":{}}\n`).join(''))
  await Promise.all(next)
})

test('a notification alone leaves after NOTIFY_DELAY_MS', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] })
  const { rpc, chunks } = writes()
  rpc.notify('mock/session-end', { sessionId: 's' })
  t.mock.timers.tick(NOTIFY_DELAY_MS - 1)
  await new Promise((done) => setImmediate(done))
  assert.equal(chunks.length, 0)
  t.mock.timers.tick(1)
  await new Promise((done) => setImmediate(done))
  assert.deepEqual(chunks.map((c) => JSON.parse(c).method), ['mock/session-end'])
})

test('a dead connection drops queued notifications', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] })
  const { rpc, chunks } = writes()
  rpc.notify('mock/session-end', { sessionId: 's' })
  rpc.fail(new SidecarUnavailable('gone'))
  rpc.flush()
  t.mock.timers.tick(NOTIFY_DELAY_MS)
  await new Promise((done) => setImmediate(done))
  assert.deepEqual(chunks, [])
})
