// @ts-check
/**
 * dsh-sidecar shim: forwards DSH rc.8 extension points to the Python sidecar over stdio
 * JSON-RPC. It computes only what the host alone can see (structural call path, turn/step,
 * session id) and turns Python's answers into host values. Every decision is Python's.
 */
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import z from '@deepseek-ai/schemastery'
import { installMockRoute } from './mock.js'
import { installModelCassette } from './model.js'
import { RemoteError, Rpc, SidecarUnavailable, messageOf, plain } from './rpc.js'
import { installSubagentProvider } from './subagent.js'
import { installStepWatch } from './steps.js'
import { installToolHooks } from './tools.js'
import { runWarmHost } from './warm.js'

export const name = 'dsh-sidecar'
export const inject = ['tools', 'llm']
const PROTOCOL_VERSION = 1

const here = dirname(fileURLToPath(import.meta.url))

/** The Python the installer ran with, unless the row names one. @returns {string[]} */
function installedPython() {
  const file = join(here, 'install.json')
  if (!existsSync(file)) return ['python3']
  return JSON.parse(readFileSync(file, 'utf8')).python
}

// Sections other than `python` are validated by Python at `initialize` (unknown keys included).
export const Config = z.object({
  python: z.array(z.string()).description('argv prefix that starts Python (default: the installing interpreter)'),
  toolCassette: z.any(),
  mock: z.any(),
  subagentCassette: z.any(),
  modelCassette: z.any(),
})

/** @param {string} pkg @returns {string | null} */
function versionOf(pkg) {
  const require = createRequire(import.meta.url)
  for (const dir of require.resolve.paths(pkg) ?? []) {
    const file = join(dir, pkg, 'package.json')
    if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')).version
  }
  return null
}

/**
 * The package a row's module belongs to: for a `file:` module the nearest `package.json` above
 * it, for a package specifier (`@scope/name/sub` or `name/sub`) its `package.json` resolved as the
 * loader resolves rows (from the profile folder, `baseUrl`).
 * @param {string} specifier @param {string | undefined} baseUrl
 * @returns {{ package: string | null, version: string | null }}
 */
function packageOf(specifier, baseUrl) {
  const none = { package: null, version: null }
  try {
    /** @type {string | undefined} */
    let file
    if (specifier.startsWith('file:')) {
      for (let dir = dirname(fileURLToPath(specifier)); ; dir = dirname(dir)) {
        if (existsSync(join(dir, 'package.json'))) { file = join(dir, 'package.json'); break }
        if (dirname(dir) === dir) break
      }
    } else if (!specifier.includes(':')) {
      const parts = specifier.split('/')
      const pkg = parts.slice(0, specifier.startsWith('@') ? 2 : 1).join('/')
      const require = createRequire(baseUrl ?? import.meta.url)
      file = (require.resolve.paths(pkg) ?? []).map((dir) => join(dir, pkg, 'package.json')).find((f) => existsSync(f))
    }
    if (file === undefined) return none
    const json = JSON.parse(readFileSync(file, 'utf8'))
    return { package: typeof json.name === 'string' ? json.name : null, version: typeof json.version === 'string' ? json.version : null }
  } catch {
    return none
  }
}

/**
 * The rows of the loader's tree (each exists once the tree is read, before any plugin applies):
 * what the run composes. Python decides which rows count; `undefined` when there is no loader.
 * @param {import('./types').Context} ctx @returns {import('./types').PluginRow[] | undefined}
 */
function composedRows(ctx) {
  /** @type {{ entries(): Iterable<{ options: { name: string }, disabled: boolean, parent?: { tree?: { ctx?: { baseUrl?: string } } } }> } | undefined} */
  const loader = ctx.get('loader')
  if (loader === undefined) return undefined
  return [...loader.entries()].map((entry) => ({
    name: entry.options.name, enabled: !entry.disabled, ...packageOf(entry.options.name, entry.parent?.tree?.ctx?.baseUrl),
  }))
}

const HOST_PACKAGES = ['@deepseek-ai/dsh', '@deepseek-ai/dsh-tools', '@deepseek-ai/dsh-llm',
  '@deepseek-ai/dsh-agent', '@deepseek-ai/dsh-subagent', '@deepseek-ai/cordis']

/**
 * @typedef {{ python?: string[], toolCassette?: unknown, mock?: unknown, subagentCassette?: unknown, modelCassette?: unknown }} RowConfig
 * @typedef {{ code: number | null, signal: NodeJS.Signals | null, error?: NodeJS.ErrnoException }} Exit
 */

/**
 * Start the sidecar and finish the handshake.
 * @param {RowConfig} config @param {import('./types').PluginRow[] | undefined} plugins
 */
