"""A recording stopped by SIGTERM or SIGINT is never published as complete (real headless DSH).

rc.8's launcher answers SIGTERM (exit 0) and SIGINT (exit 130) by disposing the plugin tree
mid-turn: the session logs no ``turn/end``. The sidecar publishes a recording only once the
turn it records really ended (``session/turn`` from the shim), so every case here must keep
``<file>.partial``, say ``RECORDING_INTERRUPTED`` on stderr and exit non-zero.

The interruption points are reached deterministically: a ``/mock replay`` script runs k calls
and then either waits 10 minutes before the next model response (the trace shows the
``llm/stream`` of that step, which is where the mock sleeps) or runs a ``sleepy`` call of 10
minutes (its body has appended to ``tool-bodies.log``). The signal is sent once that
file-backed condition holds; nothing sleeps to synchronize.
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from dshrun import ROOT, Dsh, wait_for

pytestmark = pytest.mark.slow  # 20 signalled recordings

MakeDsh = Callable[..., Dsh]
CASSETTE = "c.ndjson"
PARTIAL = CASSETTE + ".partial"
TOOL_CLI = str(ROOT / ".venv" / "bin" / "dsh-tool-cassette")
SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
LONG_MS = 600_000
# (signal, where, k): between = after k finished calls, during = inside call k + 1.
POINTS = [
    (sig, where, k)
    for sig in (signal.SIGTERM, signal.SIGINT)
    for where, ks in (("between", range(1, 6)), ("during", range(0, 5)))
    for k in ks
]


def _echo(i: int) -> dict[str, Any]:
    return {"tool": "echo", "args": {"text": f"call {i}"}}


def _script(dsh: Dsh, steps: list[dict[str, Any]]) -> str:
    (dsh.cwd / "s.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": steps}))
    return "/mock replay s.json"


def _trace(dsh: Dsh) -> list[dict[str, Any]]:
    path = dsh.cwd / "sidecar-trace.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _model_waits_before_step(dsh: Dsh, step: int) -> bool:
    """The mock logged the ``llm/stream`` of ``step`` of the root turn: it sleeps there now."""
    return any(line["method"] == "llm/stream" and line["step"] == step and line["purpose"] is None
               for line in _trace(dsh))


def _frames(dsh: Dsh, kind: str) -> list[dict[str, Any]]:
    lines = (dsh.cwd / PARTIAL).read_text().splitlines()
    return [frame for frame in map(json.loads, lines) if frame["kind"] == kind]


@pytest.mark.parametrize(("sig", "where", "k"), POINTS,
                         ids=[f"{s.name}-{w}-{k}" for s, w, k in POINTS])
def test_an_interrupted_recording_keeps_its_partial_and_fails(
    make_dsh: MakeDsh, sig: signal.Signals, where: str, k: int,
) -> None:
    dsh = make_dsh(sidecar={"toolCassette": {"mode": "record", "file": CASSETTE, "include": ["echo", "sleepy"]}})
    steps = [_echo(i) for i in range(k)]
    if where == "between":
        steps += [{"wait": LONG_MS}, _echo(k)]
    else:
        steps += [{"tool": "sleepy", "args": {"label": "long", "ms": LONG_MS}}]
    proc = dsh.start(_script(dsh, steps))
    bodies = dsh.cwd / "tool-bodies.log"
    if where == "between":
        wait_for(lambda: _model_waits_before_step(dsh, k + 1), proc=proc)
    else:
        wait_for(lambda: bodies.exists() and "sleepy" in bodies.read_text(), proc=proc)

    proc.send_signal(sig)
    run = dsh.finished(proc, timeout=60)

    assert run.rc == (1 if sig is signal.SIGTERM else 130), run.stderr
    assert (
        f"dsh-sidecar: RECORDING_INTERRUPTED: tool cassette {CASSETTE}: turn 1 did not end (DSH was "
        f"stopped mid-turn, e.g. by SIGTERM or SIGINT); not published, kept {PARTIAL}\n"
    ) in run.stderr
    assert "published: no" in run.stderr
    assert not (dsh.cwd / CASSETTE).exists()
    assert run.events("turn/end") == []
    assert len(_frames(dsh, "call/result")) == k
    assert len(_frames(dsh, "call/start")) == (k if where == "between" else k + 1)
    assert _frames(dsh, "complete") == []
    verify = subprocess.run([TOOL_CLI, "verify", str(dsh.cwd / PARTIAL)], capture_output=True, text=True,
                            timeout=30)
    assert verify.returncode == 1
    assert verify.stdout.startswith(f"CASSETTE_INVALID: {PARTIAL}: missing complete tail frame")


def test_a_turn_that_ends_is_published_by_the_same_script_shape(make_dsh: MakeDsh) -> None:
    dsh = make_dsh(sidecar={"toolCassette": {"mode": "record", "file": CASSETTE, "include": ["echo"]}})

    run = dsh.run(_script(dsh, [_echo(0), {"wait": 0}, _echo(1)]))

    assert run.rc == 0, run.stderr
    assert "tool cassette record: 2 selected calls, 2 recorded, published: yes" in run.stderr
    assert [e["data"]["reason"] for e in run.events("turn/end")] == [{"kind": "completed"}]
    assert (dsh.cwd / CASSETTE).exists()
    assert not (dsh.cwd / PARTIAL).exists()


def test_an_interrupted_subagent_recording_fails_the_run(make_dsh: MakeDsh) -> None:
    child = '/mock run echo({"text": "from child"})'
    dsh = make_dsh(
        sidecar={"subagentCassette": {"mode": "record", "file": "sub.cassette.jsonl",
                                      "provider": {"transparent": True}}},
        extra_patch='- {"id": "subagent-spawn-in-process", "config": {"providerName": "spawn-upstream"}}\n',
    )
    # `/mock replay` refuses the `subagent` tool as nested; the fixture's `delegate` tool starts
    # a one-shot child through `spawn` (the cassette, in the transparent setup).
    (dsh.cwd / "audit.prompt").write_text(child)
    delegate = {"tool": "delegate", "args": {"label": "audit", "promptFile": "audit.prompt"}}
    proc = dsh.start(_script(dsh, [delegate, {"wait": LONG_MS}, _echo(1)]))

    def parent_waits() -> bool:
        # The child's own steps stream before its outcome; the parent's step 2 after it.
        methods = [(line["method"], line.get("step")) for line in _trace(dsh)]
        return ("subagent/outcome", None) in methods and (
            ("llm/stream", 2) in methods[methods.index(("subagent/outcome", None)):])

    wait_for(parent_waits)
    proc.send_signal(signal.SIGTERM)
    run = dsh.finished(proc, timeout=60)

    assert run.rc == 1, run.stderr
    assert (
        "dsh-sidecar: RECORDING_INTERRUPTED: subagent cassette sub.cassette.jsonl: turn 1 did not end "
        "(DSH was stopped mid-turn, e.g. by SIGTERM or SIGINT); it holds 1 interactions, not the "
        "whole turn; record again\n"
    ) in run.stderr
