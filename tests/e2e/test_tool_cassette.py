"""The tool cassette end to end: record with one headless DSH run, replay with another.

Each test records a cassette in its own cwd through the run API (``record_mode="once"``) and
replays it in the same cwd (``record_mode="none"``), then counts real tool bodies
(``tool-bodies.log``) and checks the typed result: exit code, tool results with their runtime
error codes, the cassette's counts, the named errors; stderr keeps the facts a user reads
there. Two things the mock route decides shape the cases:

* the mock canonicalizes tool arguments (sorted keys) before they reach DSH, so the key-order
  case dispatches through the ``relay`` fixture tool, which passes a nested call arguments
  parsed from JSON text with their key order kept;
* the mock plan stops at the first failed step, so a call refused after a mismatch (poison)
  has to sit in the same parallel group as the mismatching call to reach the cassette at all.

Three tests drive DSH through ``dshrun.Dsh`` with the engine's own ``record`` mode: the run API
publishes a recording only when the turn exits 0 (a recorded tool failure fails the turn), it
never records into a named file (so ``CASSETTE_EXISTS`` cannot arise through it), and killing
DSH mid-recording needs a background process and a signal.

Not covered here: pre-call cancellation that consumes no record. In rc.8 the agent loop never
dispatches a call whose step was already aborted (``appendSkippedToolCall`` logs it without
entering the tool registry), so the ``ABORTED_BEFORE_DISPATCH`` path into the cassette needs an
abort landing between ``prepare`` and ``dispatch`` of one call; the mock route has no way to
place an abort there, and a signal sent at a guessed moment would make the test a race.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from dshrun import ROOT, Dsh, tool_bodies, wait_for

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import RecordMode, RunResult, ToolCassette, run
from dsh_sidecar.python_core.session_log import tool_results

CASSETTE = "c.ndjson"
PARTIAL = CASSETTE + ".partial"
TRACE = "sidecar-trace.jsonl"
TOOL = str(ROOT / ".venv" / "bin" / "dsh-tool-cassette")

MakeDsh = Callable[..., Dsh]


def _run(
    dsh: DshRunner, task: str | Sequence[dict[str, Any]], record_mode: RecordMode, include: Sequence[str] = ("echo",),
    trace: str | None = None,
) -> RunResult:
    """Run ``task`` (a ``/mock`` text or a script's steps) in the test's cwd with ``CASSETTE``.

    ``once`` records the missing cassette, ``none`` replays it. The fixture's ``tools=`` names a
    new cassette per run, so a record/replay pair inside one test calls the run API directly.
    """
    script = None if isinstance(task, str) else {"type": "dsh-mock-script", "version": 1, "steps": list(task)}
    result = run(
        task if isinstance(task, str) else None, script=script, cwd=dsh.cwd, host=dsh.host, patches=dsh.patches,
        tool_cassette=ToolCassette(file=CASSETTE, include=list(include)), record_mode=record_mode, hook_log=TRACE,
        trace=trace,
    )
    dsh.runs.append(result)  # listed in the plugin's failure report
    return result


def _raw_row(mode: str, include: Sequence[str]) -> dict[str, Any]:
    return {"toolCassette": {"mode": mode, "file": CASSETTE, "include": list(include)}}


def _results(result: RunResult) -> dict[str, tuple[bool, str, str | None]]:
    """``callId -> (isError, text, runtime error code)`` of the run's tool results."""
    return {r.call_id: (r.is_error, r.output, r.error_code) for r in result.tool_results}


def _replayed(result: RunResult) -> tuple[int, int, int, bool]:
    """``(selected, consumed, unconsumed, poisoned)`` of the run's replaying tool cassette."""
    s = result.tool_cassette
    assert s is not None and (s.mode, s.file) == ("replay", CASSETTE)
    return s.selected, s.consumed, s.unconsumed, s.poisoned


def _recorded(result: RunResult) -> tuple[int, int, bool]:
    """``(selected, recorded, published)`` of the run's recording tool cassette."""
    s = result.tool_cassette
    assert s is not None and (s.mode, s.file) == ("record", CASSETTE)
    return s.selected, s.recorded, s.published


def _cassette_files(cwd: Path) -> list[str]:
    """Files named after the cassette: a partial or a private recording left behind shows here."""
    return sorted(name for name in os.listdir(cwd) if CASSETTE in name)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)


