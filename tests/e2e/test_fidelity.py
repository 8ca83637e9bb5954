"""A replay shows the model what it saw when recorded, byte for byte (issue 29, item 1).

A tool plugin written here renders its value as ``JSON.stringify(value)`` (as rc.8's
``create_goal`` does): keys out of alphabetical order, nested objects, non-ASCII text, numbers
written ``1.50`` and ``1e3``, a presentation meta of the same kind, a deferred context, and a
sibling tool that fails. The model (the loopback DeepSeek-compatible provider) calls both, then
answers; the turn is recorded with a tool cassette and a model cassette, then replayed with the
plugin present (its renderer re-renders the served value) and absent (stood up from the
cassette), warm and cold. Before tool cassette version 4 the value came back with its keys
sorted: the next model request differed and the replay failed ``MODEL_CASSETTE_MISMATCH``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deepseek_server import dead_url, deepseek_server
from dshrun import stable

from dsh_sidecar.bridge.api.run import ModelCassette, Row, RunResult, ToolCassette, WarmPool, run
from dsh_sidecar.python_core.mock.source import decode_source

PLUGIN = r"""
export const name = 'fidelity-json'
export const inject = ['tools']
// Written as a user would: 1.50 and 1e3 are what JavaScript prints as 1.5 and 1000.
const GOAL = { zeta: 'last', alpha: { nested: { b: 2, a: 1 }, list: [{ y: 1, x: 2 }] }, price: 1.50, big: 1e3,
               text: 'héllo ☀ 💥 "quoted"', neg: -0.25, '10': 'numeric key', '2': 'first' }
export function apply(ctx) {
  ctx.tools.register({
    name: 'json_goal',
    description: 'Create a goal; the result is its JSON.',
    parameters: { type: 'object', properties: { title: { type: 'string' } }, required: ['title'],
                  additionalProperties: false },
    output: {
      schema: { type: 'object' },
      render: (_args, value) => [{ type: 'text', text: JSON.stringify(value) }],
      presentationMeta: (_args, value) => ({ z: value.goal.zeta, a: value.goal.alpha }),
    },
    async execute(args, exec) {
      exec.deferContext({ role: 'user', content: [{ type: 'text', text: `goal ${args.title} ☀` }],
                          source: { kind: 'plugin', plugin: name } })
      return { goal: { ...GOAL, title: args.title }, activation: 'armed' }
    },
  })
  ctx.tools.register({
    name: 'json_refuse',
    description: 'Always refuses.',
    parameters: { type: 'object', properties: {}, additionalProperties: false },
    output: { schema: { type: 'object' }, render: (_args, value) => [{ type: 'text', text: JSON.stringify(value) }] },
    async execute() { throw new Error('goal "x" refused ☀') },
  })
}
"""
TASK = "Create the goal Ship it."
SCRIPT: dict[str, Any] = {
    "title": "Goal",
    "conversations": [{"match": "Create the goal", "replies": [
        {"tool_calls": [{"name": "json_goal", "arguments": {"title": "Ship it"}},
                        {"name": "json_refuse", "arguments": {}}]},
        {"text": "The goal is armed."},
    ]}],
}
TOOLS = ToolCassette(file="tools.ndjson", include=["json_goal", "json_refuse"])
MODEL = ModelCassette(file="model.ndjson")


def _rows(tmp_path: Path) -> list[Row]:
    plugin = tmp_path / "plugin" / "fidelity-json.mjs"
    plugin.parent.mkdir(exist_ok=True)
    plugin.write_text(PLUGIN)
    return [Row("fidelity-json", str(plugin), {}, insert=True)]


def _log_bytes(result: RunResult) -> list[bytes]:
    """The session log's events as written (key order kept), ids and times removed, title apart."""
    assert result.session_path is not None
    _, text = decode_source(Path(result.session_path).read_bytes(), source="session log")
    events = (json.loads(line) for line in text.splitlines())  # dicts keep the written key order
    return [json.dumps(stable(e), ensure_ascii=False, separators=(",", ":")).encode()
            for e in events if e.get("type") != "session/title"]


def _tool_results(log: list[bytes]) -> list[bytes]:
    return [line for line in log if line.startswith(b'{"type":"tool/result"')]


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_json_rendered_value_replays_byte_for_byte_with_the_plugin_present_and_absent(
    tmp_path: Path, request: pytest.FixtureRequest, warm: bool,
) -> None:
    how: bool | WarmPool = request.getfixturevalue("pool") if warm else False
    rows = _rows(tmp_path)
    with deepseek_server(tmp_path, SCRIPT) as provider:
        record = run(TASK, cwd=tmp_path, rows=rows, model_cassette=MODEL, tool_cassette=TOOLS, record_mode="once",
                     env=provider.env("sk-test"), warm=how)
    assert record.ok, record.explain()
    assert record.model_cassette is not None and record.model_cassette.recorded == 3
    goal = record.result("json_goal").output
    assert goal.startswith('{"goal":{"2":"first","10":"numeric key","zeta":"last","alpha":{"nested":{"b":2,"a":1}')
    assert '"price":1.5,"big":1000,"text":"héllo ☀ 💥 \\"quoted\\""' in goal and goal.endswith(',"activation":"armed"}')
    recorded = _log_bytes(record)
    assert len(_tool_results(recorded)) == 2

    for present in (True, False):
        replay = run(TASK, cwd=tmp_path, rows=rows if present else [], model_cassette=MODEL, tool_cassette=TOOLS,
                     record_mode="none", env={"DEEPSEEK_BASE_URL": dead_url()}, warm=how)
        assert replay.ok, replay.explain()
        assert "MODEL_CASSETTE_MISMATCH" not in replay.stderr
        assert replay.model_cassette is not None and replay.tool_cassette is not None
        assert (replay.model_cassette.consumed, replay.model_cassette.unconsumed) == (3, 0)
        assert (replay.tool_cassette.consumed, replay.tool_cassette.unconsumed) == (2, 0)
        assert replay.tool_cassette.stood_up == ([] if present else ["json_goal", "json_refuse"])
        assert replay.result("json_goal").output == goal
        replayed = _log_bytes(replay)
        # What the model saw and the host wrote: the tool results (value rendering, meta, the
        # failure) byte for byte; then the whole log (the deferred context, and with the plugin
        # absent the stand-ins' tool definitions in every request header).
        assert _tool_results(replayed) == _tool_results(recorded), present
        assert replayed == recorded, present
