"""Real headless DSH runs for the end-to-end halves of bench_tool_cassette, bench_mock and
bench_subagent: a per-run ``--patch`` layer, session-log timings and the in-process JS mock
adapter plugin (``dsh-bench-jsmock``) used as the no-sidecar baseline.

Timings come from the host's own session log (``time`` fields, epoch ms) so they exclude
process boot; wall seconds are reported next to them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.source import decode_source

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / ".host"
DSH = HOST / "bin" / "dsh"
DSH_HOME = HOST / "dsh-home"
PROFILE = DSH_HOME / "profiles" / "headless"

EXAMPLE_TOOLS_ROW = {"id": "example-tools", "name": "dsh-example-tools", "disabled": False,
                     "config": {}}
JSMOCK_PACKAGE = "dsh-bench-jsmock"
JSMOCK_ROW_ID = "bench-jsmock"


def host_ready() -> str | None:
    """None when the host, the shim and the example tools are installed, else the reason."""
    modules = PROFILE / "node_modules"
    if not DSH.exists():
        return f"{DSH} missing (source scripts/bootstrap)"
    for package in ("dsh-sidecar-shim", "dsh-example-tools"):
        if not (modules / package).is_dir():
            return f"{package} is not installed in the headless profile (source scripts/bootstrap)"
    return None


def sidecar_row(config: dict[str, Any]) -> dict[str, Any]:
    return {"id": "sidecar", "name": "dsh-sidecar-shim", "disabled": False, "config": config}


def read_session(path: Path) -> list[dict[str, Any]]:
    """Decode a DSH session log (``.jsonl`` or concatenated zstd frames)."""
    _, data = decode_source(path.read_bytes(), source=path.name)
    return [json.loads(line) for line in data.splitlines() if line.strip()]


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    cwd: Path
    wall: float
    started: float

    def sessions(self) -> list[list[dict[str, Any]]]:
        """Session logs written by this run (cwd match), oldest first."""
        found = []
        for path in DSH_HOME.glob("sessions/*/session-*/session.jsonl*"):
            try:
                if path.stat().st_mtime < self.started - 1:
                    continue
                events = read_session(path)
            except (OSError, ValueError, SidecarError):
                continue
            if events and events[0].get("cwd") == str(self.cwd):
                found.append((events[0].get("createdAt", 0), events))
        return [events for _, events in sorted(found, key=lambda item: item[0])]

    def check(self, what: str) -> None:
        if self.rc != 0:
            lines = [line.strip() for line in self.stderr.splitlines()]
            named = [line for line in lines
                     if line.startswith(("dsh-sidecar:", "dsh:", "Error:")) or "Error:" in line[:40]]
            reason = " | ".join(dict.fromkeys(named[:3] or lines[-3:]))
            raise RuntimeError(f"{what}: dsh exited {self.rc}: {reason}")

    def bodies(self) -> list[str]:
        log = self.cwd / "tool-bodies.log"
        return log.read_text().split() if log.exists() else []


def run_dsh(cwd: Path, rows: list[dict[str, Any]], task: str, timeout: float = 600) -> Run:
    """Run ``task`` headless in ``cwd`` with ``rows`` as the ``--patch`` layer."""
    patch = cwd / ".bench.patch.yml"
    patch.write_text("".join(f"- {json.dumps(row)}\n" for row in rows))
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env.update(DSH_HOME=str(DSH_HOME), DSH_TELEMETRY_DISABLED="1")
    env["PATH"] = f"{HOST / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    started = time.time()
    t0 = time.perf_counter()
    proc = subprocess.run([str(DSH), "--profile", "headless", "--patch", str(patch), task],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, cwd, time.perf_counter() - t0, started)


def tool_durations(events: list[dict[str, Any]], name: str | None = None) -> list[int]:
    """Milliseconds from each ``tool/call`` to its ``tool/result`` (optionally one tool only)."""
    calls: dict[str, tuple[int, str]] = {}
    out = []
    for event in events:
        data = event.get("data") or {}
        if event.get("type") == "tool/call":
            calls[data["callId"]] = (event["time"], data["name"])
        elif event.get("type") == "tool/result":
            call_id = ((data.get("message") or {}).get("source") or {}).get("callId")
            if call_id in calls:
                start, tool = calls.pop(call_id)
                if name is None or tool == name:
                    out.append(event["time"] - start)
    return out


def turn_ms(events: list[dict[str, Any]]) -> int:
    """Milliseconds from the first ``turn/start`` to the last ``turn/end``."""
    starts = [e["time"] for e in events if e.get("type") == "turn/start"]
    ends = [e["time"] for e in events if e.get("type") == "turn/end"]
    return ends[-1] - starts[0]


def step_gaps(events: list[dict[str, Any]]) -> list[int]:
    """Milliseconds between consecutive ``step/start`` events (one whole step cycle: model
    call, tool calls, bookkeeping, scripted wait)."""
    starts = [e["time"] for e in events if e.get("type") == "step/start"]
    return [b - a for a, b in itertools.pairwise(starts)]


STEP_PHASES = ("model call", "tool run", "step close", "between steps")


def step_phases(events: list[dict[str, Any]]) -> dict[str, int]:
    """Total milliseconds per step phase, from anchors both the sidecar and the JS mock log:
    ``step/start`` -> first ``tool/call`` (model call), -> last ``tool/result`` (tool run),
    -> ``step/end`` (step close), ``step/end`` -> next ``step/start`` (between steps)."""
    totals = dict.fromkeys(STEP_PHASES, 0)
    start = call = result = end = None
    for event in events:
        kind, at = event.get("type"), event.get("time")
        if kind == "step/start":
            if end is not None:
                totals["between steps"] += at - end
            start, call, result, end = at, None, None, None
        elif kind == "tool/call" and start is not None and call is None:
            call = at
            totals["model call"] += at - start
        elif kind == "tool/result" and call is not None:
            result = at
        elif kind == "step/end" and start is not None:
            end = at
            if result is not None and call is not None:
                totals["tool run"] += result - call
                totals["step close"] += at - result
    return totals


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


# ---- the in-process JS mock adapter ------------------------------------------------------

JSMOCK_INDEX = r"""// Generated by dsh-sidecar's scripts/bench/dshhost.py: the in-process baseline for
// scripts/bench_mock. Route `jsmock` answers one tool call per step from `config.calls`,
// then a final text; auxiliary calls (session title, compaction) get a fixed text.
import z from '@deepseek-ai/schemastery'
import { LlmAdapter, CallId, resolveRetryPolicy } from '@deepseek-ai/dsh-llm'

