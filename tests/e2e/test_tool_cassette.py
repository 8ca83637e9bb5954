"""The tool cassette end to end: record with one headless DSH run, replay with another.

Each test records in a fresh cwd and replays in the same cwd, then counts real tool bodies
(``tool-bodies.log``), reads the exit code, the sidecar's stderr lines and the replay run's own
session log. Two things the mock route decides shape the cases:

* the mock canonicalizes tool arguments (sorted keys) before they reach DSH, so the key-order
  case dispatches through the ``relay`` fixture tool, which passes a nested call arguments
  parsed from JSON text with their key order kept;
* the mock plan stops at the first failed step, so a call refused after a mismatch (poison)
  has to sit in the same parallel group as the mismatching call to reach the cassette at all.

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
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from dshrun import ROOT, Dsh, Run, wait_for

CASSETTE = "c.ndjson"
PARTIAL = CASSETTE + ".partial"
TOOL = str(ROOT / ".venv" / "bin" / "dsh-tool-cassette")

MakeDsh = Callable[..., Dsh]


def _row(mode: str, include: Sequence[str]) -> dict[str, Any]:
    return {"toolCassette": {"mode": mode, "file": CASSETTE, "include": list(include)}}


def _pair(make_dsh: MakeDsh, include: Sequence[str] = ("echo",)) -> tuple[Dsh, Dsh]:
    """A recorder in a fresh cwd and a replayer of the same cassette in the same cwd."""
    recorder = make_dsh(sidecar=_row("record", include))
    return recorder, replace(recorder, sidecar=_row("replay", include))


def _script(dsh: Dsh, name: str, *steps: dict[str, Any]) -> str:
    """Write a mock script into the cwd; return the task that replays it."""
    script = {"type": "dsh-mock-script", "version": 1, "steps": list(steps)}
    (dsh.cwd / name).write_text(json.dumps(script))
    return f"/mock replay {name}"


def _own(run: Run, kind: str) -> list[dict[str, Any]]:
    """Events of one type in ``run``'s own session (the newest one of the cwd)."""
    return [e for e in run.sessions()[-1] if e.get("type") == kind]


def _results(run: Run) -> dict[str, tuple[bool, str, str | None]]:
    """``callId -> (isError, text, error code)`` of the tool results in ``run``'s session."""
    out = {}
    for event in _own(run, "tool/result"):
        (block,) = event["data"]["message"]["content"]
        text = "".join(part["text"] for part in block["content"] if part["type"] == "text")
        code = event["data"].get("error", {}).get("code")
        out[block["toolCallId"]] = (block.get("isError", False), text, code)
    return out


def _since(run: Run, before: list[str]) -> list[str]:
    """Tool bodies that ran after ``before`` was read from the same cwd."""
    return run.bodies()[len(before):]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)


def _own_trace(run: Run) -> list[dict[str, Any]]:
    """Trace lines of ``run``'s sidecar (the trace file of a cwd is appended to by every run)."""
    lines = run.trace
    starts = [i for i, line in enumerate(lines) if line["method"] == "initialize"]
    return lines[starts[-1]:]


def _executes(run: Run, field: str) -> list[tuple[str, str]]:
    """``(tool, field)`` of each ``tools/execute`` decision of ``run``'s sidecar."""
    return [(line["tool"], line[field]) for line in _own_trace(run)
            if line["method"] == "tools/execute"]


def test_a_recorded_call_replays_with_zero_real_bodies(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh)

    recorded = recorder.run('/mock run echo({"text": "hi"})')

    assert recorded.rc == 0, recorded.stderr
    assert recorded.bodies() == ["echo"]
    assert "tool cassette record: 1 selected calls, 1 recorded, published: yes" in recorded.stderr
    assert not (recorder.cwd / PARTIAL).exists()
    verify = _cli("verify", str(recorder.cwd / CASSETTE))
    assert (verify.returncode, verify.stdout.split(":")[0]) == (0, "valid")
    inspect = json.loads(_cli("inspect", str(recorder.cwd / CASSETTE), "--json").stdout)
    assert (inspect["calls"], inspect["tools"], inspect["valid"]) == (1, {"echo": 1}, True)
    file_bytes = (recorder.cwd / CASSETTE).read_bytes()
    bodies = recorded.bodies()

    replayed = replayer.run('/mock run echo({"text": "hi"})')

    assert replayed.rc == 0, replayed.stderr
    assert replayed.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert _since(replayed, bodies) == []
    assert _executes(replayed, "action") == [("echo", "serve")]
    assert _results(replayed) == _results(recorded) == {"mock-1-1-0": (False, "echo:hi", None)}
    assert "tool cassette replay: 1 selected calls, 1 consumed, 0 unconsumed, poisoned: no" \
        in replayed.stderr
    assert (recorder.cwd / CASSETTE).read_bytes() == file_bytes


