"""The subagent cassette through real headless DSH rc.8 and a real ``spawn`` child.

A parent mock turn calls the real ``subagent`` tool; the child's own prompt is a ``/mock run``
text, so the child is mock-driven too and runs real tool bodies (``tool-bodies.log``). Record
forwards ``start()`` to the real in-process ``spawn`` provider, which writes a child session log
(header ``origin: subagent``); replay returns the recorded outcome with no child at all, so the
tests count child sessions (``RunResult.child_session_ids`` and the cwd's session folders) and
tool bodies to tell the two apart. Every run goes through the run API: ``record_mode="once"``
records a cassette, ``"none"`` replays it.

Two deployments are exercised: transparent (``SubagentCassette``'s default: the real provider
renamed ``spawn-upstream``, the cassette registered as ``spawn``) and separate name (the
cassette registered as ``cassette``, the ``subagent`` row re-pointed to it by a patch file). The
tool row runs ``backgroundMode: one-shot`` except in the continuable case, which a recording
cannot capture.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from dshrun import ROOT, tool_bodies

from dsh_sidecar.bridge.api.pytest_plugin import DshRunner
from dsh_sidecar.bridge.api.run import RecordMode, Row, RunResult, SubagentCassette, run
from dsh_sidecar.bridge.host.toolchain import HostEnv
from dsh_sidecar.python_core.canonical import canonical_bytes, digest
from dsh_sidecar.python_core.session_log import project_key

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
CASSETTE = "sub.cassette.jsonl"
CHILD_PROMPT = '/mock run echo({"text": "from child"})'
TOOLS = [Row("example-tools", "dsh-example-tools")]
TRANSPARENT = SubagentCassette(file=CASSETTE)
SEPARATE = SubagentCassette(file=CASSETTE, provider={"cassette": "cassette", "upstream": "spawn"}, one_shot=False)


def _tool_row(provider: str, **config: Any) -> str:
    row = {"id": "tool-subagent", "config": {"provider": provider, "toolName": "subagent", **config}}
    return f"- {json.dumps(row)}\n"


def _run(
    host: HostEnv, cwd: Path, cassette: SubagentCassette, record_mode: RecordMode, task: str | None = None, *,
    script: str | None = None, patches: Sequence[Path] = (), trace: str | None = None,
) -> RunResult:
    """One run in ``cwd`` with the example tools and ``cassette``: ``once`` records, ``none`` replays."""
    return run(task, script=script, cwd=cwd, host=host, rows=TOOLS, subagent_cassette=cassette,
               record_mode=record_mode, patches=patches, trace=trace)


def _fixture_run(dsh: DshRunner, cassette: SubagentCassette, record_mode: RecordMode, task: str | None = None, *,
                 cwd: Path | None = None, script: str | None = None, patches: Sequence[Path] = ()) -> RunResult:
    """``_run`` in the test's cwd (or ``cwd``), listed in the plugin's failure report.

    The fixture's ``subagents=`` names a new cassette per run next to the test file, so a
    record/replay pair inside one test calls the run API directly.
    """
    result = _run(dsh.host, cwd or dsh.cwd, cassette, record_mode, task, script=script, patches=patches)
    dsh.runs.append(result)
    return result


def _call(prompt: str, *, background: bool | None = False) -> str:
    args: dict[str, Any] = {"description": "audit", "prompt": prompt}
    if background is not None:
        args["run_in_background"] = background
    return f"subagent({json.dumps(args)})"


def _task(*prompts: str) -> str:
    """A parent mock turn delegating ``prompts`` (a parallel group when several)."""
    calls = [_call(p) for p in prompts]
    return f"/mock run {calls[0]}" if len(calls) == 1 else f"/mock run [{' '.join(calls)}]"


def _sessions(host: HostEnv, cwd: Path) -> int:
    """How many sessions (root and child) DSH made for ``cwd``: one path, one listing."""
    folder = host.dsh_home / "sessions" / project_key(str(cwd))
    return len(os.listdir(folder)) if folder.is_dir() else 0


def _results(result: RunResult) -> dict[str, tuple[bool, str]]:
    """``callId -> (isError, text)`` of the tool results in the run's own root session."""
    return {r.call_id: (r.is_error, r.output) for r in result.tool_results}


