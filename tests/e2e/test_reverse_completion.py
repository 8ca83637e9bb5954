"""A recording whose results complete out of call order, through real headless DSH rc.8.

rc.8's shipped dispatchers finalize in start order: the agent loop commits a parallel group in
model order and Code Mode's ``run_code`` commits sub-calls in submission order, so calls of
one dispatcher always reach ``tools/post-execute`` and ``tools/result`` in call order. Two
dispatchers do not wait for each other: here the parent's parallel group runs ``delegate``
(a one-shot ``spawn`` child whose own agent loop calls ``sleepy`` for 10 ms) next to the
parent's own 8-second ``sleepy``. The parent's call starts first (ordinal 0: the loop enters
it synchronously after ``delegate``, before the child exists) and the child's call second
(ordinal 1, path ``root/0/0``); the child's finishes first. The cassette pairs the results by
handle, and a replay serves both with zero ``sleepy`` bodies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from dshrun import Dsh

MakeDsh = Callable[..., Dsh]
TASK = ('/mock run [delegate({"label": "kid", "promptFile": "kid.prompt"}) '
        'sleepy({"label": "parent", "ms": 8000})]')


def _row(mode: str) -> dict[str, Any]:
    return {"toolCassette": {"mode": mode, "file": "c.ndjson", "include": ["sleepy"]}}


@pytest.mark.slow
def test_a_child_call_completing_before_the_parents_earlier_call_pairs_by_handle(make_dsh: MakeDsh) -> None:
    recorder = make_dsh(sidecar=_row("record"))
    (recorder.cwd / "kid.prompt").write_text('/mock run sleepy({"label": "child", "ms": 10})')

    recorded = recorder.run(TASK)

    assert recorded.rc == 0, recorded.stderr
    assert "2 selected calls, 2 recorded, published: yes" in recorded.stderr
    frames = [json.loads(line) for line in (recorder.cwd / "c.ndjson").read_text().splitlines()]
    starts = {f["ordinal"]: (f["path"], f["args"]["label"]) for f in frames if f["kind"] == "call/start"}
    assert starts == {0: ("root/1", "parent"), 1: ("root/0/0", "child")}
    assert [f["ordinal"] for f in frames if f["kind"] == "call/result"] == [1, 0]
    bodies = recorded.bodies()

    replayed = Dsh(cwd=recorder.cwd, sidecar=_row("replay")).run(TASK)

    assert replayed.rc == 0, replayed.stderr
    assert "2 selected calls, 2 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert replayed.bodies()[len(bodies):] == ["delegate"]
    trace = replayed.trace
    own = trace[max(i for i, line in enumerate(trace) if line["method"] == "initialize"):]
    served = [(line["path"], line["action"]) for line in own
              if line["method"] == "tools/execute" and line["tool"] == "sleepy"]
    assert sorted(served) == [("root/0/0", "serve"), ("root/1", "serve")]
    assert replayed.stdout == recorded.stdout
