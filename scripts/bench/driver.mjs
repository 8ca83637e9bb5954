// @ts-check
/**
 * Node side of scripts/bench_bridge. One mode per run, one JSON object on stdout.
 *   node driver.mjs floor   <python> <echo.py>        bare line echo (the transport floor)
 *   node driver.mjs bridge  <python> <root> <tmpdir>  tools/execute via node_shim/rpc.js
 *   node driver.mjs startup <python> <root> <tmpdir>  spawn -> initialize reply
 *   node driver.mjs cancel  <python> <root> <tmpdir>  $/cancelRequest latency while 32 calls record
 * The sidecar starts with the environment as the shim passes it (PYTHONDONTWRITEBYTECODE as
 * set); PYTHONPATH in the environment picks the sidecar checkout under test.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const [mode, python, arg1, arg2] = process.argv.slice(2)
const WARMUP = 1000
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 10000)
const CONCURRENT = Number(process.env.BENCH_CONCURRENT ?? 50000)
const IN_FLIGHT = 32
const STARTUPS = Number(process.env.BENCH_STARTUPS ?? 10)
const PROBES = Number(process.env.BENCH_PROBES ?? 2000)
// Loaded and idle probe segments alternate this many times in a cancel run.
const SEGMENTS = 8
const RECORDERS = Number(process.env.BENCH_RECORDERS ?? IN_FLIGHT)
// Recorded calls per second offered by all recorders together; 0 records as fast as answered.
const RATE = Number(process.env.BENCH_RATE ?? 0)

/** @param {number} i */
const executeParams = (i) => ({ handle: `h${i}`, path: `root/${i}`, tool: 'weather_lookup', callId: `call_${i}`, args: '{"city":"Paris","unit":"c"}' })

const now = () => Number(process.hrtime.bigint()) / 1000 // µs

/** CPU time (user + system) a process has used so far, in µs, from /proc (Linux; else NaN). */
function cpuUs(/** @type {number | undefined} */ pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(fields[11]) + Number(fields[12])) * 1e4 // clock ticks at USER_HZ 100
  } catch { return NaN }
}

/**
 * This (main) thread's time on a CPU and runnable without one so far, in µs, from /proc
 * (Linux with schedstats; else NaN). The read itself costs about 12 µs of the former.
 * @returns {[number, number]}
 */
function threadUs() {
  try {
    const [onCpu, runnable] = readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')
    return [Number(onCpu) / 1000, Number(runnable) / 1000]
  } catch { return [NaN, NaN] }
}

/**
 * The slowest 1% of `us` (those at or above the p99), with what Node's own thread did meanwhile.
 * @param {number[]} us @param {Array<[number, number]>} node per probe: µs on a CPU, µs runnable
 */
function tail(us, node) {
  const cut = summary(us).p99Us
  const slow = us.flatMap((u, k) => (u >= cut ? [k] : []))
  const mean = (/** @type {(k: number) => number} */ f) => slow.reduce((a, k) => a + f(k), 0) / slow.length
  return { n: slow.length, meanUs: mean((k) => us[k]), nodeOnCpuUs: mean((k) => node[k][0]), nodeRunnableUs: mean((k) => node[k][1]) }
}

/** @param {number[]} us */
function summary(us) {
  const sorted = [...us].sort((a, b) => a - b)
  const at = (/** @type {number} */ q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]
  const total = us.reduce((a, b) => a + b, 0)
  return { n: us.length, medianUs: at(0.5), p99Us: at(0.99), callsPerSec: us.length / (total / 1e6) }
}

/**
 * Sequential and IN_FLIGHT-concurrent runs of `call`; `pid` is the peer whose CPU time is counted.
 * @param {(i: number) => Promise<any>} call @param {number | undefined} pid
 */
async function measure(call, pid) {
  for (let i = 0; i < WARMUP; i++) await call(i)
  const cpu0 = cpuUs(pid), self0 = process.cpuUsage()
  const us = []
  for (let i = 0; i < SEQUENTIAL; i++) {
    const t0 = now()
    await call(i)
    us.push(now() - t0)
  }
  const self1 = process.cpuUsage(self0)
  const perCall = { peerCpuUs: (cpuUs(pid) - cpu0) / SEQUENTIAL, nodeCpuUs: (self1.user + self1.system) / SEQUENTIAL }
  let next = 0
  const t0 = now()
  await Promise.all(Array.from({ length: IN_FLIGHT }, async () => {
    while (next < CONCURRENT) await call(next++)
  }))
  const seconds = (now() - t0) / 1e6
  return { sequential: { ...summary(us), ...perCall }, concurrent: { inFlight: IN_FLIGHT, n: CONCURRENT, callsPerSec: CONCURRENT / seconds } }
}