def _replayed(result: RunResult) -> tuple[int, int, int]:
    """``(consumed, missed, unconsumed)`` of the run's replaying subagent cassette."""
    s = result.subagent_cassette
    assert s is not None and (s.mode, s.file) == ("replay", CASSETTE)
    return s.consumed, s.missed, s.unconsumed


def _published(result: RunResult) -> bool:
    s = result.subagent_cassette
    assert s is not None and (s.mode, s.file) == ("record", CASSETTE)
    return s.published


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SIDECAR_CLI, "subagent-cassette", *args], capture_output=True, text=True, timeout=30, check=False
    )


def _elsewhere(tmp_path: Path, source: Path, name: str = "elsewhere") -> Path:
    """A fresh cwd holding a copy of ``source`` as its cassette."""
    cwd = tmp_path / name
    cwd.mkdir()
    shutil.copyfile(source, cwd / CASSETTE)
    return cwd


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory, dsh_host: HostEnv) -> tuple[Path, RunResult]:
    """One transparent recording of a real ``spawn`` child, shared by the replay tests."""
    cwd = tmp_path_factory.mktemp("recording")
    return cwd, _run(dsh_host, cwd, TRANSPARENT, "once", _task(CHILD_PROMPT), trace="record.html")


def test_a_recorded_child_replays_with_no_child_session(recorded: tuple[Path, RunResult], dsh_host: HostEnv) -> None:
    cwd, record = recorded
    assert record.ok, record.explain()
    assert _published(record)
    assert tool_bodies(cwd) == ["echo"]
    assert len(record.child_session_ids) == 1
    assert _sessions(dsh_host, cwd) == 2
    # The trace nests the child session with its own call, and says the parent's was a delegation.
    (shown,) = json.loads((cwd / "record.json").read_text())["runs"][0]["subagents"]
    assert shown["session"] == record.child_session_ids[0]
    assert [(c["tool"], c["source"]) for c in shown["calls"]] == [("echo", "live")]
    cassette = cwd / CASSETTE
    verified = _cli("verify", str(cassette))
    assert verified.returncode == 0, verified.stderr
    assert "1 interaction(s), chain intact" in verified.stdout
    sessions_before = _sessions(dsh_host, cwd)
    cassette_bytes = cassette.read_bytes()

    replay = _run(dsh_host, cwd, TRANSPARENT, "none", _task(CHILD_PROMPT))

    assert replay.ok, replay.explain()
    assert "1 replayed, 0 missed, 0 unconsumed" in replay.stderr
    assert _replayed(replay) == (1, 0, 0)
    assert tool_bodies(cwd) == ["echo"]
    assert replay.child_session_ids == []
    assert _sessions(dsh_host, cwd) == sessions_before + 1
    assert replay.stdout == record.stdout
    assert list(_results(replay).values()) == [(False, "mock run complete: 1 step, 1 tool call")]
    assert _results(replay) == _results(record)
    assert cassette.read_bytes() == cassette_bytes