def test_arguments_with_object_keys_in_another_order_still_hit(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh)
    # `relay` is unselected and runs both times; its nested `echo` call is the selected one.
    recorded = recorder.run(
        '/mock run relay({"tool": "echo", "json": "{\\"text\\": \\"hi\\", \\"tags\\": [\\"a\\"]}"})'
    )
    assert recorded.rc == 0, recorded.stderr
    assert recorded.bodies() == ["relay", "echo"]
    bodies = recorded.bodies()

    replayed = replayer.run(
        '/mock run relay({"tool": "echo", "json": "{\\"tags\\": [\\"a\\"], \\"text\\": \\"hi\\"}"})'
    )

    assert replayed.rc == 0, replayed.stderr
    assert _since(replayed, bodies) == ["relay"]
    assert _results(replayed) == {"mock-1-1-0": (False, "relay:echo:hi", None)}
    assert _executes(replayed, "path") == [("relay", "root/0"), ("echo", "root/0/0")]
    assert "1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr


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
    make_dsh: MakeDsh, include: list[str], record: str, replay: str, reason: str,
    unselected: list[str],
) -> None:
    recorder, replayer = _pair(make_dsh, include)
    recorded = recorder.run(record)
    assert recorded.rc == 0, recorded.stderr
    bodies = recorded.bodies()

    replayed = replayer.run(replay)

    assert replayed.rc == 1
    assert f"dsh-sidecar: {reason}" in replayed.stderr
    assert "poisoned: yes" in replayed.stderr
    assert _since(replayed, bodies) == unselected
    codes = [code for _, _, code in _results(replayed).values() if code is not None]
    assert codes[0] == "CASSETTE_MISMATCH"


def test_after_the_first_mismatch_every_later_selected_call_is_refused(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh)
    recorded = recorder.run(_script(
        recorder, "record.json",
        {"parallel": [{"tool": "echo", "args": {"text": "a"}}, {"tool": "echo", "args": {"text": "b"}}]},
        {"tool": "echo", "args": {"text": "c"}},
    ))
    assert recorded.rc == 0, recorded.stderr
    bodies = recorded.bodies()
    assert bodies == ["echo", "echo", "echo"]

    # The second echo matches its record exactly and is still refused; sleepy is unselected.
    replayed = replayer.run(_script(
        replayer, "replay.json",
        {"parallel": [{"tool": "echo", "args": {"text": "A"}}, {"tool": "echo", "args": {"text": "b"}},
                      {"tool": "sleepy", "args": {"label": "free", "ms": 1}}]},
        {"tool": "echo", "args": {"text": "c"}},
    ))

    assert replayed.rc == 1
    assert _since(replayed, bodies) == ["sleepy"]
    results = _results(replayed)
    assert results["mock-1-1-0"][2] == "CASSETTE_MISMATCH"
    assert results["mock-1-1-1"][2] == "CASSETTE_POISONED"
    assert "replay poisoned by an earlier CASSETTE_MISMATCH" in results["mock-1-1-1"][1]
    assert results["mock-1-1-2"] == (False, "slept:free", None)
    # The mock stops at the failed step: the second step is never issued, so nothing ran it.
    assert [e["data"]["name"] for e in _own(replayed, "tool/call")] == ["echo", "echo", "sleepy"]
    # Two selected calls entered the cassette (the refused one too); none was consumed.
    assert "tool cassette replay: 2 selected calls, 0 consumed, 3 unconsumed, poisoned: yes" \
        in replayed.stderr
    assert "dsh-sidecar: CASSETTE_MISMATCH: echo at root/0, ordinal 0" in replayed.stderr
    assert "CASSETTE_UNCONSUMED: 3 recorded calls not consumed, first echo at root/0, ordinal 0" \
        in replayed.stderr