/** A line echo peer with the same framing and JSON work as rpc.js, minus the RPC bookkeeping. */
async function floor() {
  const child = spawn(python, ['-u', arg1], { stdio: ['pipe', 'pipe', 'inherit'] })
  /** @type {Array<(line: string) => void>} */
  const waiting = []
  let buffer = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (/** @type {string} */ chunk) => {
    buffer += chunk
    let newline
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline)
      buffer = buffer.slice(newline + 1)
      const resolve = /** @type {(line: string) => void} */ (waiting.shift())
      resolve(line)
    }
  })
  const call = (/** @type {number} */ i) => new Promise((resolve) => {
    waiting.push((line) => resolve(JSON.parse(line)))
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/execute', params: executeParams(i) }) + '\n')
  })
  const result = await measure(call, child.pid)
  child.stdin.end()
  await new Promise((resolve) => child.on('exit', resolve))
  return result
}

/** @param {string} root */
async function loadRpc(root) {
  return (await import(pathToFileURL(join(root, 'node_shim', 'rpc.js')).href)).Rpc
}

/** Start `python -m dsh_sidecar.bridge` the way the shim does and finish the handshake. */
async function startSidecar(/** @type {any} */ Rpc, /** @type {string} */ tmp, /** @type {number} */ n, config = {}) {
  const t0 = now()
  const child = spawn(python, ['-m', 'dsh_sidecar.bridge'], { cwd: tmp, stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, PYTHONUNBUFFERED: '1' } })
  const exited = new Promise((resolve) => child.on('exit', resolve))
  const rpc = new Rpc(child.stdin, child.stdout)
  const reply = await rpc.request('initialize', {
    protocolVersion: 1, host: {}, config, cwd: tmp, pid: process.pid,
  })
  const handshakeUs = now() - t0
  if (!reply.hooks.includes('tools')) throw new Error(`tools hooks not opened: ${JSON.stringify(reply)}`)
  const stop = async () => {
    const status = await rpc.request('shutdown', {})
    rpc.closing = true
    child.stdin.end()
    const code = await exited
    if (status.exitCode !== 0 || code !== 0) throw new Error(`sidecar shutdown ${JSON.stringify(status)}, exit ${code}`)
  }
  return { rpc, handshakeUs, stop, pid: child.pid }
}

async function bridge() {
  const Rpc = await loadRpc(arg1)
  const { rpc, stop, pid } = await startSidecar(Rpc, arg2, 0)
  const call = async (/** @type {number} */ i) => {
    const decision = await rpc.request('tools/execute', executeParams(i))
    if (decision.action !== 'next') throw new Error(`unexpected decision ${JSON.stringify(decision)}`)
  }
  const result = await measure(call, pid)
  await stop()
  return result
}

async function startup() {
  const Rpc = await loadRpc(arg1)
  const us = []
  for (let n = 0; n < STARTUPS; n++) {
    const { handshakeUs, stop } = await startSidecar(Rpc, arg2, n)
    us.push(handshakeUs)
    await stop()
  }
  return summary(us)
}

/**
 * `$/cancelRequest` sent as a request (answered by the reader, like every cancel) while
 * RECORDERS (IN_FLIGHT unless BENCH_RECORDERS says otherwise) workers record selected calls
 * (tools/execute, post-execute, result: fsync per frame).
 * BENCH_RATE > 0 paces them to that many recorded calls per second in all, instead.
 * The same number of probes is taken with the recorders paused, in SEGMENTS alternating with
 * the loaded ones, so both figures see the same machine (a host turning noisy shows in both).
 * For the slowest 1% of each, what Node's own thread did meanwhile: the host's real shim sends
 * cancels as notifications and never waits for this answer, so time the driver's event loop
 * spent on the recorders' answers, or waiting for a CPU, is the driver's, not the sidecar's.
 * A bridge that does not answer cancel requests is probed with an unknown method instead.
 */