def _sha256(record: dict[str, Any]) -> str:
    """The format's digest, computed independently of the product (ASCII keys, plain numbers)."""
    body = {k: v for k, v in record.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_a_real_recording_has_the_documented_shapes(recorded: tuple[Path, RunResult]) -> None:
    # What another implementation reads: exact key sets, digests and chain, timing at
    # microsecond precision (the host measures with performance.now()), canonical lines.
    lines = (recorded[0] / CASSETTE).read_bytes().splitlines()
    header, interaction = (json.loads(line) for line in lines)
    assert set(header) == {"kind", "format", "version", "cassetteId", "createdAt", "target", "provider",
                           "requestStorage", "redactSecrets", "redactionPatterns", "hash"}
    assert (header["kind"], header["format"], header["version"], header["target"]) == (
        "cassette/header", "dsh-subagent-cassette", 2, {"dshSubagent": "0.1.0-rc.8"})
    assert set(header["provider"]) == {"cassette", "upstream", "capabilities", "inheritsParentContext", "continuable"}
    assert set(header["provider"]["capabilities"]) == {"outputSchema", "depthLimit", "toolFilter", "persona"}
    assert (header["requestStorage"], header["redactSecrets"], header["redactionPatterns"]) == ("metadata", True, [])
    assert set(interaction) == {"kind", "sequence", "callKey", "parentKey", "parentContextFingerprint", "occurrence",
                                "requestFingerprint", "request", "timing", "published", "local", "outcome",
                                "previousHash", "hash"}
    assert (interaction["sequence"], interaction["occurrence"], interaction["parentKey"]) == (1, 1, "root")
    assert interaction["callKey"] == f"root/audit-{interaction['requestFingerprint'][7:19]}~1"
    assert interaction["request"]["storage"] == "metadata"
    assert set(interaction["request"]["metadata"]) <= {"label", "promptBlocks", "promptBytes", "hasOutputSchema",
                                                       "maxDepth", "childProvider", "childModel", "toolFilter",
                                                       "hasPersona"}
    assert interaction["request"]["metadata"]["promptBytes"] == len(CHILD_PROMPT.encode())
    timing = interaction["timing"]
    assert set(timing) <= {"startedAt", "startLatencyMs", "durationMs", "signalAbortedAtMs", "disposeCalledAtMs"}
    assert all(round(v, 3) == v for k, v in timing.items() if k != "startedAt"), timing
    assert 0 <= timing["startLatencyMs"] <= timing["durationMs"]
    assert (interaction["published"], interaction["local"]) == (True, True)
    outcome = interaction["outcome"]
    assert (set(outcome), outcome["kind"], outcome["redactions"]) == ({"kind", "result", "redactions"}, "result", 0)
    assert outcome["result"]["stopReason"] == "completed"
    assert header["hash"] == _sha256(header)
    assert (interaction["previousHash"], interaction["hash"]) == (header["hash"], _sha256(interaction))
    assert [json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
            for r in (header, interaction)] == lines


def test_replay_shows_the_host_the_recorded_provider_facts(
    dsh: DshRunner, tmp_path: Path, recorded: tuple[Path, RunResult],
) -> None:
    # The recording says its provider had no depth limit; the live spawn has one. Replay shows
    # the recorded facts, and rc.8's subagent tool (it always sends maxDepth) does not mount on
    # a provider without one: the delegation fails before any start().
    cwd = _elsewhere(tmp_path, recorded[0] / CASSETTE, "narrowed")
    header, interaction = (json.loads(line) for line in (cwd / CASSETTE).read_bytes().splitlines())
    header["provider"]["capabilities"]["depthLimit"] = False
    header["hash"] = digest({k: v for k, v in header.items() if k != "hash"})
    interaction["previousHash"] = header["hash"]
    interaction["hash"] = digest({k: v for k, v in interaction.items() if k != "hash"})
    (cwd / CASSETTE).write_bytes(b"".join(canonical_bytes(r) + b"\n" for r in (header, interaction)))
    assert _cli("verify", str(cwd / CASSETTE)).returncode == 0

    replay = _fixture_run(dsh, TRANSPARENT, "none", _task(CHILD_PROMPT), cwd=cwd)

    [(is_error, text)] = _results(replay).values()
    assert (is_error, text) == (True, 'Error: unknown tool "subagent"')
    assert _replayed(replay) == (0, 0, 1)
    assert replay.child_session_ids == [] and tool_bodies(cwd) == []


def test_a_child_that_failed_is_published_with_one_warning_and_replays_its_failure(dsh: DshRunner) -> None:
    task = _task('/mock run broken({"why": "on purpose"})')
    record = _fixture_run(dsh, TRANSPARENT, "once", task)
    assert record.exit_code == 1  # the parent's subagent call failed with its child
    assert _published(record)
    warnings = [line for line in record.stderr.splitlines() if "SUBAGENT_CHILD_FAILED" in line]
    assert len(warnings) == 1, record.stderr
    assert warnings[0].startswith("dsh-sidecar: SUBAGENT_CHILD_FAILED: 1 of 1 recorded child run(s) ended in an "
                                  "error (first: callKey root/audit-")
    assert warnings[0].endswith(", stopReason error); the cassette is published anyway and replays that failure; "
                                "if the child should succeed, fix it and re-record (record mode all)")
    assert "on purpose" not in warnings[0]
    assert tool_bodies(dsh.cwd) == ["broken"]

    replay = _fixture_run(dsh, TRANSPARENT, "none", task)
    assert _replayed(replay) == (1, 0, 0)
    assert replay.exit_code == 1 and tool_bodies(dsh.cwd) == ["broken"]
    assert _results(replay) == _results(record)
    assert "SUBAGENT_CHILD_FAILED" not in replay.stderr


def test_the_separate_name_setup_records_and_replays(dsh: DshRunner, tmp_path: Path) -> None:
    patch = tmp_path / "separate.patch.yml"
    patch.write_text(_tool_row("cassette", backgroundMode="one-shot"))
    record = _fixture_run(dsh, SEPARATE, "once", _task(CHILD_PROMPT), patches=[patch])
    assert record.ok, record.explain()
    assert tool_bodies(dsh.cwd) == ["echo"]
    assert len(record.child_session_ids) == 1
    assert _cli("verify", str(dsh.cwd / CASSETTE)).returncode == 0
    summary = json.loads(_cli("inspect", "--json", str(dsh.cwd / CASSETTE)).stdout)
    assert (summary["provider"]["cassette"], summary["provider"]["upstream"]) == ("cassette", "spawn")
    sessions_before = _sessions(dsh.host, dsh.cwd)

    replay = _fixture_run(dsh, SEPARATE, "none", _task(CHILD_PROMPT), patches=[patch])

    assert replay.ok, replay.explain()
    assert _replayed(replay) == (1, 0, 0)
    assert tool_bodies(dsh.cwd) == ["echo"]
    assert replay.child_session_ids == []
    assert _sessions(dsh.host, dsh.cwd) == sessions_before + 1
    assert _results(replay) == _results(record)


def test_replay_from_another_directory_still_matches(
    dsh: DshRunner, tmp_path: Path, recorded: tuple[Path, RunResult],
) -> None:
    recorder, record = recorded
    elsewhere = _elsewhere(tmp_path, recorder / CASSETTE)
    assert elsewhere != recorder

    replay = _fixture_run(dsh, TRANSPARENT, "none", _task(CHILD_PROMPT), cwd=elsewhere)

    assert replay.ok, replay.explain()
    assert tool_bodies(elsewhere) == []
    assert replay.child_session_ids == []
    assert _sessions(dsh.host, elsewhere) == 1
    assert _results(replay) == _results(record)


def test_a_hand_edited_cassette_is_refused_until_resealed_then_verifies_and_replays_the_edit(
    dsh: DshRunner, tmp_path: Path, recorded: tuple[Path, RunResult],
) -> None:
    cwd = _elsewhere(tmp_path, recorded[0] / CASSETTE, "edited")
    recorded_text = '"text":"mock run complete: 1 step, 1 tool call"'
    text = (cwd / CASSETTE).read_text()
    assert text.count(recorded_text) == 1
    (cwd / CASSETTE).write_text(text.replace(recorded_text, '"text":"mock run complete: edited by hand"'))
    refused = _cli("verify", str(cwd / CASSETTE))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == f"CASSETTE_INTEGRITY_ERROR: {CASSETTE}:2: interaction hash does not match\n"

    sealed = _cli("reseal", str(cwd / CASSETTE))

    assert (sealed.returncode, sealed.stderr) == (0, "")
    assert sealed.stdout == ("resealed: 1 interactions, 2 records, 1 lines rewritten; the file is now yours "
                             "(integrity proves only that nothing changed since this reseal)\n")
    verified = _cli("verify", str(cwd / CASSETTE))
    assert verified.returncode == 0 and "1 interaction(s), chain intact" in verified.stdout, verified.stderr
    replay = _fixture_run(dsh, TRANSPARENT, "none", _task(CHILD_PROMPT), cwd=cwd)
    assert replay.ok, replay.explain()
    assert _replayed(replay) == (1, 0, 0)
    assert list(_results(replay).values()) == [(False, "mock run complete: edited by hand")]
    assert replay.child_session_ids == [] and tool_bodies(cwd) == []


def _delegations(cwd: Path, prompts: dict[str, str]) -> str:
    """Write each label's prompt to a file and return a parent task delegating them all.

    The prompts live in files read by the ``delegate`` tool, so the parent's own history (its
    ``/mock run`` text) is the same when only a child's request changes.
    """
    calls = []
    for label, prompt in prompts.items():
        (cwd / f"{label}.prompt").write_text(prompt)
        calls.append(f"delegate({json.dumps({'label': label, 'promptFile': f'{label}.prompt'})})")
    return f"/mock run [{' '.join(calls)}]"


def test_a_changed_request_is_a_structured_miss(dsh: DshRunner, tmp_path: Path) -> None:
    recorded = _fixture_run(dsh, TRANSPARENT, "once", _delegations(dsh.cwd, {"audit": CHILD_PROMPT}))
    assert recorded.ok, recorded.explain()
    replayer = _elsewhere(tmp_path, dsh.cwd / CASSETTE, "replayer")

    result = _fixture_run(dsh, TRANSPARENT, "none", cwd=replayer, task=_delegations(
        replayer, {"audit": '/mock run echo({"text": "a different child"})'}))

    assert result.exit_code == 1
    assert "CASSETTE_MISS" in result.stderr
    assert [e.code for e in result.errors] == ["CASSETTE_MISS", "CASSETTE_UNCONSUMED"]
    assert result.errors[0].message.startswith("no recorded interaction for root/audit-")
    assert result.errors[0].message.endswith(": request differed")
    assert _replayed(result)[1] == 1
    assert tool_bodies(replayer) == ["delegate"]
    assert result.child_session_ids == []
    assert _sessions(dsh.host, replayer) == 1
    # Only the delegation's own request changed; the parent's history before it is identical.
    assert "differed: request;" in result.stderr


SLOW = '/mock run sleepy({"label": "slow", "ms": 700})'
FAST = '/mock run [sleepy({"label": "fast", "ms": 10}) echo({"text": "fast"})]'
PAIR_RESULTS = {
    "mock-1-1-0": (False, "mock run complete: 1 step, 1 tool call"),
    "mock-1-1-1": (False, "mock run complete: 1 step, 2 tool calls"),
}


@pytest.fixture(scope="module")
def recorded_pair(tmp_path_factory: pytest.TempPathFactory, dsh_host: HostEnv) -> tuple[Path, RunResult]:
    """Two concurrent children recorded from one parallel group; the second finishes first."""
    cwd = tmp_path_factory.mktemp("pair")
    return cwd, _run(dsh_host, cwd, TRANSPARENT, "once", _task(SLOW, FAST))


def test_two_concurrent_children_each_replay_their_own_outcome(
    recorded_pair: tuple[Path, RunResult], dsh_host: HostEnv,
) -> None:
    cwd, record = recorded_pair
    assert record.ok, record.explain()
    assert sorted(tool_bodies(cwd)) == ["echo", "sleepy", "sleepy"]
    assert len(record.child_session_ids) == 2
    lines = [json.loads(line) for line in (cwd / CASSETTE).read_text().splitlines()[1:]]
    # The second call finished first: its interaction was written first.
    assert [line["sequence"] for line in lines] == [2, 1]
    assert _results(record) == PAIR_RESULTS
    sessions_before = _sessions(dsh_host, cwd)

    replay = _run(dsh_host, cwd, TRANSPARENT, "none", _task(SLOW, FAST))

    assert replay.ok, replay.explain()
    assert "2 replayed, 0 missed, 0 unconsumed" in replay.stderr
    assert _replayed(replay) == (2, 0, 0)
    assert sorted(tool_bodies(cwd)) == ["echo", "sleepy", "sleepy"]
    assert replay.child_session_ids == []
    assert _sessions(dsh_host, cwd) == sessions_before + 1
    assert _results(replay) == PAIR_RESULTS


def test_a_miss_in_a_parallel_group_names_the_changed_call_not_its_sibling(dsh: DshRunner, tmp_path: Path) -> None:
    prompts = {"slow": SLOW, "fast": '/mock run echo({"text": "fast"})'}
    assert _fixture_run(dsh, TRANSPARENT, "once", _delegations(dsh.cwd, prompts)).ok
    replayer = _elsewhere(tmp_path, dsh.cwd / CASSETTE, "replayer")

    result = _fixture_run(dsh, TRANSPARENT, "none", cwd=replayer, task=_delegations(
        replayer, {**prompts, "fast": '/mock run echo({"text": "changed sibling"})'}))

    assert result.exit_code == 1
    (miss,) = [line for line in result.stderr.splitlines() if "CASSETTE_MISS" in line and "(differed:" in line]
    assert "callKey root/fast-" in miss
    assert "differed: request;" in miss
    results = sorted(text for _, text in _results(result).values())
    assert results[-1] == "completed:mock run complete: 1 step, 1 tool call"


def test_a_continuable_background_delegation_records_nothing_and_fails(dsh: DshRunner) -> None:
    continuable = SubagentCassette(file=CASSETTE, one_shot=False)

    result = _fixture_run(dsh, continuable, "once", f"/mock run {_call(CHILD_PROMPT, background=None)}")

    assert result.exit_code == 1
    assert "NOTHING_RECORDED" in result.stderr
    assert not _published(result)
    assert not (dsh.cwd / CASSETTE).exists()
    assert [name for name in os.listdir(dsh.cwd) if CASSETTE in name] == []
    (is_error, text), = _results(result).values()
    assert not is_error and text.startswith("started subagent")


def test_diff_finds_two_recordings_of_one_run_equivalent_and_a_changed_prompt_different(
    dsh: DshRunner, tmp_path: Path, recorded: tuple[Path, RunResult],
) -> None:
    recorder, _ = recorded
    again, changed = tmp_path / "again", tmp_path / "changed"
    again.mkdir()
    changed.mkdir()

    runs = [
        _fixture_run(dsh, TRANSPARENT, "once", _task(CHILD_PROMPT), cwd=again),
        _fixture_run(dsh, TRANSPARENT, "once", _task('/mock run echo({"text": "zebra"})'), cwd=changed),
    ]

    assert [r.exit_code for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert [_published(r) for r in runs] == [True, True]
    same = _cli("diff", str(recorder / CASSETTE), str(again / CASSETTE))
    different = _cli("diff", str(recorder / CASSETTE), str(changed / CASSETTE))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("equivalent: 1 unchanged")
    assert different.returncode == 2, different.stdout + different.stderr
    assert different.stdout.startswith("different: 0 unchanged, 1 added, 1 removed")
    assert "from child" not in different.stdout and "zebra" not in different.stdout


def test_the_shipped_one_shot_patch_makes_the_default_tool_recordable(dsh: DshRunner, tmp_path: Path) -> None:
    patch = _cli("one-shot-patch")
    assert patch.returncode == 0
    (tmp_path / "one-shot.patch.yml").write_text(patch.stdout)
    # one_shot=False: the patch under test is the CLI's output, not the API's own copy.
    cassette = SubagentCassette(file=CASSETTE, one_shot=False)

    # run_in_background omitted: the default that would go through startContinuable.
    result = _fixture_run(dsh, cassette, "once", f"/mock run {_call(CHILD_PROMPT, background=None)}",
                          patches=[tmp_path / "one-shot.patch.yml"])

    assert result.ok, result.explain()
    assert _published(result)
    assert tool_bodies(dsh.cwd) == ["echo"]
    assert _cli("verify", str(dsh.cwd / CASSETTE)).returncode == 0


def _script(cwd: Path, *steps: dict[str, Any]) -> str:
    # One file name for record and replay: the parent's `/mock replay` text is part of its history.
    (cwd / "parent.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": list(steps)}))
    return "parent.json"