def _executes(cwd: Path, field: str) -> list[tuple[str, str]]:
    """``(tool, field)`` of each ``tools/execute`` decision of the last run's sidecar in ``cwd``.

    Nested calls (``relay``'s ``echo``) and serve/next decisions are not in the session log, so
    this reads the sidecar trace, which every run of the cwd appends to.
    """
    lines = [json.loads(line) for line in (cwd / TRACE).read_text().splitlines() if line]
    start = [i for i, line in enumerate(lines) if line["method"] == "initialize"][-1]
    return [(line["tool"], line[field]) for line in lines[start:] if line["method"] == "tools/execute"]


def test_a_recorded_call_replays_with_zero_real_bodies(dsh: DshRunner) -> None:
    recorded = _run(dsh, '/mock run echo({"text": "hi"})', "once")

    assert recorded.ok, recorded.explain()
    assert tool_bodies(dsh.cwd) == ["echo"]
    assert "tool cassette record: 1 selected calls, 1 recorded, published: yes" in recorded.stderr
    assert _recorded(recorded) == (1, 1, True)
    assert _cassette_files(dsh.cwd) == [CASSETTE]
    verify = _cli("verify", str(dsh.cwd / CASSETTE))
    assert (verify.returncode, verify.stdout.split(":")[0]) == (0, "valid")
    inspect = json.loads(_cli("inspect", str(dsh.cwd / CASSETTE), "--json").stdout)
    assert (inspect["calls"], inspect["tools"], inspect["valid"]) == (1, {"echo": 1}, True)
    file_bytes = (dsh.cwd / CASSETTE).read_bytes()
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, '/mock run echo({"text": "hi"})', "none")

    assert replayed.ok, replayed.explain()
    assert replayed.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert tool_bodies(dsh.cwd) == bodies
    assert _executes(dsh.cwd, "action") == [("echo", "serve")]
    assert _results(replayed) == _results(recorded) == {"mock-1-1-0": (False, "echo:hi", None)}
    assert "tool cassette replay: 1 selected calls, 1 consumed, 0 unconsumed, poisoned: no" \
        in replayed.stderr
    assert _replayed(replayed) == (1, 1, 0, False)
    assert replayed.errors == []
    assert (dsh.cwd / CASSETTE).read_bytes() == file_bytes


def test_arguments_with_object_keys_in_another_order_still_hit(dsh: DshRunner) -> None:
    # `relay` is unselected and runs both times; its nested `echo` call is the selected one.
    recorded = _run(
        dsh, '/mock run relay({"tool": "echo", "json": "{\\"text\\": \\"hi\\", \\"tags\\": [\\"a\\"]}"})', "once",
    )
    assert recorded.ok, recorded.explain()
    assert tool_bodies(dsh.cwd) == ["relay", "echo"]
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(
        dsh, '/mock run relay({"tool": "echo", "json": "{\\"tags\\": [\\"a\\"], \\"text\\": \\"hi\\"}"})', "none",
    )

    assert replayed.ok, replayed.explain()
    assert tool_bodies(dsh.cwd)[len(bodies):] == ["relay"]
    assert _results(replayed) == {"mock-1-1-0": (False, "relay:echo:hi", None)}
    assert _executes(dsh.cwd, "path") == [("relay", "root/0"), ("echo", "root/0/0")]
    assert "1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert _replayed(replayed) == (1, 1, 0, False)


