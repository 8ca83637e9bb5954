"""A replay that diverged from its recording is named (issue 29 item 5), through real headless DSH rc.8.

``memo-pair`` is written here the way a memory vault is: ``memo_save`` writes a store under
``$DSH_HOME`` and ``memo_list`` reads it; with ``section`` it shows the memo count in a system
prompt section (the headless composition offers the ``systemPrompt`` service); with ``took`` its
list carries a duration that differs on every call. Recorded selecting only ``memo_save``, the
store deleted, replayed: the replayed save writes nothing, so what runs live sees another world.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dshrun import DSH_HOME
from third_party import plugin_row

from dsh_sidecar.bridge.api.run import Row, ToolCassette, run
from dsh_sidecar.bridge.api.warm_pool import WarmPool

pytestmark = pytest.mark.e2e

MEMO_PAIR = """
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { dshHomePath } from '@deepseek-ai/dsh-home-paths'
import { defineTool } from '@deepseek-ai/dsh-tools'
export const name = 'memo-pair'
export const inject = ['tools']
export function apply(ctx, config) {
  const dir = () => dshHomePath(config.store)
  const read = () => { try { return JSON.parse(readFileSync(join(dir(), 'memos.json'), 'utf8')) } catch { return [] } }
  const text = { type: 'string', required: true }
  ctx.tools.register(defineTool({
    name: 'memo_save', description: 'Save a memo.', parameters: { text },
    output: { schema: { type: 'object', additionalProperties: false,
      properties: { saved: { type: 'number', required: true } } },
      render: (_args, v) => [{ type: 'text', text: `saved ${v.saved}` }] },
    async execute(args) {
      const memos = [...read(), args.text]
      mkdirSync(dir(), { recursive: true })
      writeFileSync(join(dir(), 'memos.json'), JSON.stringify(memos))
      return { saved: memos.length }
    },
  }))
  const listed = { memos: { type: 'string', required: true }, count: { type: 'number', required: true } }
  if (config.took) listed.took = { type: 'number', required: true }
  ctx.tools.register(defineTool({
    name: 'memo_list', description: 'List the memos.', parameters: { filter: { type: 'string' } },
    output: { schema: { type: 'object', additionalProperties: false, properties: listed },
      render: (_args, v) => [{ type: 'text', text: v.memos }] },
    async execute() {
      const t0 = performance.now()
      const memos = read()
      const took = config.took ? { took: performance.now() - t0 + Math.random() } : {}
      return { memos: memos.join('\\n'), count: memos.length, ...took }
    },
  }))
  if (config.section) {
    ctx.inject(['systemPrompt'], (sctx) => {
      sctx.systemPrompt.section({ name: 'memo-count', order: 150, text: () => `Memos saved so far: ${read().length}.` })
    })
  }
}
"""

SAVE_THEN_LIST = {"type": "dsh-mock-script", "version": 1, "steps": [
    {"tool": "memo_save", "args": {"text": "buy milk"}}, {"tool": "memo_list", "args": {}}]}
LIST_THEN_SAVE = {"type": "dsh-mock-script", "version": 1, "steps": [
    {"tool": "memo_list", "args": {}}, {"tool": "memo_save", "args": {"text": "buy milk"}}]}
WARNING = "dsh-sidecar: warning: REPLAY_DIVERGED: "


def _row(tmp_path: Path, store: str, **config: Any) -> Row:
    return plugin_row(tmp_path / "plugins", "memo-pair", MEMO_PAIR, {"store": store, **config})


def _diverged(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "REPLAY_DIVERGED" in line]


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_replay_whose_unserved_state_is_gone_is_named_once_and_fails_only_when_strict(
    warm: bool, pool: WarmPool, store: str, tmp_path: Path,
) -> None:
    row = _row(tmp_path, store, section=True)
    cassette = ToolCassette(file="memo.tools.ndjson", include=["memo_save"])
    common: dict[str, Any] = {"cwd": tmp_path, "rows": [row], "warm": pool if warm else False,
                              "tool_cassette": cassette}
    recorded = run(script=SAVE_THEN_LIST, record_mode="once", **common)
    assert recorded.ok, recorded.explain()
    assert recorded.result("memo_list").output == "buy milk"
    assert _diverged(recorded.stderr) == []
    (DSH_HOME / store / "memos.json").unlink()  # the memo the replayed memo_save will not write

    replayed = run(script=SAVE_THEN_LIST, **common)
    assert replayed.ok, replayed.explain()  # a warning: exit 0
    assert replayed.result("memo_list").output == ""  # the live list saw no memo
    lines = _diverged(replayed.stderr)
    print(*lines, sep="\n")
    assert lines == [
        f"{WARNING}model step 2 of turn 1 saw another system prompt than when recorded; it may show what the "
        "replayed memo_save at root/0 did not do: select both, or neither; fix: select memo_save and what depends "
        "on it in toolCassette.include, or neither; a field that differs on every run is declared in "
        "toolCassette.volatile (docs/test-logic.md)"
    ]
    assert replayed.errors == []

    strict = run(script=SAVE_THEN_LIST, strict_replay=True, **common)
    print(strict.stderr)
    assert strict.exit_code == 1
    assert [(e.code, e.message) for e in strict.errors] == [(
        "REPLAY_DIVERGED", "model step 2 of turn 1 saw another system prompt than when recorded; it may show what "
        "the replayed memo_save at root/0 did not do: select both, or neither")]
    assert not any(line.startswith(WARNING) for line in strict.stderr.splitlines())


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_an_unselected_result_that_differs_is_named_unless_the_field_is_declared_volatile(
    warm: bool, pool: WarmPool, store: str, tmp_path: Path,
) -> None:
    row = _row(tmp_path, store, took=True)
    # The folder stays: a warm host links the shared home's entries into its own (issue 29 item 4).
    memos = DSH_HOME / store / "memos.json"
    common: dict[str, Any] = {"cwd": tmp_path, "rows": [row], "warm": pool if warm else False}
    outcomes = {}
    for volatile in (False, True):
        name = f"memo-{volatile}.tools.ndjson"
        cassette = ToolCassette(file=name, include=["memo_save"],
                                volatile={"memo_list": ["/took"]} if volatile else {})
        memos.unlink(missing_ok=True)
        recorded = run(script=LIST_THEN_SAVE, record_mode="once", tool_cassette=cassette, **common)
        assert recorded.ok, recorded.explain()
        memos.unlink()  # the same world as when recorded: no memo yet
        replayed = run(script=LIST_THEN_SAVE, tool_cassette=cassette, **common)
        assert replayed.ok, replayed.explain()
        outcomes[volatile] = _diverged(replayed.stderr)
    print(*outcomes[False], sep="\n")
    assert [line.split("; fix: ")[0] for line in outcomes[False]] == [
        f"{WARNING}unselected memo_list at root/0 returned another result than when recorded; no selected call "
        "was served before it: what it reads changed since the recording"]
    assert outcomes[True] == []  # only /took differed, and it is declared volatile
