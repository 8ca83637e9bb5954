"""Seeded, bounded fuzz of the trace builder and ``show``'s file reader: a trace or a named error,
never a traceback.

``DSH_FUZZ_SEED`` picks the seed (printed either way). 3,000 generated runs (session logs shaped
as rc.8 writes them with members replaced by values of other types, dropped or nested, hook logs
with wrong types; lone surrogates and ``</script>`` in texts) go through ``build_run``; every 20th
is written as a page and its JSON, which must decode and hold the document. 1,500 mutated files go
through ``show``'s reader (``run_of``), which must give a run or raise a ``SidecarError``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from dsh_sidecar.bridge.api.trace.build import RunSources, build_run
from dsh_sidecar.bridge.api.trace.collect import write_runs
from dsh_sidecar.bridge.api.trace.files import run_of
from dsh_sidecar.bridge.api.trace.redact import Redactor
from dsh_sidecar.bridge.api.types import CassetteSummary, Diagnostic, RunResult, ToolResult
from dsh_sidecar.python_core.errors import SidecarError

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261205"))
RUNS = 3_000
FILES = 1_500
EXAMPLE = Path(__file__).parents[1] / "examples" / "cassettes" / "test_weather" / "test_paris_weather.tools.ndjson"
ODD: list[Any] = [None, 0, -1, 1.5, True, "", "\ud800", "</script>", [], {}, [None], {"a": {"b": []}}, "x" * 300]


def _events() -> list[dict[str, Any]]:
    def event(seq: int, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"type": kind, "seq": seq, "time": 1000 + seq, "data": data}

    step = {"turn": 1, "step": 1}
    return [
        {"type": "session", "id": "s-1", "createdAt": 1000, "cwd": "/w", "delegationDepth": 0},
        event(1, "turn/start", {"turn": 1}),
        event(2, "assistant/chunk", {**step, "chunk": {"type": "block-end", "index": 0,
                                                        "block": {"type": "text", "text": "hi sk-abc123456"}}}),
        event(3, "assistant/chunk", {**step, "chunk": {"type": "usage", "usage": {"inputTokens": 1}}}),
        event(4, "assistant/chunk", {**step, "chunk": {"type": "finish", "reason": {"kind": "error", "failure": {
            "code": "TOOL_FAILED", "message": "m"}}}}),
        event(5, "tool/call", {**step, "callId": "c1", "name": "echo", "arguments": '{"text": "a", "token": "t0k3n"}'}),
        event(6, "tool/result", {**step, "message": {"source": {"kind": "tool", "callId": "c1"}, "content": [
            {"type": "tool-result", "isError": True, "content": [{"type": "text", "text": "Error: X"}]}]},
            "error": {"code": "CASSETTE_MISMATCH"}}),
        event(7, "mock/status", {"state": "failed", "steps_completed": 0, "step_count": 1, "error_code": "E"}),
        event(8, "turn/end", {"turn": 1, "reason": {"kind": "error", "error": {"code": "TOOL_FAILED"}}}),
    ]


HOOKS: list[dict[str, Any]] = [
    {"method": "tools/execute", "callId": "c1", "tool": "echo", "source": "served", "ordinal": 0, "fault": "f"},
    {"method": "llm/stream", "session": "s-1", "purpose": None},
    {"method": "model/request", "session": "s-1", "purpose": None, "action": "replay"},
    {"method": "model/mismatch", "lane": "model", "position": 0, "differences": [
        "message 1 (user) differs", "system prompt differs", "tool echo missing", "option maxTokens differs"],
     "live": {"system": "s", "messages": [{}, {"content": "x"}], "tools": [{"name": "echo"}], "options": {
         "maxTokens": 5}}, "recorded": None},
]


def _odd(rng: random.Random) -> Any:
    # A copy: a shared list put inside itself would make a cycle no decoded JSON can have.
    return copy.deepcopy(rng.choice(ODD))


def _mutate(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """``value`` with one member, somewhere, replaced, dropped or wrapped."""
    if isinstance(value, dict) and value and depth < 6:
        key = rng.choice(list(value))
        roll = rng.random()
        if roll < 0.2:
            del value[key]
        elif roll < 0.5:
            value[key] = _odd(rng)
        else:
            value[key] = _mutate(value[key], rng, depth + 1)
    elif isinstance(value, list) and value and depth < 6:
        index = rng.randrange(len(value))
        value[index] = _odd(rng) if rng.random() < 0.3 else _mutate(value[index], rng, depth + 1)
    elif rng.random() < 0.5:
        return _odd(rng)
    return value


def _result(events: list[Any], rng: random.Random) -> RunResult:
    summary = CassetteSummary(kind="tool", file="t.ndjson", record_mode="none", mode="replay", unconsumed=1,
                              stood_up=["echo"] if rng.random() < 0.3 else [])
    return RunResult(
        exit_code=1, timed_out=False, duration_ms=5, task="t \ud800 </script>", stdout="", final_text="",
        stderr=rng.choice(["", "dsh-sidecar: warning: REPLAY_DIVERGED: x\n", "dsh-sidecar: fix: y\n"]),
        tool_calls=[], tool_results=[ToolResult(call_id="c1", tool="echo", path=None, is_error=False, output="",
                                                value=_odd(rng))],
        mock=[], tool_cassette=summary, subagent_cassette=None,
        errors=[Diagnostic(rng.choice(["CASSETTE_MISMATCH", "MODEL_CASSETTE_MISMATCH", "X"]),
                           rng.choice(["echo at root/0, ordinal 0: changed /text", "echo at root/0, ordinal 99: x",
                                       ""]))],
        session_id="s-1", session_path=None, child_session_ids=[], events=events,
    )


def test_fuzz_the_trace_builder_gives_a_document_for_any_log(tmp_path: Path) -> None:
    print(f"DSH_FUZZ_SEED={SEED}", file=sys.stderr)
    rng = random.Random(SEED)
    for case in range(RUNS):
        events: list[Any] = _events()
        hooks: list[Any] = copy.deepcopy(HOOKS)
        for _ in range(rng.randint(1, 4)):
            _mutate(events if rng.random() < 0.7 else hooks, rng)
        sources = RunSources(result=_result(events, rng), hooks=[h for h in hooks if isinstance(h, dict)],
                             label=f"case {case}", cassette_files={"tool": EXAMPLE},
                             redactor=Redactor([{"regex": "sk-[a-z0-9]+"}]))
        try:
            run = build_run(sources)
        except Exception as exc:  # the contract: no exception at all
            raise AssertionError(f"case {case} (DSH_FUZZ_SEED={SEED}): {type(exc).__name__}: {exc}") from exc
        assert run.label == f"case {case}"
        if case % 20 == 0:
            page = write_runs([sources], tmp_path / "p.html", title=f"case {case}")
            document = json.loads(page.with_suffix(".json").read_text())
            assert document["runs"][0]["label"] == f"case {case}"
            html = page.read_text()
            assert html.count("</script>") == 2 and "sk-abc123456" not in html


def test_fuzz_show_reads_any_file_as_a_run_or_a_named_error(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    original = EXAMPLE.read_bytes()
    poison = [b"{", b"}", b'"kind":"header",', b'"protocol":"dsh-model-cassette",', b'"type":"session",',
              b'"kind":"cassette/header",', b"\xff", b"\n", b"\x00", b"[]", b"null"]
    for case in range(FILES):
        data = bytearray(original if rng.random() < 0.8 else b'{"type":"session","id":"s"}\n{}\n')
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(data) + 1)
            if rng.random() < 0.5:
                data[at:at + rng.randint(1, 8)] = rng.choice(poison)
            else:
                data[at:at] = rng.choice(poison)
        path = tmp_path / f"f{case % 3}.ndjson"
        path.write_bytes(bytes(data))
        try:
            run_of(path, Redactor())
        except SidecarError:
            pass
        except Exception as exc:
            raise AssertionError(f"file case {case} (DSH_FUZZ_SEED={SEED}): {type(exc).__name__}: {exc}") from exc