# A changed value is the privacy test's case (test_a_changed_value_is_a_mismatch_...).
MISMATCHES = [
    pytest.param(
        ["echo"], '/mock run echo({"text": "t", "tags": ["x", "y"]})',
        '/mock run echo({"text": "t", "tags": ["y", "x"]})',
        "CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:", [], id="array-order",
    ),
    # An unselected call ahead of it moves the same echo call (same args, ordinal 0) to root/1.
    pytest.param(
        ["echo"], '/mock run echo({"text": "t"})',
        '/mock run [sleepy({"label": "ahead", "ms": 1}) echo({"text": "t"})]',
        "CASSETTE_MISMATCH: echo at root/1, ordinal 0: path differs from recorded root/0",
        ["sleepy"], id="path",
    ),
    # Same arguments, path and ordinal; only the name differs (the body would reject the args).
    pytest.param(
        ["echo", "sleepy"], '/mock run echo({"text": "t"})', '/mock run sleepy({"text": "t"})',
        "CASSETTE_MISMATCH: sleepy at root/0, ordinal 0: tool differs from recorded echo", [],
        id="tool",
    ),
    pytest.param(
        ["echo"], '/mock run [echo({"text": "a"}) echo({"text": "b"})]',
        '/mock run [echo({"text": "b"}) echo({"text": "a"})]',
        "CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:", [], id="call-order",
    ),
]


@pytest.mark.parametrize(("include", "record", "replay", "reason", "unselected"), MISMATCHES)
def test_a_changed_trajectory_is_a_mismatch_and_runs_no_selected_body(
    dsh: DshRunner, include: list[str], record: str, replay: str, reason: str, unselected: list[str],
) -> None:
    recorded = _run(dsh, record, "once", include)
    assert recorded.ok, recorded.explain()
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, replay, "none", include)

    assert replayed.exit_code == 1
    assert f"dsh-sidecar: {reason}" in replayed.stderr
    assert "poisoned: yes" in replayed.stderr
    assert _replayed(replayed)[3] is True
    assert f"{replayed.errors[0].code}: {replayed.errors[0].message}".startswith(reason)
    assert tool_bodies(dsh.cwd)[len(bodies):] == unselected
    codes = [code for _, _, code in _results(replayed).values() if code is not None]
    assert codes[0] == "CASSETTE_MISMATCH"


def test_after_the_first_mismatch_every_later_selected_call_is_refused(dsh: DshRunner) -> None:
    recorded = _run(dsh, [
        {"parallel": [{"tool": "echo", "args": {"text": "a"}}, {"tool": "echo", "args": {"text": "b"}}]},
        {"tool": "echo", "args": {"text": "c"}},
    ], "once")
    assert recorded.ok, recorded.explain()
    bodies = tool_bodies(dsh.cwd)
    assert bodies == ["echo", "echo", "echo"]

    # The second echo matches its record exactly and is still refused; sleepy is unselected.
    replayed = _run(dsh, [
        {"parallel": [{"tool": "echo", "args": {"text": "A"}}, {"tool": "echo", "args": {"text": "b"}},
                      {"tool": "sleepy", "args": {"label": "free", "ms": 1}}]},
        {"tool": "echo", "args": {"text": "c"}},
    ], "none")

    assert replayed.exit_code == 1
    assert tool_bodies(dsh.cwd)[len(bodies):] == ["sleepy"]
    # A replay's call ids carry a tag of its script (docs/mock.md, "Plan"): read them in call order.
    results = [_results(replayed)[c.call_id] for c in replayed.tool_calls]
    assert results[0][2] == "CASSETTE_MISMATCH"
    assert results[1][2] == "CASSETTE_POISONED"
    assert "replay poisoned by an earlier CASSETTE_MISMATCH" in results[1][1]
    assert results[2] == (False, "slept:free", None)
    # The mock stops at the failed step: the second step is never issued, so nothing ran it.
    assert [c.tool for c in replayed.tool_calls] == ["echo", "echo", "sleepy"]
    # Two selected calls entered the cassette (the refused one too); none was consumed.
    assert "tool cassette replay: 2 selected calls, 0 consumed, 3 unconsumed, poisoned: yes" \
        in replayed.stderr
    assert _replayed(replayed) == (2, 0, 3, True)
    assert "dsh-sidecar: CASSETTE_MISMATCH: echo at root/0, ordinal 0" in replayed.stderr
    assert "CASSETTE_UNCONSUMED: 3 recorded calls not consumed, first echo at root/0, ordinal 0" \
        in replayed.stderr
    assert [e.code for e in replayed.errors] == ["CASSETTE_MISMATCH", "CASSETTE_UNCONSUMED"]