export const name = 'dsh-bench-jsmock'
export const inject = ['llm']
export const Config = z.object({ calls: z.array(z.any()).default([]) })

const PREFIX = 'jsmock-'

async function* text(t) {
  yield { type: 'block-start', index: 0, blockType: 'text' }
  yield { type: 'text-delta', index: 0, text: t }
  yield { type: 'block-end', index: 0, block: { type: 'text', text: t } }
  yield { type: 'usage', usage: { inputTokens: 0, outputTokens: 0 } }
  yield { type: 'finish', reason: { kind: 'stop' } }
}

class JsMockAdapter extends LlmAdapter {
  constructor(calls) { super(); this.calls = calls }
  providerInfo(p) { return { id: p, name: 'JS mock' } }
  async listModels(p) { return [{ provider: p, id: 'jsmock', name: 'JS mock' }] }
  async resolveModel(p, m) { return { provider: p, id: m, name: 'JS mock', context: { contextWindow: 1_000_000 } } }
  providerRetryPolicy(p) { return resolveRetryPolicy({ mode: 'normal', maxRetries: 0 }, `jsmock ${p}`) }
  async *stream(o) {
    if (o.purpose) { yield* text('Mock session'); return }
    let done = 0
    for (const m of o.messages) {
      if (m.source.kind === 'tool' && String(m.source.callId).startsWith(PREFIX)) done++
    }
    if (done < this.calls.length) {
      const call = this.calls[done]
      const block = {
        type: 'tool-call', id: CallId(`${PREFIX}${done}`), name: call.tool, arguments: JSON.stringify(call.args),
      }
      yield { type: 'block-start', index: 0, blockType: 'tool-call' }
      yield { type: 'block-end', index: 0, block }
      yield { type: 'usage', usage: { inputTokens: 0, outputTokens: 0 } }
      yield { type: 'finish', reason: { kind: 'tool-calls' } }
      return
    }
    yield* text(`jsmock complete: ${this.calls.length} tool calls`)
  }
}

