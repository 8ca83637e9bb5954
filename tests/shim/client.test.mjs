// node --test: the web client part (node_shim/client/mock-ui.js) outside the browser. It is a
// classic script registering a factory with window.__ModuleLoader__, so it is run in a vm
// context with a stand-in loader, React (createElement as plain objects) and Cordis context.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import vm from 'node:vm'

const source = readFileSync(new URL('../../node_shim/client/mock-ui.js', import.meta.url), 'utf8')
const pkg = JSON.parse(readFileSync(new URL('../../node_shim/package.json', import.meta.url), 'utf8'))

function load() {
  const registrations = []
  vm.runInNewContext(source, { window: { __ModuleLoader__: { load: (r) => registrations.push(r) } } })
  assert.equal(registrations.length, 1)
  const react = { createElement: (type, props, ...children) => ({ type, props: props ?? {}, children }) }
  const exports = registrations[0].factory((spec) => {
    assert.equal(spec, 'react')
    return react
  })
  return { id: registrations[0].id, exports }
}

function applied() {
  const { exports } = load()
  const slots = {}
  const events = []
  const views = []
  const ctx = {
    effect: (fn) => fn(),
    locale: { register: () => () => {} },
    conversationEvents: { register: (d) => events.push(d) },
    conversationViews: { register: (d) => views.push(d) },
    slots: { inject: (_key, fn) => fn(), register: (options, component) => { slots[options.name] = component } },
  }
  exports.apply(ctx)
  return { slots, events, views }
}

/** A value made in the vm realm, as this realm's plain data. */
const plain = (value) => JSON.parse(JSON.stringify(value))
/** The text content of a createElement tree. */
const text = (node) => (node === null || node === undefined || node === false ? ''
  : typeof node !== 'object' ? String(node) : node.children.map(text).join(''))
const t = (key, params) => (params ? `${key}${JSON.stringify(params)}` : key)
const status = (fields) => ({ mode: 'replay', step_count: 3, error_code: null, error_message: null, failed_tool: null,
  failed_step: null, steps_stopped: 0, session_id: 's', turn_id: '1', source_name: null, ...fields })

test('registers under the package name with the plugin surface and matching dictionaries', () => {
  const { id, exports } = load()
  assert.equal(id, pkg.name)
  assert.deepEqual(Object.keys(exports).sort(), ['apply', 'en', 'inject', 'zh'])
  assert.deepEqual(plain(exports.inject), ['slots', 'locale', 'conversationEvents', 'conversationViews'])
  assert.deepEqual(Object.keys(exports.zh).sort(), Object.keys(exports.en).sort())
})

test('the row renders the published step over the executable-step count while the agent runs', () => {
  const { slots } = applied()
  const Dock = slots['conversation.input.dock']
  const seen = { seq: 9, status: status({ phase: 'running', step: 2 }) }
  const session = { running: true, views: { get: () => seen } }
  assert.equal(text(Dock({ session, t })), 'row.replay · 2/3 · phase.running')
  assert.equal(Dock({ session: { ...session, running: false }, t }), null)
  assert.equal(Dock({ session: { running: true, views: { get: () => null } }, t }), null)
})

test('the status view keeps the newest event and chat cards exist only where Python asked for one', () => {
  const { events, views } = applied()
  const builder = views[0].create()
  const node = (seq) => ({ data: { seq, status: status({}) } })
  assert.equal(builder.replace({ nodes: [node(4), node(7), node(5)] }).seq, 7)
  assert.equal(builder.apply({ upserts: [] }).seq, 7)
  assert.equal(builder.apply({ upserts: [node(8)] }).seq, 8)
  const cards = events.find((d) => d.target === 'chat')
  assert.equal(cards.match({ type: 'mock/status', seq: 3, data: status({ card: null }) }), null)
  assert.deepEqual(plain(cards.match({ type: 'mock/status', seq: 3, data: status({ card: 'tool-stop' }) })), { id: '3', role: 'start' })
  assert.equal(cards.match({ type: 'tool/result', seq: 4, data: {} }), null)
})

test('cards render the location, code and tool that Python published', () => {
  const { slots } = applied()
  const Card = slots['conversation.chat.node']
  const invalid = status({ card: 'invalid-script', error_code: 'INVALID_SCRIPT', location: 'a.json:2 at /steps/0', error_message: 'bad' })
  assert.equal(text(Card({ node: { data: { seq: 1, status: invalid } }, t })),
    'invalid.title · INVALID_SCRIPTa.json:2 at /steps/0badinvalid.noTool')
  const stop = status({ card: 'tool-stop', error_code: 'TOOL_FAILED', runtime_code: 'PERMISSION_DENIED', failed_tool: 'x', failed_step: 2, steps_stopped: 1 })
  assert.equal(text(Card({ node: { data: { seq: 1, status: stop } }, t })),
    'stop.title{"mode":"replay"} · TOOL_FAILED'
    + 'stop.tool{"step":2,"total":3,"tool":"x","code":"PERMISSION_DENIED"}'
    + 'stop.later{"count":1}')
})