def test_concurrent_calls_completing_in_reverse_order_each_get_their_own_outcome(dsh: DshRunner) -> None:
    task = '/mock run [sleepy({"label": "slow", "ms": 400}) sleepy({"label": "fast", "ms": 10})]'
    recorded = _run(dsh, task, "once", ["sleepy*"])
    assert recorded.ok, recorded.explain()
    assert tool_bodies(dsh.cwd) == ["sleepy", "sleepy"]
    bodies = tool_bodies(dsh.cwd)
    frames = [json.loads(line) for line in (dsh.cwd / CASSETTE).read_text().splitlines()]
    starts = {f["ordinal"]: f["args"]["label"] for f in frames if f["kind"] == "call/start"}
    assert starts == {0: "slow", 1: "fast"}

    replayed = _run(dsh, task, "none", ["sleepy*"])

    assert replayed.ok, replayed.explain()
    assert tool_bodies(dsh.cwd) == bodies
    labels = {c.call_id: c.arguments["label"] for c in replayed.tool_calls}
    assert labels == {"mock-1-1-0": "slow", "mock-1-1-1": "fast"}
    assert _results(replayed) == {
        "mock-1-1-0": (False, "slept:slow", None), "mock-1-1-1": (False, "slept:fast", None),
    }
    assert "2 selected calls, 2 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert _replayed(replayed) == (2, 2, 0, False)


def test_a_recorded_failure_replays_as_the_same_structured_error(dsh: DshRunner) -> None:
    # Both runs exit 1: the mock plan stops at the failed call (TOOL_FAILED), not the cassette.
    # The run API publishes only a recording whose turn exits 0, so the engine records directly.
    recorder = Dsh(cwd=dsh.cwd, sidecar=_raw_row("record", ["broken"]))
    recorded = recorder.run('/mock run broken({"why": "disk on fire"})')
    assert recorded.rc == 1
    assert "published: yes" in recorded.stderr
    assert tool_bodies(dsh.cwd) == ["broken"]
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, '/mock run broken({"why": "disk on fire"})', "none", ["broken"])

    assert replayed.exit_code == 1
    assert "TOOL_FAILED: broken (mock-1-1-0) failed at step 1" in replayed.stderr
    assert tool_bodies(dsh.cwd) == bodies
    expected = (True, "Error: broken on purpose: disk on fire", None)
    recorded_results = {r.call_id: (r.is_error, r.output, r.error_code) for r in tool_results(recorded.sessions()[-1])}
    assert _results(replayed) == recorded_results == {"mock-1-1-0": expected}
    assert "1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert _replayed(replayed) == (1, 1, 0, False)
    assert "CASSETTE_" not in replayed.stderr
    assert replayed.errors == []
    assert replayed.mock[-1].state == "failed" and replayed.mock[-1].failed_tool == "broken"