def test_concurrent_calls_completing_in_reverse_order_each_get_their_own_outcome(
    make_dsh: MakeDsh,
) -> None:
    recorder, replayer = _pair(make_dsh, ["sleepy*"])
    task = '/mock run [sleepy({"label": "slow", "ms": 400}) sleepy({"label": "fast", "ms": 10})]'
    recorded = recorder.run(task)
    assert recorded.rc == 0, recorded.stderr
    assert recorded.bodies() == ["sleepy", "sleepy"]
    bodies = recorded.bodies()
    frames = [json.loads(line) for line in (recorder.cwd / CASSETTE).read_text().splitlines()]
    starts = {f["ordinal"]: f["args"]["label"] for f in frames if f["kind"] == "call/start"}
    assert starts == {0: "slow", 1: "fast"}

    replayed = replayer.run(task)

    assert replayed.rc == 0, replayed.stderr
    assert _since(replayed, bodies) == []
    labels = {e["data"]["callId"]: json.loads(e["data"]["arguments"])["label"]
              for e in _own(replayed, "tool/call")}
    assert labels == {"mock-1-1-0": "slow", "mock-1-1-1": "fast"}
    assert _results(replayed) == {
        "mock-1-1-0": (False, "slept:slow", None), "mock-1-1-1": (False, "slept:fast", None),
    }
    assert "2 selected calls, 2 consumed, 0 unconsumed, poisoned: no" in replayed.stderr


def test_a_recorded_failure_replays_as_the_same_structured_error(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh, ["broken"])
    # Both runs exit 1: the mock plan stops at the failed call (TOOL_FAILED), not the cassette.
    recorded = recorder.run('/mock run broken({"why": "disk on fire"})')
    assert recorded.rc == 1
    assert "published: yes" in recorded.stderr
    assert recorded.bodies() == ["broken"]
    bodies = recorded.bodies()

    replayed = replayer.run('/mock run broken({"why": "disk on fire"})')

    assert replayed.rc == 1
    assert "TOOL_FAILED: broken (mock-1-1-0) failed at step 1" in replayed.stderr
    assert _since(replayed, bodies) == []
    expected = (True, "Error: broken on purpose: disk on fire", None)
    assert _results(replayed) == _results(recorded) == {"mock-1-1-0": expected}
    assert "1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert "CASSETTE_" not in replayed.stderr


def test_a_deferred_context_comes_back_on_replay(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh)
    task = '/mock run echo({"text": "hi", "context": "ctx-marker-41"})'
    recorded = recorder.run(task)
    assert recorded.rc == 0, recorded.stderr
    bodies = recorded.bodies()

    replayed = replayer.run(task)

    assert replayed.rc == 0, replayed.stderr
    assert _since(replayed, bodies) == []
    contexts = [m["data"] for m in _own(replayed, "user/message")
                if m["data"]["source"].get("plugin") == "dsh-example-tools"]
    assert [c["content"] for c in contexts] == [[{"type": "text", "text": "ctx-marker-41"}]]
    assert "1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr


def test_an_extra_selected_call_fails_the_replay_without_running_its_body(
    make_dsh: MakeDsh,
) -> None:
    recorder, replayer = _pair(make_dsh)
    recorded = recorder.run('/mock run echo({"text": "a"})')
    assert recorded.rc == 0, recorded.stderr
    bodies = recorded.bodies()

    replayed = replayer.run('/mock run [echo({"text": "a"}) echo({"text": "b"})]')

    assert replayed.rc == 1
    assert _since(replayed, bodies) == []
    results = _results(replayed)
    assert results["mock-1-1-0"] == (False, "echo:a", None)
    assert results["mock-1-1-1"][2] == "CASSETTE_EXTRA_CALL"
    assert "2 selected calls, 1 consumed, 0 unconsumed, poisoned: yes" in replayed.stderr
    assert "dsh-sidecar: CASSETTE_EXTRA_CALL: echo at root/1, ordinal 1: extra call, " \
        "the cassette holds 1 calls" in replayed.stderr


