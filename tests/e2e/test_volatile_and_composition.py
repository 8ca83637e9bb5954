"""Volatile result fields and the remembered composition, through real headless DSH rc.8, warm and cold
(issue 29 items 7 and 8).

The plugins are small ones written here the way third-party plugins are: a terminal-like
``exec_command`` whose output schema has a ``wall_time_seconds`` number that differs on every call,
and ``dsh-mask-plugin`` 1.2.0, whose ``agent/pre-step`` hook masks ``secret-…`` in the task text
before the mock model parses it, so the recorded arguments are the masked ones.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dshrun import ROOT, user_project, user_pytest
from third_party import plugin_row, write_plugin

from dsh_sidecar.bridge.api.run import Row, ToolCassette, run
from dsh_sidecar.bridge.api.warm_pool import WarmPool

pytestmark = pytest.mark.e2e

EXEC_TOOLS = """
import { defineTool } from '@deepseek-ai/dsh-tools'
export const name = 'volatile-tools'
export const inject = ['tools']
export function apply(ctx) {
  ctx.tools.register(defineTool({
    name: 'exec_command',
    description: 'Run a command and say how long it took.',
    parameters: { cmd: { type: 'string', required: true } },
    output: {
      schema: { type: 'object', additionalProperties: false, properties: {
        output: { type: 'string', required: true }, wall_time_seconds: { type: 'number', required: true } } },
      render: (_args, v) => [{ type: 'text', text: v.output }],
    },
    async execute(args) {
      const start = process.hrtime.bigint()
      const output = `ran: ${args.cmd}\\n`
      return { output, wall_time_seconds: Number(process.hrtime.bigint() - start) / 1e9 + Math.random() + 0.001 }
    },
  }))
}
"""

MASK = """
export const name = 'dsh-mask-plugin'
const mask = (text) => text.replace(/secret-[0-9]+/g, '[masked]')
export function apply(ctx) {
  ctx.on('agent/pre-step', async (_payload, next) => {
    const decision = await next()
    if (decision.kind !== 'enter') return decision
    const messages = decision.messages.map((m) => (m.role !== 'user' ? m : {
      ...m, content: (m.content ?? []).map((b) => (b.type === 'text' ? { ...b, text: mask(b.text) } : b)) }))
    return { ...decision, messages }
  })
}
"""

EXEC = '/mock run exec_command({"cmd": "echo hi"})'
ECHO = '/mock run echo({"text": "token secret-123"})'
TOOLS = Row("example-tools", "dsh-example-tools")
NORMALIZE = {"pointer": "/wall_time_seconds", "in": "result", "normalize": 0}
CLI = ROOT / ".venv" / "bin" / "dsh-tool-cassette"


@pytest.fixture(scope="module")
def pool() -> Iterator[WarmPool]:
    warm = WarmPool()
    yield warm
    warm.close()


def _mask_row(folder: Path) -> Row:
    """``dsh-mask-plugin`` 1.2.0: a package folder (its ``package.json`` names it) entered as a ``file:`` row."""
    file = write_plugin(folder, "index", MASK)
    (folder / "package.json").write_text(json.dumps({"name": "dsh-mask-plugin", "version": "1.2.0", "type": "module"}))
    return Row("mask", file.as_uri(), {}, insert=True)


def _header(cassette: Path) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(cassette.read_text().splitlines()[0])
    return header


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_normalized_volatile_field_keeps_recordings_diff_equal_and_replays_valid(
    warm: bool, pool: WarmPool, tmp_path: Path,
) -> None:
    row = plugin_row(tmp_path / "plugins", "volatile-tools", EXEC_TOOLS)
    mode: Any = pool if warm else False
    live = []
    for name in ("a", "b"):
        cassette = ToolCassette(file=f"{name}.tools.ndjson", include=["exec_command"], filters=[NORMALIZE])
        recorded = run(EXEC, cwd=tmp_path, rows=[row], warm=mode, record_mode="once", tool_cassette=cassette)
        assert recorded.ok, recorded.explain()
        live.append(recorded.result("exec_command").value["wall_time_seconds"])
    assert live[0] != live[1] and 0 not in live  # the live runs saw the real durations
    diff = subprocess.run([str(CLI), "diff", "a.tools.ndjson", "b.tools.ndjson"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    print(diff.stdout)
    assert diff.returncode == 0 and diff.stdout.startswith("equivalent"), diff.stdout + diff.stderr
    [result] = [json.loads(line) for line in (tmp_path / "a.tools.ndjson").read_text().splitlines()
                if '"call/result"' in line]
    assert result["value"] == {"output": "ran: echo hi\n", "wall_time_seconds": 0}
    assert result["content"] == [{"type": "text", "text": "ran: echo hi\n"}]  # the rendering is kept
    cassette = ToolCassette(file="a.tools.ndjson", include=["exec_command"], filters=[NORMALIZE])
    for rows in ([row], []):  # the plugin registered, then gone (a stand-in from the recording)
        replayed = run(EXEC, cwd=tmp_path, rows=rows, warm=mode, tool_cassette=cassette, allow_live_tools=False)
        assert replayed.ok, replayed.explain()
        served = replayed.result("exec_command")
        assert served.value == {"output": "ran: echo hi\n", "wall_time_seconds": 0}
        assert served.output == "ran: echo hi\n"  # the command's output, not the value's JSON


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_redacting_filter_on_a_number_field_is_refused_when_recording_by_name(
    warm: bool, pool: WarmPool, tmp_path: Path,
) -> None:
    row = plugin_row(tmp_path / "plugins", "volatile-tools", EXEC_TOOLS)
    cassette = ToolCassette(file="c.tools.ndjson", include=["exec_command"],
                            filters=[{"pointer": "/wall_time_seconds", "in": "result"}])
    recorded = run(EXEC, cwd=tmp_path, rows=[row], warm=pool if warm else False, record_mode="once",
                   tool_cassette=cassette)
    lines = [line for line in recorded.stderr.splitlines() if "FILTER_BREAKS_SCHEMA" in line or "normalize" in line]
    print("\n".join(lines))
    assert not recorded.ok and "FILTER_BREAKS_SCHEMA" in [e.code for e in recorded.errors]
    assert ("dsh-sidecar: FILTER_BREAKS_SCHEMA: toolCassette.filters[0]: /wall_time_seconds of tool exec_command at "
            "root/0, ordinal 0 would become a string where its output schema wants a number") in recorded.stderr
    assert 'dsh-sidecar: fix: to keep a volatile value valid, give toolCassette.filters[0] "normalize": 0' \
        in recorded.stderr
    assert not (tmp_path / "c.tools.ndjson").exists()  # nothing published
    assert str(tmp_path) not in "\n".join(lines)


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_replay_without_the_recordings_pre_step_plugin_names_it_as_absent(
    warm: bool, pool: WarmPool, tmp_path: Path,
) -> None:
    mask = _mask_row(tmp_path / "dsh-mask-plugin")
    mode: Any = pool if warm else False
    cassette = ToolCassette(file="echo.tools.ndjson", include=["echo"])
    recorded = run(ECHO, cwd=tmp_path, rows=[TOOLS, mask], warm=mode, record_mode="once", tool_cassette=cassette)
    assert recorded.ok, recorded.explain()
    assert recorded.result("echo").value == {"text": "token [masked]"}  # the hook shaped the recorded call
    plugins = _header(tmp_path / "echo.tools.ndjson")["plugins"]
    assert plugins["dsh-mask-plugin"] == "1.2.0" and "dsh-sidecar-shim" in plugins
    assert not any("/" in name and not name.startswith("@") for name in plugins)  # no directories
    same = run(ECHO, cwd=tmp_path, rows=[TOOLS, mask], warm=mode, tool_cassette=cassette, allow_live_tools=False)
    assert same.ok, same.explain()  # the same composition replays (warm or cold alike)
    gone = run(ECHO, cwd=tmp_path, rows=[TOOLS], warm=mode, tool_cassette=cassette, allow_live_tools=False)
    printed = [line for line in gone.stderr.splitlines() if "CASSETTE_" in line or "fix:" in line]
    print("\n".join(printed))
    assert [e.code for e in gone.errors][:1] == ["CASSETTE_MISMATCH"] and "changed /text" in gone.errors[0].message
    assert ("dsh-sidecar: fix: the composition changed since the recording: dsh-mask-plugin 1.2.0 is absent; a "
            "plugin's hooks may have shaped the recorded calls: replay with the plugins it was recorded with, or if "
            "the new calls are intended, re-record: delete echo.tools.ndjson") in gone.stderr
    explained = gone.explain("pytest test_x.py --dsh-record-mode all")
    assert "fix: the composition changed since the recording: dsh-mask-plugin 1.2.0 is absent" in explained
    assert "to re-record: pytest test_x.py --dsh-record-mode all" in explained


def test_warm_and_cold_recordings_keep_the_same_composition(pool: WarmPool, tmp_path: Path) -> None:
    mask = _mask_row(tmp_path / "dsh-mask-plugin")
    headers = []
    for name, mode in (("warm", pool), ("cold", False)):
        cassette = ToolCassette(file=f"{name}.tools.ndjson", include=["echo"])
        recorded = run(ECHO, cwd=tmp_path, rows=[TOOLS, mask], warm=mode, record_mode="once", tool_cassette=cassette)
        assert recorded.ok, recorded.explain()
        headers.append(_header(tmp_path / f"{name}.tools.ndjson")["plugins"])
    assert headers[0] == headers[1]


def test_the_warm_pytest_plugin_names_the_absent_pre_step_plugin_and_normalizes_from_dsh_config(
    tmp_path: Path,
) -> None:
    mask = _mask_row(tmp_path / "dsh-mask-plugin")
    exec_row = plugin_row(tmp_path / "plugins", "volatile-tools", EXEC_TOOLS)
    inserted = [{"id": r.id, "name": r.name, "config": {}} for r in (mask, exec_row)]
    project = user_project(tmp_path, (
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def dsh_config():\n"
        f"    return {{'filters': [{NORMALIZE!r}]}}\n\n"
        "def test_echo(dsh):\n"
        f"    assert dsh.run({ECHO!r}, tools=['echo']).result('echo').value == {{'text': 'token [masked]'}}\n\n"
        "def test_exec(dsh):\n"
        f"    assert dsh.run({EXEC!r}, tools=['exec_command']).result('exec_command').output == 'ran: echo hi\\n'\n"
    ))
    patch = project / "tools.patch.yml"
    patch.write_text(patch.read_text() + f"- {json.dumps({'insert': inserted})}\n")
    recorded = user_pytest(project, "-p", "no:randomly", "--dsh-record-mode", "once")  # warm: the default
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    assert all(c.read_text().count('"wall_time_seconds":0') == 1 for c in (project / "cassettes").rglob("*exec*"))
    # The mask row goes; the exec tool stays, and its normalized recording still replays.
    patch.write_text(patch.read_text().replace(json.dumps(inserted), json.dumps(inserted[1:])))
    replayed = user_pytest(project, "-p", "no:randomly")
    lines = [line for line in replayed.stdout.splitlines() if "composition" in line or "passed" in line]
    print("\n".join(lines))
    assert replayed.returncode == 1 and "1 failed, 1 passed" in replayed.stdout, replayed.stdout[-3000:]
    assert "fix: the composition changed since the recording: dsh-mask-plugin 1.2.0 is absent" in replayed.stdout