def test_a_deferred_context_comes_back_on_replay(dsh: DshRunner) -> None:
    task = '/mock run echo({"text": "hi", "context": "ctx-marker-41"})'
    recorded = _run(dsh, task, "once")
    assert recorded.ok, recorded.explain()
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, task, "none")

    assert replayed.ok, replayed.explain()
    assert tool_bodies(dsh.cwd) == bodies
    contexts = [e["data"] for e in replayed.events
                if e["type"] == "user/message" and e["data"]["source"].get("plugin") == "dsh-example-tools"]
    assert [c["content"] for c in contexts] == [[{"type": "text", "text": "ctx-marker-41"}]]
    assert "1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert _replayed(replayed) == (1, 1, 0, False)


def test_an_extra_selected_call_fails_the_replay_without_running_its_body(dsh: DshRunner) -> None:
    recorded = _run(dsh, '/mock run echo({"text": "a"})', "once")
    assert recorded.ok, recorded.explain()
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, '/mock run [echo({"text": "a"}) echo({"text": "b"})]', "none", trace="extra.html")

    assert replayed.exit_code == 1
    # Its trace shows the extra call beside the closest recorded call of echo, with both values.
    (near,) = json.loads((dsh.cwd / "extra.json").read_text())["runs"][0]["mismatches"]
    assert (near["code"], near["recorded"], near["live"]) == ("CASSETTE_EXTRA_CALL", {"text": "a"}, {"text": "b"})
    assert near["pointers"] == [{"pointer": "/text", "change": "changed", "recorded": "a", "live": "b"}]
    assert tool_bodies(dsh.cwd) == bodies
    results = _results(replayed)
    assert results["mock-1-1-0"] == (False, "echo:a", None)
    assert results["mock-1-1-1"][2] == "CASSETTE_EXTRA_CALL"
    assert "2 selected calls, 1 consumed, 0 unconsumed, poisoned: yes" in replayed.stderr
    assert _replayed(replayed) == (2, 1, 0, True)
    assert "dsh-sidecar: CASSETTE_EXTRA_CALL: echo at root/1, ordinal 1: extra call, " \
        "the cassette holds 1 calls" in replayed.stderr
    assert [(e.code, e.message) for e in replayed.errors] == [
        ("CASSETTE_EXTRA_CALL", "echo at root/1, ordinal 1: extra call, the cassette holds 1 calls"),
    ]


def test_records_left_unconsumed_fail_the_replay(dsh: DshRunner) -> None:
    recorded = _run(dsh, '/mock run [echo({"text": "a"}) echo({"text": "b"})]', "once")
    assert recorded.ok, recorded.explain()
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, '/mock run echo({"text": "a"})', "none")

    assert replayed.exit_code == 1
    assert replayed.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert tool_bodies(dsh.cwd) == bodies
    assert "1 consumed, 1 unconsumed, poisoned: no" in replayed.stderr
    assert _replayed(replayed) == (1, 1, 1, False)
    assert "dsh-sidecar: CASSETTE_UNCONSUMED: 1 recorded calls not consumed, " \
        "first echo at root/1, ordinal 1" in replayed.stderr
    assert [(e.code, e.message) for e in replayed.errors] == [
        ("CASSETTE_UNCONSUMED", "1 recorded calls not consumed, first echo at root/1, ordinal 1"),
    ]


@pytest.mark.parametrize(("existing", "absent"), [(CASSETTE, PARTIAL), (PARTIAL, CASSETTE)])
def test_recording_refuses_to_start_over_an_existing_file(make_dsh: MakeDsh, existing: str, absent: str) -> None:
    # The engine's own record mode: the run API records into a private file, never into this one.
    recorder = make_dsh(sidecar=_raw_row("record", ["echo"]))
    content = b'{"not":"a cassette"}\nsecond line without newline'
    (recorder.cwd / existing).write_bytes(content)

    run = recorder.run('/mock run echo({"text": "hi"})')

    assert run.rc == 1
    assert f"CASSETTE_EXISTS: {existing} already exists; recording never overwrites" in run.stderr
    assert (recorder.cwd / existing).read_bytes() == content
    assert not (recorder.cwd / absent).exists()
    assert run.bodies() == []


