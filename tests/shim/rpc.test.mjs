// node --test: the shim's JSON-RPC client, against in-memory streams.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { Rpc, SidecarUnavailable } from '../../node_shim/rpc.js'

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
  const piece = 'x'.repeat(1024 * 1024)
  for (let i = 0; i <= 64; i++) fromPython.write(piece)
  await assert.rejects(pending, (error) => error.code === 'SIDECAR_UNAVAILABLE' && /longer than 67108864/.test(error.message))
})