def test_an_abort_while_a_replayed_run_is_pending_settles_it_as_aborted(dsh: DshRunner, tmp_path: Path) -> None:
    delegate = {"tool": "delegate", "args": {"label": "audit", "promptFile": "audit.prompt"}}
    (dsh.cwd / "audit.prompt").write_text(CHILD_PROMPT)
    sleepy = {"tool": "sleepy", "args": {"label": "x", "ms": 1}}
    recorded = _fixture_run(dsh, TRANSPARENT, "once", script=_script(dsh.cwd, {"parallel": [sleepy, delegate]}))
    assert recorded.ok, recorded.explain()
    # Recorded timing slowed 1000x: the replayed result would settle minutes later.
    slowed = SubagentCassette(file=CASSETTE, options={"timing": "recorded", "speed": 0.001})
    replayer = _elsewhere(tmp_path, dsh.cwd / CASSETTE, "replayer")
    (replayer / "audit.prompt").write_text(CHILD_PROMPT)
    cancel = {"tool": "cancel_later", "args": {"ms": 300}}

    result = _fixture_run(dsh, slowed, "none", cwd=replayer, script=_script(replayer, {"parallel": [cancel, delegate]}))

    assert result.exit_code == 1
    assert result.duration_ms < 8000
    assert tool_bodies(replayer) == ["cancel_later", "delegate"]
    assert result.child_session_ids == []
    assert _sessions(dsh.host, replayer) == 1
    assert [e["data"]["reason"]["kind"] for e in result.events if e["type"] == "turn/end"] == ["aborted"]