def test_records_left_unconsumed_fail_the_replay(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh)
    recorded = recorder.run('/mock run [echo({"text": "a"}) echo({"text": "b"})]')
    assert recorded.rc == 0, recorded.stderr
    bodies = recorded.bodies()

    replayed = replayer.run('/mock run echo({"text": "a"})')

    assert replayed.rc == 1
    assert replayed.stdout.strip() == "mock run complete: 1 step, 1 tool call"
    assert _since(replayed, bodies) == []
    assert "1 consumed, 1 unconsumed, poisoned: no" in replayed.stderr
    assert "dsh-sidecar: CASSETTE_UNCONSUMED: 1 recorded calls not consumed, " \
        "first echo at root/1, ordinal 1" in replayed.stderr


@pytest.mark.parametrize(("existing", "absent"), [(CASSETTE, PARTIAL), (PARTIAL, CASSETTE)])
def test_recording_refuses_to_start_over_an_existing_file(
    make_dsh: MakeDsh, existing: str, absent: str,
) -> None:
    recorder, _ = _pair(make_dsh)
    content = b'{"not":"a cassette"}\nsecond line without newline'
    (recorder.cwd / existing).write_bytes(content)

    run = recorder.run('/mock run echo({"text": "hi"})')

    assert run.rc == 1
    assert f"CASSETTE_EXISTS: {existing} already exists; recording never overwrites" in run.stderr
    assert (recorder.cwd / existing).read_bytes() == content
    assert not (recorder.cwd / absent).exists()
    assert run.bodies() == []


def test_killing_dsh_mid_recording_keeps_an_unverifiable_partial(make_dsh: MakeDsh) -> None:
    recorder, _ = _pair(make_dsh, ["sleepy"])
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
    assert verify.stdout.startswith("CASSETTE_INVALID: missing complete tail frame")
    assert str(recorder.cwd) not in verify.stdout + verify.stderr


def _exited(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_a_changed_value_is_a_mismatch_whose_diagnostics_echo_no_raw_arguments_or_paths(
    make_dsh: MakeDsh,
) -> None:
    recorder, replayer = _pair(make_dsh)
    recorded = recorder.run('/mock run echo({"text": "sk-live-RECORDED-4f9a2c"})')
    assert recorded.rc == 0, recorded.stderr
    bodies = recorded.bodies()

    replayed = replayer.run('/mock run echo({"text": "sk-live-REPLAYED-8c2e7d"})')

    assert replayed.rc == 1
    assert _since(replayed, bodies) == []
    assert "poisoned: yes" in replayed.stderr
    assert "CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:" in replayed.stderr
    diagnostics = replayed.stderr + _results(replayed)["mock-1-1-0"][1]
    for secret in ("sk-live", "RECORDED-4f9a2c", "REPLAYED-8c2e7d"):
        assert secret not in diagnostics
    assert str(replayer.cwd) not in diagnostics
    assert str(replayer.cwd.parent) not in diagnostics


def test_unselected_tools_run_untouched_in_record_and_replay(make_dsh: MakeDsh) -> None:
    recorder, replayer = _pair(make_dsh, ["echo"])
    task = '/mock run [echo({"text": "a"}) sleepy({"label": "free", "ms": 1})]'
    recorded = recorder.run(task)
    assert recorded.rc == 0, recorded.stderr
    assert sorted(recorded.bodies()) == ["echo", "sleepy"]
    inspect = json.loads(_cli("inspect", str(recorder.cwd / CASSETTE), "--json").stdout)
    assert (inspect["calls"], inspect["tools"]) == (1, {"echo": 1})
    bodies = recorded.bodies()

    replayed = replayer.run(task)

    assert replayed.rc == 0, replayed.stderr
    assert _since(replayed, bodies) == ["sleepy"]
    assert _executes(replayed, "action") == [("echo", "serve"), ("sleepy", "next")]
    assert _results(replayed) == {
        "mock-1-1-0": (False, "echo:a", None), "mock-1-1-1": (False, "slept:free", None),
    }
    assert "1 selected calls, 1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