export function apply(ctx, config) {
  ctx.llm.registerAdapter(['jsmock'], new JsMockAdapter(config.calls ?? []))
}
"""

JSMOCK_PATCH = f"""- insert:
    - id: {JSMOCK_ROW_ID}
      name: {JSMOCK_PACKAGE}
      disabled: true
      config: {{}}
"""


def _jsmock_package_json(digest: str) -> str:
    return json.dumps({
        "name": JSMOCK_PACKAGE,
        "version": "0.0.1",
        "description": f"dsh-sidecar bench in-process mock adapter ({digest})",
        "type": "module",
        "main": "./index.js",
        "exports": {".": "./index.js", "./cordis.patch.yml": "./cordis.patch.yml",
                    "./package.json": "./package.json"},
        "files": ["index.js", "cordis.patch.yml"],
        "keywords": ["dsh-plugin"],
        "license": "MIT",
        "dsh": {"bundle": {"patch": "./cordis.patch.yml"}},
        "peerDependencies": {"@deepseek-ai/cordis": "^4.0.1",
                             "@deepseek-ai/dsh-llm": "^0.1.0-rc.8",
                             "@deepseek-ai/schemastery": "^3.18.1"},
    }, indent=2) + "\n"


def ensure_jsmock_plugin() -> str:
    """Install ``dsh-bench-jsmock`` (row ``bench-jsmock``, disabled) unless the same version
    is already in the headless profile. Returns ``installed`` or ``already installed``."""
    digest = hashlib.sha256((JSMOCK_INDEX + JSMOCK_PATCH).encode()).hexdigest()[:12]
    installed = PROFILE / "node_modules" / JSMOCK_PACKAGE / "package.json"
    if installed.exists() and digest in installed.read_text():
        return "already installed"
    with tempfile.TemporaryDirectory(prefix="dsh-bench-jsmock-") as tmp:
        src = Path(tmp)
        (src / "index.js").write_text(JSMOCK_INDEX)
        (src / "cordis.patch.yml").write_text(JSMOCK_PATCH)
        (src / "package.json").write_text(_jsmock_package_json(digest))
        subprocess.run([str(ROOT / ".venv" / "bin" / "dsh-sidecar"), "add-local-plugin", str(src),
                        "--prefix", str(HOST)], check=True, capture_output=True, text=True)
    return "installed"


def jsmock_rows(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Patch rows enabling the JS mock adapter as the default model (sidecar row untouched)."""
    return [
        {"id": JSMOCK_ROW_ID, "name": JSMOCK_PACKAGE, "disabled": False, "config": {"calls": calls}},
        {"id": "agent-default-model", "config": {"provider": "jsmock", "model": "jsmock"}},
    ]


def mock_script(calls: list[dict[str, Any]], wait: int | None = 0) -> dict[str, Any]:
    """A canonical script of sequential single-call steps, ``{"wait": wait}`` between them."""
    steps: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        if index and wait is not None:
            steps.append({"wait": wait})
        steps.append({"tool": call["tool"], "args": call["args"]})
    return {"type": "dsh-mock-script", "version": 1, "steps": steps}
