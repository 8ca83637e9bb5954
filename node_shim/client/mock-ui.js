// @ts-check
/**
 * dsh-sidecar mock UI: the browser part `dsh web` loads for this package (docs/web-ui.md).
 *
 * The rc.8 web client loads a plugin's client part as a classic script that registers a factory
 * with `window.__ModuleLoader__.load({id, factory})` (dsh-client-modules); an ES module cannot
 * load there, so this file is written in that form by hand. It needs no build step: React comes
 * from the host (`require('react')`) and elements are built with `createElement`.
 *
 * State: the durable `mock/status` session events the sidecar appends, which the host streams
 * live to the browser. Python decides every field (phase, step, card, location, codes); this
 * file only renders them:
 *  - the `dsh-sidecar.mock` view target keeps the session's latest status; the compact row in
 *    the `conversation.input.dock` slot (above the composer) shows it while the agent runs;
 *  - statuses that ask for a card become chat nodes rendered in `conversation.chat.node`.
 */
window.__ModuleLoader__.load({
  id: 'dsh-sidecar-shim',
  factory: (/** @type {(spec: string) => any} */ require) => {
    const { createElement: h } = require('react')

    /** @typedef {'queued' | 'running' | 'completed' | 'failed' | 'cancelled'} Phase */
    /**
     * The `mock/status` record (python_core/mock/plan.py `MockStatus`; only the fields used here).
     * @typedef {{
     *   session_id: string, turn_id: string, mode: 'run' | 'replay' | null, phase?: Phase,
     *   step?: number, step_count: number, card?: 'invalid-script' | 'tool-stop' | null,
     *   location?: string | null, error_code: string | null, error_message: string | null,
     *   failed_tool: string | null, failed_step: number | null, steps_stopped: number,
     *   runtime_code?: string | null, source_name: string | null,
     * }} MockStatus
     */
    /** @typedef {{seq: number, status: MockStatus}} Seen */

    const NS = 'dsh-sidecar.mock'
    const EVENT = 'mock/status'
    const TARGET = 'dsh-sidecar.mock'
    const CARD = 'dsh-sidecar.mock-card'
    const PLUGIN = 'dsh-sidecar-shim'

    /** Dictionaries for the host's locale service ({name} placeholders). */
    const en = {
      'row.run': 'Mock run',
      'row.replay': 'Mock replay',
      'row.mock': 'Mock',
      'phase.queued': 'starting',
      'phase.running': 'running',
      'phase.completed': 'completed',
      'phase.failed': 'stopped',
      'phase.cancelled': 'cancelled',
      'row.aria': 'Mock turn status',
      'invalid.title': 'Mock script invalid',
      'invalid.noTool': 'No tool ran.',
      'stop.title': 'Mock {mode} stopped',
      'stop.tool': 'Step {step} of {total}: {tool} failed with runtime code {code}.',
      'stop.later': 'Later steps stopped: {count}. The tool card above is the real result.',
    }
    /** @type {typeof en} */
    const zh = {
      'row.run': 'Mock 运行',
      'row.replay': 'Mock 回放',
      'row.mock': 'Mock',
      'phase.queued': '启动中',
      'phase.running': '运行中',
      'phase.completed': '已完成',
      'phase.failed': '已停止',
      'phase.cancelled': '已取消',
      'row.aria': 'Mock 回合状态',
      'invalid.title': 'Mock 脚本无效',
      'invalid.noTool': '没有运行任何工具。',
      'stop.title': 'Mock {mode} 已停止',
      'stop.tool': '第 {step} 步（共 {total} 步）：{tool} 失败，运行时代码 {code}。',
      'stop.later': '已停止后续步骤：{count}。上方的工具卡片是真实结果。',
    }

    const css = [
      '.dshsc-dock{box-sizing:border-box;width:calc(100% - var(--dsh-composer-side-clearance) - var(--dsh-composer-side-clearance) - 4 * var(--dsh-composer-dock-inset));margin:0 auto}',
      '.dshsc-row{box-sizing:border-box;width:100%;max-width:calc(var(--dsh-composer-card-max-width) - 4 * var(--dsh-composer-dock-inset));margin:0 auto;display:flex;align-items:center;gap:8px;height:30px;padding:4px 12px;border:1px solid var(--dsw-alias-border-l1);border-radius:12px;background:var(--dsw-specific-tip);font-size:13px;line-height:20px;color:var(--dsw-alias-label-primary)}',
      '.dshsc-spin{flex:none;width:12px;height:12px;border-radius:50%;border:2px solid var(--dsw-alias-border-l2);border-top-color:var(--dsw-alias-state-business-primary);animation:dshsc-spin .8s linear infinite}',
      '@keyframes dshsc-spin{to{transform:rotate(360deg)}}',
      '.dshsc-muted{color:var(--dsw-alias-label-tertiary)}',
      '.dshsc-card{margin:4px 0;padding:10px 12px;border:1px solid var(--dsw-alias-border-l1);border-left:3px solid var(--dsw-alias-state-error-primary);border-radius:8px;font-size:13px;line-height:20px;color:var(--dsw-alias-label-primary);user-select:text}',
      '.dshsc-card-title{font-weight:500}',
      '.dshsc-code{font-family:var(--dsw-font-family-mono, monospace);font-size:12px}',
    ].join('')
    if (typeof document !== 'undefined' && document.querySelector(`style[data-plugin-css="${PLUGIN}/mock-ui.css"]`) === null) {
      const tag = document.createElement('style')
      tag.dataset.plugin = PLUGIN
      tag.dataset.pluginCss = `${PLUGIN}/mock-ui.css`
      tag.textContent = css
      document.head.appendChild(tag)
    }

    /** One context per `mock/status` event: the latest one wins in the dock target. @param {any} event */
    const asSeen = (event) => /** @type {Seen} */ ({ seq: event.seq, status: event.data })

    /** Every `mock/status` event, for the dock's view target. */
    const statusDefinition = {
      kind: 'dsh-sidecar.mock-status',
      target: TARGET,
      match: (/** @type {any} */ event) => (event.type === EVENT ? { id: String(event.seq), role: 'start' } : null),
      start: (/** @type {any} */ _context, /** @type {any} */ match) => asSeen(match.event),
      update: (/** @type {any} */ context) => context.state,
      buildViewNode: (/** @type {any} */ context) => (context.state === undefined ? null
        : { key: context.key, kind: 'dsh-sidecar.mock-status', id: context.id, target: TARGET, data: context.state }),
    }

    /** The session's latest status (greatest event seq), reference-stable while unchanged. */
    const statusView = {
      target: TARGET,
      create() {
        /** @type {Seen | null} */
        let latest = null
        /** @param {readonly any[]} nodes */
        const newest = (nodes) => {
          for (const node of nodes) if (latest === null || node.data.seq > latest.seq) latest = node.data
          return latest
        }
        return {
          empty: null,
          replace: (/** @type {any} */ { nodes }) => { latest = null; return newest(nodes) },
          apply: (/** @type {any} */ { upserts }) => newest(upserts),
        }
      },
    }

    /** The statuses Python marked with a card, as chat nodes anchored at their event. */
    const cardDefinition = {
      kind: CARD,
      target: 'chat',
      match: (/** @type {any} */ event) => (event.type === EVENT && event.data?.card ? { id: String(event.seq), role: 'start' } : null),
      start: (/** @type {any} */ _context, /** @type {any} */ match) => asSeen(match.event),
      update: (/** @type {any} */ context) => context.state,
      buildViewNode: (/** @type {any} */ context) => (context.state === undefined ? null : {
        key: context.key, kind: CARD, id: context.id, target: 'chat', anchorSeq: context.state.seq,
        location: context.start?.location ?? { kind: 'unresolved' }, visibility: 'visible', data: context.state,
      }),
    }

    /** @param {(key: string, params?: any) => string} t @param {MockStatus} s */
    const modeLabel = (t, s) => t(s.mode === 'replay' ? 'row.replay' : s.mode === 'run' ? 'row.run' : 'row.mock')

    /** The compact row above the composer; present only while the agent runs a mock turn. @param {any} props */
    function MockDock({ session, t }) {
      /** @type {Seen | null | undefined} */
      const seen = session?.views?.get(TARGET)
      // The host's agent status is the fallback for a lost event: an idle agent shows no row.
      if (!seen || !session.running) return null
      const s = seen.status
      const phase = s.phase ?? 'running'
      const active = phase === 'queued' || phase === 'running'
      const progress = s.step_count > 0 && (s.step ?? 0) > 0 ? `${s.step}/${s.step_count}` : null
      const parts = [modeLabel(t, s), progress, t(`phase.${phase}`), phase === 'failed' ? s.error_code : null]
      return h('div', { className: 'dshsc-dock', 'data-mock-dock': '' },
        h('div', {
          className: 'dshsc-row', role: 'status', 'aria-live': 'polite', 'aria-label': t('row.aria'),
          'data-mock-phase': phase, 'data-mock-step': s.step ?? 0, 'data-mock-total': s.step_count,
        },
        active ? h('span', { className: 'dshsc-spin', 'aria-hidden': 'true' }) : null,
        h('span', { 'data-mock-label': '' }, parts.filter(Boolean).join(' · '))))
    }

    /** A card in the transcript: invalid script (nothing ran) or a stop after a real tool failure. @param {any} props */
    function MockCard({ node, t }) {
      const s = /** @type {Seen} */ (node.data).status
      if (s.card === 'invalid-script') {
        return h('div', { className: 'dshsc-card', role: 'alert', 'data-mock-card': 'invalid-script' },
          h('div', { className: 'dshsc-card-title' }, `${t('invalid.title')} · `, h('span', { className: 'dshsc-code' }, s.error_code)),
          s.location ? h('div', { className: 'dshsc-code', 'data-mock-location': '' }, s.location) : null,
          h('div', { 'data-mock-message': '' }, s.error_message),
          h('div', { className: 'dshsc-muted', 'data-mock-no-tool': '' }, t('invalid.noTool')))
      }
      const code = s.runtime_code ?? s.error_code
      return h('div', { className: 'dshsc-card', role: 'alert', 'data-mock-card': 'tool-stop', 'data-mock-tool': s.failed_tool },
        h('div', { className: 'dshsc-card-title' }, `${t('stop.title', { mode: s.mode ?? '' })} · `, h('span', { className: 'dshsc-code' }, s.error_code)),
        h('div', null, t('stop.tool', { step: s.failed_step, total: s.step_count, tool: s.failed_tool, code })),
        h('div', { className: 'dshsc-muted' }, t('stop.later', { count: s.steps_stopped })))
    }

    const inject = ['slots', 'locale', 'conversationEvents', 'conversationViews']

    /** Register the dictionaries, the status definitions and view target, the dock row and the card renderer. @param {any} ctx */
    function apply(ctx) {
      ctx.effect(() => ctx.locale.register(NS, { zh, en }), 'dsh-sidecar: mock dictionaries')
      ctx.conversationViews.register(statusView)
      ctx.conversationEvents.register(statusDefinition)
      ctx.conversationEvents.register(cardDefinition)
      ctx.slots.inject('conversation.input.dock', () => ctx.slots.register({
        name: 'conversation.input.dock', id: 'dsh-sidecar-mock', order: 20, locale: NS,
      }, MockDock))
      ctx.slots.inject('conversation.chat.node', () => ctx.slots.register({
        name: 'conversation.chat.node', key: CARD, locale: NS,
      }, MockCard))
    }

    const exports = { apply, inject, en, zh }
    Object.defineProperty(exports, Symbol.toStringTag, { value: 'Module' })
    return exports
  },
})