def test_killing_dsh_mid_recording_keeps_an_unverifiable_partial(make_dsh: MakeDsh) -> None:
    # A background DSH and a signal: the run API runs to completion, so this drives DSH directly.
    recorder = make_dsh(sidecar=_raw_row("record", ["sleepy"]))
    partial = recorder.cwd / PARTIAL
    proc = recorder.start('/mock run sleepy({"label": "long", "ms": 3000})')
    wait_for(lambda: partial.exists() and '"kind":"call/start"' in partial.read_text()
             and (recorder.cwd / "tool-bodies.log").exists())
    trace = recorder.cwd / "sidecar-trace.jsonl"
    sidecar = json.loads(trace.read_text().splitlines()[0])["pid"]
    # bin/dsh and the package's .bin/dsh both `exec`, so the started pid is node itself.
    assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"node")

    os.kill(proc.pid, signal.SIGKILL)
    run = recorder.finished(proc)
    wait_for(lambda: _exited(sidecar))

    assert run.rc == -signal.SIGKILL
    assert run.bodies() == ["sleepy"]
    assert partial.exists()
    assert not (recorder.cwd / CASSETTE).exists()
    verify = _cli("verify", str(partial))
    assert verify.returncode == 1
    assert verify.stdout.startswith(f"CASSETTE_INVALID: {partial.name}: missing complete tail frame")
    assert str(recorder.cwd) not in verify.stdout + verify.stderr


def _exited(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_a_changed_value_is_a_mismatch_whose_diagnostics_echo_no_raw_arguments_or_paths(dsh: DshRunner) -> None:
    recorded = _run(dsh, '/mock run echo({"text": "sk-live-RECORDED-4f9a2c"})', "once")
    assert recorded.ok, recorded.explain()
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, '/mock run echo({"text": "sk-live-REPLAYED-8c2e7d"})', "none")

    assert replayed.exit_code == 1
    assert tool_bodies(dsh.cwd) == bodies
    assert "poisoned: yes" in replayed.stderr
    assert "CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:" in replayed.stderr
    # explain()'s first line quotes the task the caller wrote; everything after it is diagnostics.
    diagnostics = "\n".join([
        replayed.stderr, _results(replayed)["mock-1-1-0"][1], *(e.message for e in replayed.errors),
        replayed.explain().split("\n", 1)[1],
    ])
    for secret in ("sk-live", "RECORDED-4f9a2c", "REPLAYED-8c2e7d"):
        assert secret not in diagnostics
    assert str(dsh.cwd) not in diagnostics
    assert str(dsh.cwd.parent) not in diagnostics


def test_unselected_tools_run_untouched_in_record_and_replay(dsh: DshRunner) -> None:
    task = '/mock run [echo({"text": "a"}) sleepy({"label": "free", "ms": 1})]'
    recorded = _run(dsh, task, "once")
    assert recorded.ok, recorded.explain()
    assert sorted(tool_bodies(dsh.cwd)) == ["echo", "sleepy"]
    assert _recorded(recorded) == (1, 1, True)
    inspect = json.loads(_cli("inspect", str(dsh.cwd / CASSETTE), "--json").stdout)
    assert (inspect["calls"], inspect["tools"]) == (1, {"echo": 1})
    bodies = tool_bodies(dsh.cwd)

    replayed = _run(dsh, task, "none")

    assert replayed.ok, replayed.explain()
    assert tool_bodies(dsh.cwd)[len(bodies):] == ["sleepy"]
    assert _executes(dsh.cwd, "action") == [("echo", "serve"), ("sleepy", "next")]
    assert _results(replayed) == {
        "mock-1-1-0": (False, "echo:a", None), "mock-1-1-1": (False, "slept:free", None),
    }
    assert "1 selected calls, 1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert _replayed(replayed) == (1, 1, 0, False)