async function startSidecar(config, plugins) {
  const python = config.python?.length ? config.python : installedPython()
  const argv = [...python, '-m', 'dsh_sidecar.bridge']
  const child = spawn(argv[0], argv.slice(1), {
    cwd: process.cwd(),
    stdio: ['pipe', 'pipe', 'inherit'],
    // The environment is the user's, PYTHONDONTWRITEBYTECODE included: `dsh-sidecar install`
    // compiled the sidecar's bytecode, so a start does not recompile it either way.
    env: { ...process.env, PYTHONUNBUFFERED: '1' },
  })
  const rpc = new Rpc(child.stdin, child.stdout)
  /** @type {Promise<Exit>} */
  const exited = new Promise((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal }))
    child.on('error', (error) => resolve({ code: null, signal: null, error }))
  })
  exited.then((how) => {
    const why = how.error ? `cannot start sidecar (${how.error.code ?? how.error.message})` : `sidecar exited (code ${how.code}, signal ${how.signal})`
    if (rpc.dead === undefined && !rpc.closing) {
      process.stderr.write(`dsh-sidecar: SIDECAR_UNAVAILABLE: ${why}; every later call fails closed\n`)
      process.once('exit', () => { process.exitCode = Math.max(Number(process.exitCode ?? 0), 1) })
    }
    rpc.fail(new SidecarUnavailable(why))
  })
  const versions = Object.fromEntries(HOST_PACKAGES.map((p) => [p, versionOf(p)]))
  try {
    /** @type {import('./types').InitializeResult} */
    const reply = await rpc.request('initialize', {
      protocolVersion: PROTOCOL_VERSION, host: versions, config: plain(config), cwd: process.cwd(), pid: process.pid,
      ...(plugins === undefined ? {} : { plugins }),
    })
    return { rpc, child, exited, reply }
  } catch (error) {
    // The plugin will not activate, so no cleanup effect will run: close the child here.
    rpc.closing = true
    child.stdin.end()
    throw error
  }
}

/**
 * The sidecar refused to start (a named error) or could not start: say it once, with the fix,
 * and end the DSH process before any turn runs. Throwing instead would make rc.8 print the
 * error with its stack twice; carrying on without the sidecar would run real tools.
 * @param {unknown} error
 * @returns {never}
 */
function refuseBoot(error) {
  // A sidecar that could not start was already reported by its exit watcher.
  if (!(error instanceof SidecarUnavailable)) process.stderr.write(`dsh-sidecar: ${error instanceof Error ? error.message : String(error)}\n`)
  const hint = (error instanceof RemoteError ? error.hint : undefined) ?? (error instanceof SidecarUnavailable
    ? 'the row\'s `python` (default: the interpreter `dsh-sidecar install` ran with) must import `dsh_sidecar.bridge`; re-run `dsh-sidecar install` from that environment or set `python`'
    : undefined)
  if (hint) process.stderr.write(`dsh-sidecar: fix: ${hint}\n`)
  process.exit(1)
}

/** @param {import('./types').Context} ctx @param {RowConfig} config */
export async function apply(ctx, config) {
  /** @type {Rpc | undefined} */
  let rpc
  /** @type {import('./types').InitializeResult | undefined} */
  let reply
  await ctx.effect(async () => {
    const started = await startSidecar(config, composedRows(ctx)).catch(refuseBoot)
    rpc = started.rpc
    reply = started.reply
    return async () => {
      const sidecar = started.rpc
      /** @type {import('./types').ShutdownResult} */
      let status = { exitCode: 0, errors: [], notes: [] }
      if (sidecar.dead === undefined) {
        try { status = await sidecar.request('shutdown', {}) } catch (error) {
          status = { exitCode: 1, errors: [messageOf(error)], notes: [] }
        }
      }
      sidecar.closing = true
      started.child.stdin.end()
      const timer = setTimeout(() => started.child.kill('SIGKILL'), 10_000)
      await started.exited
      clearTimeout(timer)
      for (const line of [...status.notes ?? [], ...status.errors]) process.stderr.write(`dsh-sidecar: ${line}\n`)
      for (const hint of status.fixes ?? []) process.stderr.write(`dsh-sidecar: fix: ${hint}\n`)
      if (status.exitCode !== 0) {
        process.once('exit', () => { process.exitCode = Math.max(Number(process.exitCode ?? 0), status.exitCode) })
      }
    }
  }, 'dsh-sidecar process')
  // The effect above either set both or ended the process (refuseBoot).
  if (rpc === undefined || reply === undefined) return
  const live = rpc
  const hooks = new Set(reply.hooks)
  const standUp = hooks.has('tools') ? installToolHooks(ctx, live, reply.askExecute !== false, reply.standIns, reply.registry, reply.warm) : undefined
  if (hooks.has('llm')) installMockRoute(ctx, live)
  if (hooks.has('model')) installModelCassette(ctx, live)
  if (hooks.has('steps')) installStepWatch(ctx, live)
  if (hooks.has('turns')) {
    // Python publishes a recording only once its turn really ended: forward turn boundaries.
    ctx.on('session/event', (session, event) => {
      if (event.type === 'turn/start') {
        live.notify('session/turn', { sessionId: String(session.id), turn: event.data.turn, phase: 'start' })
      } else if (event.type === 'turn/end') {
        live.notify('session/turn', {
          sessionId: String(session.id), turn: event.data.turn, phase: 'end', reason: event.data.reason?.kind ?? null,
        })
      }
    })
  }
  const setup = reply.subagent
  if (hooks.has('subagent') && setup !== undefined) {
    ctx.inject(['subagents'], (sctx) => installSubagentProvider(sctx, live, setup))
  }
  if (hooks.has('warm')) runWarmHost(ctx, live, standUp)
}