async function cancel() {
  const Rpc = await loadRpc(arg1)
  const config = { toolCassette: { mode: 'record', file: `${arg2}/bench.cassette.jsonl`, include: ['weather_lookup'] } }
  const { rpc, stop } = await startSidecar(Rpc, arg2, 0, config)
  const probeMethod = await Promise.race([
    rpc.request('$/cancelRequest', { id: -1 }).then(() => '$/cancelRequest'),
    new Promise((resolve) => setTimeout(() => resolve('no/such'), 1000)),
  ])
  const result = { isError: false, content: [{ type: 'text', text: 'sunny, 21 C' }], value: { sky: 'sunny', celsius: 21 } }
  // The recording spans one whole turn, so shutdown publishes it (a recording is published only
  // once the turn it records really ended).
  rpc.notify('session/turn', { sessionId: 'bench', turn: 1, phase: 'start' })
  let running = true
  let recorded = 0
  // Pausing: workers finish the call they are in, then wait for `resume`.
  let paused = false
  let active = RECORDERS
  /** @type {() => void} */
  let resume = () => {}
  /** @type {Promise<void>} */
  let resumed = Promise.resolve()
  /** @type {(() => void) | undefined} */
  let allPaused
  // Pacing's clock; a pause moves it on by the pause, so calls do not catch up in a burst.
  let start = now()
  const worker = async (/** @type {number} */ w) => {
    for (let i = 0; running; i++) {
      if (paused) {
        if (--active === 0) allPaused?.()
        await resumed
        active++
        if (!running) break
      }
      if (RATE > 0) {
        // Paced: call k of all workers is due at k / RATE s; a worker behind schedule goes at once.
        const due = start + ((i * RECORDERS + w) / RATE) * 1e6
        const wait = due - now()
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait / 1000))
        if (!running) break
      }
      const params = executeParams(w * 1_000_000 + i)
      await rpc.request('tools/execute', params)
      await rpc.request('tools/post-execute', { handle: params.handle, path: params.path, tool: params.tool, result })
      rpc.notify('tools/result', { handle: params.handle, path: params.path, tool: params.tool, callId: params.callId, result })
      recorded++
    }
  }
  const workers = Array.from({ length: RECORDERS }, (_, w) => worker(w))
  const pause = async () => {
    const idle = new Promise((resolve) => { allPaused = () => resolve(undefined) })
    resumed = new Promise((resolve) => { resume = () => resolve(undefined) })
    paused = true
    if (active > 0) await idle
  }
  const probe = async (/** @type {number[]} */ us, /** @type {Array<[number, number]>} */ node, /** @type {number} */ n) => {
    for (let k = 0; k < n; k++) {
      const t0 = threadUs()
      const p0 = now()
      await rpc.request(probeMethod, { id: -1 }).catch(() => null)
      us.push(now() - p0)
      const t1 = threadUs()
      node.push([t1[0] - t0[0], t1[1] - t0[1]])
      await new Promise((resolve) => setTimeout(resolve, 2))
    }
  }
  // Steady state only: the first second (the sidecar imports jsonrpcserver in a worker thread
  // right after the handshake, Node's JIT warms up) is probed but not counted.
  for (const warm = now() + 1e6; now() < warm;) await probe([], [], 1)
  /** @type {number[]} */
  const loaded = []
  /** @type {number[]} */
  const idle = []
  /** @type {Array<[number, number]>} */
  const loadedNode = []
  /** @type {Array<[number, number]>} */
  const idleNode = []
  let loadedSeconds = 0
  let loadedCalls = 0
  for (let segment = 0; segment < SEGMENTS; segment++) {
    const n = Math.ceil(PROBES / SEGMENTS)
    const t0 = now(), r0 = recorded
    await probe(loaded, loadedNode, n)
    loadedSeconds += (now() - t0) / 1e6
    loadedCalls += recorded - r0
    const pausedAt = now()
    await pause()
    await probe(idle, idleNode, n)
    start += now() - pausedAt
    paused = false
    resume()
    // Back to steady load before the next loaded segment is counted.
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  running = false
  resume()
  await Promise.all(workers)
  rpc.notify('session/turn', { sessionId: 'bench', turn: 1, phase: 'end', reason: 'completed' })
  await stop()
  return {
    ...summary(loaded), tail: tail(loaded, loadedNode),
    idle: { ...summary(idle), tail: tail(idle, idleNode) },
    probe: probeMethod, recordedPerSec: loadedCalls / loadedSeconds,
  }
}

const modes = { floor, bridge, startup, cancel }
const run = modes[/** @type {keyof typeof modes} */ (mode)]
if (run === undefined) throw new Error(`unknown mode ${mode}`)
process.stdout.write(JSON.stringify(await run()) + '\n')
