// @ts-check
/**
 * Stand-ins: a replay's recorded tool contracts registered where no plugin registered the tool
 * (docs/tool-cassette-format.md, "Replay with the provider gone"), and the registry report.
 * Python chooses which contracts to send and what to make of the report.
 */
import { HarnessError } from '@deepseek-ai/dsh-llm'
import { messageOf } from './rpc.js'

/**
 * @typedef {import('./rpc.js').Rpc} Rpc
 * @typedef {import('./types').Context} Context
 * @typedef {import('./types').ToolCall} ToolCall
 * @typedef {import('./types').StandIn} StandIn
 * @typedef {import('./types').ToolContract} ToolContract
 * @typedef {import('@deepseek-ai/dsh-tools').ToolDefinition} ToolDefinition
 * @typedef {import('@deepseek-ai/dsh-tools').ToolExecutionResult} ToolExecutionResult
 * @typedef {(agentCtx: Context, sessionId: string, standIns: StandIn[]) => () => void} StandUp
 */

/** A stand-in's body: never reached while the cassette serves or refuses every call. */
class StandInCalled extends HarnessError {}

/**
 * A registered tool's contract as JSON: what a replay needs to stand it up again.
 * @param {ToolDefinition | undefined} tool @returns {ToolContract | null}
 */
export function contractOf(tool) {
  if (tool === undefined) return null
  return {
    description: tool.description ?? '',
    parameters: tool.parameters,
    output: tool.output.schema,
    ...(tool.output.presentationMeta !== undefined ? { presentationMeta: true } : {}),
    ...(tool.timeoutMs !== undefined ? { timeoutMs: tool.timeoutMs } : {}),
  }
}

/**
 * Once, when the first agent is created (every plugin has activated by then: headless awaits
 * the loader first; no model request has been built yet): register a replay's recorded tool
 * contracts where no plugin registered the tool (its MCP server down, its row absent), and
 * report the registered tools (`registry`: their names, or names and contracts) and the
 * stand-ins. A stand-in renders what the real renderer produced for the served value (sent
 * with it); its body never runs, since the cassette serves or refuses every call of a selected tool.
 * A warm host (`warm`) reports the registry once the loader has activated every plugin, before
 * its first session, and stands nothing up process-wide: each session's stand-ins are registered
 * on that session's agent only (`standUp`).
 * @param {Context} ctx @param {Rpc} rpc @param {StandIn[]} standIns
 * @param {'none' | 'names' | 'contracts'} registry @param {boolean} [warm]
 */
export function installRegistry(ctx, rpc, standIns, registry, warm = false) {
  /** the recorded rendering of each served call, by its frozen arguments @type {WeakMap<object, Readonly<ToolExecutionResult>>} */
  const byArgs = new WeakMap()
  /** @type {Map<unknown, Readonly<ToolExecutionResult>>} */
  const byValue = new Map()
  /** @type {Set<string>} */
  const stood = new Set()
  /** a warm host's stand-ins, by the session whose agent alone registered them @type {Map<string, Set<string>>} */
  const scoped = new Map()
  /** @param {unknown} args */
  const rendered = (args) => (typeof args === 'object' && args !== null ? byArgs.get(args) : byValue.get(args))
  if (warm) {
    ctx.get('loader')?.await().then(() => {
      const tools = ctx.tools.schemas().map((schema) => ({ name: schema.name, contract: contractOf(ctx.tools.get(schema.name)) }))
      rpc.notify('tools/registry', { tools, standIns: [], failed: [] })
    })
  } else if (standIns.length > 0 || registry !== 'none') {
    let done = false
    ctx.on('agent/created', ({ agent }) => {
      if (done) {
        // A subagent's scope does not see what its parent's registered: each agent gets the shadows.
        for (const contract of standIns) {
          if (!contract.shadow) continue
          try {
            agent.ctx.tools.register(standIn(contract, rendered))
          } catch {
            // Not stood in, the plugin's tool rejects the served content: the replay fails closed.
          }
        }
        return
      }
      done = true
      const names = ctx.tools.schemas().map((schema) => schema.name)
      const tools = names.map((name) => (registry === 'contracts' ? { name, contract: contractOf(ctx.tools.get(name)) } : { name }))
      /** @type {{ tool: string, message: string }[]} */
      const failed = []
      for (const contract of standIns) {
        // A shadow goes on the run's agent, whose scope shadows a registered tool in its place
        // in the tool list (a subagent gets its own, above); any other only where none is.
        if (!contract.shadow && ctx.tools.get(contract.name) !== undefined) continue
        try {
          (contract.shadow ? agent.ctx : ctx).tools.register(standIn(contract, rendered))
          stood.add(contract.name)
        } catch (error) {
          failed.push({ tool: contract.name, message: messageOf(error) })
        }
      }
      rpc.notify('tools/registry', { tools, standIns: [...stood], failed })
    })
  }
  return {
    /** @param {ToolCall} exec @param {Readonly<ToolExecutionResult>} result */
    served(exec, result) {
      const mine = stood.has(exec.name) || (exec.agent !== undefined && scoped.get(String(exec.agent.id))?.has(exec.name))
      if (!mine || result.isError) return
      const args = exec.arguments
      if (typeof args === 'object' && args !== null) byArgs.set(args, result)
      else byValue.set(args, result)
    },
    /**
     * A warm session's stand-ins, registered through its agent's own context while the agent is
     * set up (before it is published or any prompt is assembled): rc.8 keeps them in that agent's
     * scope, so no other session sees them, and unregisters them when the agent is disposed. A
     * registration the registry refuses fails the session's creation, naming the tool.
     * @param {Context} agentCtx @param {string} sessionId @param {StandIn[]} standIns
     * @returns {() => void} forgets the session's stand-ins (once its agent is disposed)
     */
    standUp(agentCtx, sessionId, standIns) {
      /** @type {Set<string>} */
      const names = new Set()
      scoped.set(sessionId, names)
      for (const contract of standIns) {
        try {
          agentCtx.tools.register(standIn(contract, rendered))
        } catch (error) {
          throw new Error(`CASSETTE_STANDIN: tool ${contract.name} could not be stood up for this session (${messageOf(error)})`)
        }
        names.add(contract.name)
      }
      return () => { scoped.delete(sessionId) }
    },
  }
}

/**
 * @param {StandIn} contract
 * @param {(args: unknown) => Readonly<ToolExecutionResult> | undefined} rendered
 * @returns {ToolDefinition}
 */
function standIn(contract, rendered) {
  const name = contract.name
  /** @param {unknown} args */
  const recorded = (args) => {
    const result = rendered(args)
    if (result === undefined) throw new Error(`CASSETTE_STANDIN: tool ${name} is stood up from the cassette and has no recorded rendering for this value`)
    return result
  }
  return {
    name,
    description: contract.description,
    parameters: contract.parameters,
    ...(contract.timeoutMs !== undefined ? { timeoutMs: contract.timeoutMs } : {}),
    output: {
      schema: contract.output,
      render: (args) => [...recorded(args).content],
      ...(contract.presentationMeta ? { presentationMeta: (/** @type {unknown} */ args) => recorded(args).meta ?? null } : {}),
    },
    async execute() {
      throw new StandInCalled(`CASSETTE_STANDIN: tool ${name} is stood up from the cassette: only its recorded calls are served`, 'CASSETTE_STANDIN')
    },
  }
}
