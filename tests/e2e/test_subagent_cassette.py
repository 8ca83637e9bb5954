"""The subagent cassette through real headless DSH rc.8 and a real ``spawn`` child.

A parent mock turn calls the real ``subagent`` tool; the child's own prompt is a ``/mock run``
text, so the child is mock-driven too and runs real tool bodies (``tool-bodies.log``). Record
forwards ``start()`` to the real in-process ``spawn`` provider, which writes a child session log
(header ``origin: subagent``); replay returns the recorded outcome with no child at all, so the
test reads child session logs and tool bodies to tell the two apart.

Two deployments are exercised: transparent (the real provider renamed ``spawn-upstream``, the
cassette registered as ``spawn``) and separate name (the cassette registered as ``cassette``,
the ``subagent`` row re-pointed to it). The tool row runs ``backgroundMode: one-shot`` except in
the continuable case, which a recording cannot capture.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dshrun import DSH_HOME, ROOT, Dsh, Run, read_session

MakeDsh = Callable[..., Dsh]
SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
CASSETTE = "sub.cassette.jsonl"
CHILD_PROMPT = '/mock run echo({"text": "from child"})'
RENAMED_SPAWN = '- {"id": "subagent-spawn-in-process", "config": {"providerName": "spawn-upstream"}}\n'


def _tool_row(provider: str, **config: Any) -> str:
    row = {"id": "tool-subagent", "config": {"provider": provider, "toolName": "subagent", **config}}
    return f"- {json.dumps(row)}\n"


def _transparent(mode: str) -> dict[str, Any]:
    """``make_dsh`` arguments of the transparent deployment."""
    return {
        "sidecar": {"subagentCassette": {"mode": mode, "file": CASSETTE, "provider": {"transparent": True}}},
        "extra_patch": RENAMED_SPAWN + _tool_row("spawn", backgroundMode="one-shot"),
    }


def _separate(mode: str) -> dict[str, Any]:
    """``make_dsh`` arguments of the separate-name deployment."""
    provider = {"cassette": "cassette", "upstream": "spawn"}
    return {
        "sidecar": {"subagentCassette": {"mode": mode, "file": CASSETTE, "provider": provider}},
        "extra_patch": _tool_row("cassette", backgroundMode="one-shot"),
    }


def _call(prompt: str, *, background: bool | None = False) -> str:
    args: dict[str, Any] = {"description": "audit", "prompt": prompt}
    if background is not None:
        args["run_in_background"] = background
    return f"subagent({json.dumps(args)})"


def _task(*prompts: str) -> str:
    """A parent mock turn delegating ``prompts`` (a parallel group when several)."""
    calls = [_call(p) for p in prompts]
    return f"/mock run {calls[0]}" if len(calls) == 1 else f"/mock run [{' '.join(calls)}]"


def _session_logs(cwd: Path) -> list[list[dict[str, Any]]]:
    """Every session log DSH wrote for ``cwd``, root and child sessions, oldest first."""
    found = []
    for path in DSH_HOME.glob("sessions/*/*/session.jsonl*"):
        events = read_session(path)
        if events and events[0].get("cwd") == str(cwd):
            found.append((events[0].get("createdAt", 0), str(path), events))
    return [events for _, _, events in sorted(found, key=lambda item: item[:2])]


def _children(cwd: Path) -> list[list[dict[str, Any]]]:
    return [log for log in _session_logs(cwd) if log[0].get("origin") == "subagent"]


def _subagent_results(run: Run) -> dict[str, tuple[bool, str]]:
    """``callId -> (isError, text)`` of the subagent results in ``run``'s own root session."""
    out = {}
    for event in run.sessions()[-1]:
        if event["type"] != "tool/result":
            continue
        for block in event["data"]["message"]["content"]:
            text = "".join(part.get("text", "") for part in block["content"])
            out[block["toolCallId"]] = (block.get("isError", False), text)
    return out


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SIDECAR_CLI, "subagent-cassette", *args], capture_output=True, text=True, timeout=30, check=False
    )


def _with_cassette(make_dsh: MakeDsh, source: Path, **kwargs: Any) -> Dsh:
    """A fresh cwd holding a copy of ``source`` as its cassette."""
    dsh = make_dsh(**kwargs)
    shutil.copyfile(source, dsh.cwd / CASSETTE)
    return dsh


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dsh, Run]:
    """One transparent recording of a real ``spawn`` child, shared by the replay tests."""
    cwd = tmp_path_factory.mktemp("recording")
    dsh = Dsh(cwd=cwd, **_transparent("record"))
    return dsh, dsh.run(_task(CHILD_PROMPT))


def test_a_recorded_child_replays_with_no_child_session(recorded: tuple[Dsh, Run]) -> None:
    recorder, record = recorded
    assert record.rc == 0, record.stderr
    assert record.bodies() == ["echo"]
    assert len(_children(recorder.cwd)) == 1
    cassette = recorder.cwd / CASSETTE
    verified = _cli("verify", str(cassette))
    assert verified.returncode == 0, verified.stderr
    assert "1 interaction(s), chain intact" in verified.stdout
    logs_before = len(_session_logs(recorder.cwd))
    cassette_bytes = cassette.read_bytes()

    replay = Dsh(cwd=recorder.cwd, **_transparent("replay")).run(_task(CHILD_PROMPT))

    assert replay.rc == 0, replay.stderr
    assert "1 replayed, 0 missed, 0 unconsumed" in replay.stderr
    assert replay.bodies() == ["echo"]
    assert len(_session_logs(recorder.cwd)) == logs_before + 1
    assert len(_children(recorder.cwd)) == 1
    assert replay.stdout == record.stdout
    assert list(_subagent_results(replay).values()) == [(False, "mock run complete: 1 step, 1 tool call")]
    assert _subagent_results(replay) == _subagent_results(record)
    assert cassette.read_bytes() == cassette_bytes


def test_the_separate_name_setup_records_and_replays(make_dsh: MakeDsh) -> None:
    recorder = make_dsh(**_separate("record"))
    record = recorder.run(_task(CHILD_PROMPT))
    assert record.rc == 0, record.stderr
    assert record.bodies() == ["echo"]
    assert len(_children(recorder.cwd)) == 1
    assert _cli("verify", str(recorder.cwd / CASSETTE)).returncode == 0
    summary = json.loads(_cli("inspect", "--json", str(recorder.cwd / CASSETTE)).stdout)
    assert (summary["provider"]["cassette"], summary["provider"]["upstream"]) == ("cassette", "spawn")

    replay = Dsh(cwd=recorder.cwd, **_separate("replay")).run(_task(CHILD_PROMPT))

    assert replay.rc == 0, replay.stderr
    assert replay.bodies() == ["echo"]
    assert len(_children(recorder.cwd)) == 1
    assert _subagent_results(replay) == _subagent_results(record)


def test_replay_from_another_directory_still_matches(make_dsh: MakeDsh, recorded: tuple[Dsh, Run]) -> None:
    recorder, record = recorded
    elsewhere = _with_cassette(make_dsh, recorder.cwd / CASSETTE, **_transparent("replay"))
    assert elsewhere.cwd != recorder.cwd

    replay = elsewhere.run(_task(CHILD_PROMPT))

    assert replay.rc == 0, replay.stderr
    assert replay.bodies() == []
    assert _children(elsewhere.cwd) == []
    assert len(_session_logs(elsewhere.cwd)) == 1
    assert _subagent_results(replay) == _subagent_results(record)


def _delegations(dsh: Dsh, prompts: dict[str, str]) -> str:
    """Write each label's prompt to a file and return a parent task delegating them all.

    The prompts live in files read by the ``delegate`` tool, so the parent's own history (its
    ``/mock run`` text) is the same when only a child's request changes.
    """
    calls = []
    for label, prompt in prompts.items():
        (dsh.cwd / f"{label}.prompt").write_text(prompt)
        calls.append(f"delegate({json.dumps({'label': label, 'promptFile': f'{label}.prompt'})})")
    return f"/mock run [{' '.join(calls)}]"


def test_a_changed_request_is_a_structured_miss(make_dsh: MakeDsh) -> None:
    recorder = make_dsh(**_transparent("record"))
    recorded = recorder.run(_delegations(recorder, {"audit": CHILD_PROMPT}))
    assert recorded.rc == 0, recorded.stderr
    replayer = _with_cassette(make_dsh, recorder.cwd / CASSETTE, **_transparent("replay"))

    run = replayer.run(_delegations(replayer, {"audit": '/mock run echo({"text": "a different child"})'}))

    assert run.rc == 1
    assert "CASSETTE_MISS" in run.stderr
    assert run.bodies() == ["delegate"]
    assert _children(replayer.cwd) == []
    # Only the delegation's own request changed; the parent's history before it is identical.
    assert "differed: request;" in run.stderr


SLOW = '/mock run sleepy({"label": "slow", "ms": 700})'
FAST = '/mock run [sleepy({"label": "fast", "ms": 10}) echo({"text": "fast"})]'
PAIR_RESULTS = {
    "mock-1-1-0": (False, "mock run complete: 1 step, 1 tool call"),
    "mock-1-1-1": (False, "mock run complete: 1 step, 2 tool calls"),
}


@pytest.fixture(scope="module")
def recorded_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dsh, Run]:
    """Two concurrent children recorded from one parallel group; the second finishes first."""
    dsh = Dsh(cwd=tmp_path_factory.mktemp("pair"), **_transparent("record"))
    return dsh, dsh.run(_task(SLOW, FAST))


def test_two_concurrent_children_each_replay_their_own_outcome(recorded_pair: tuple[Dsh, Run]) -> None:
    recorder, record = recorded_pair
    assert record.rc == 0, record.stderr
    assert sorted(record.bodies()) == ["echo", "sleepy", "sleepy"]
    lines = [json.loads(line) for line in (recorder.cwd / CASSETTE).read_text().splitlines()[1:]]
    # The second call finished first: its interaction was written first.
    assert [line["sequence"] for line in lines] == [2, 1]
    assert _subagent_results(record) == PAIR_RESULTS

    replay = Dsh(cwd=recorder.cwd, **_transparent("replay")).run(_task(SLOW, FAST))

    assert replay.rc == 0, replay.stderr
    assert "2 replayed, 0 missed, 0 unconsumed" in replay.stderr
    assert sorted(replay.bodies()) == ["echo", "sleepy", "sleepy"]
    assert len(_children(recorder.cwd)) == 2
    assert _subagent_results(replay) == PAIR_RESULTS


def test_a_miss_in_a_parallel_group_names_the_changed_call_not_its_sibling(make_dsh: MakeDsh) -> None:
    prompts = {"slow": SLOW, "fast": '/mock run echo({"text": "fast"})'}
    recorder = make_dsh(**_transparent("record"))
    assert recorder.run(_delegations(recorder, prompts)).rc == 0
    replayer = _with_cassette(make_dsh, recorder.cwd / CASSETTE, **_transparent("replay"))

    run = replayer.run(_delegations(replayer, {**prompts, "fast": '/mock run echo({"text": "changed sibling"})'}))

    assert run.rc == 1
    (miss,) = [line for line in run.stderr.splitlines() if "CASSETTE_MISS" in line and "(differed:" in line]
    assert "callKey root/fast-" in miss
    assert "differed: request;" in miss
    results = sorted(text for _, text in _subagent_results(run).values())
    assert results[-1] == "completed:mock run complete: 1 step, 1 tool call"


def test_a_continuable_background_delegation_records_nothing_and_fails(make_dsh: MakeDsh) -> None:
    dsh = make_dsh(
        sidecar={"subagentCassette": {"mode": "record", "file": CASSETTE, "provider": {"transparent": True}}},
        extra_patch=RENAMED_SPAWN,
    )

    run = dsh.run(f"/mock run {_call(CHILD_PROMPT, background=None)}")

    assert run.rc == 1
    assert "NOTHING_RECORDED" in run.stderr
    assert not (dsh.cwd / CASSETTE).exists()
    assert not list(dsh.cwd.glob(f"{CASSETTE}*"))
    (is_error, text), = _subagent_results(run).values()
    assert not is_error and text.startswith("started subagent")


def test_diff_finds_two_recordings_of_one_run_equivalent_and_a_changed_prompt_different(
    make_dsh: MakeDsh, recorded: tuple[Dsh, Run]
) -> None:
    recorder, _ = recorded
    again = make_dsh(**_transparent("record"))
    changed = make_dsh(**_transparent("record"))

    runs = [again.run(_task(CHILD_PROMPT)), changed.run(_task('/mock run echo({"text": "zebra"})'))]

    assert [r.rc for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    same = _cli("diff", str(recorder.cwd / CASSETTE), str(again.cwd / CASSETTE))
    different = _cli("diff", str(recorder.cwd / CASSETTE), str(changed.cwd / CASSETTE))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("equivalent: 1 unchanged")
    assert different.returncode == 1, different.stdout + different.stderr
    assert different.stdout.startswith("different: 0 unchanged, 1 added, 1 removed")
    assert "from child" not in different.stdout and "zebra" not in different.stdout


def test_the_shipped_one_shot_patch_makes_the_default_tool_recordable(make_dsh: MakeDsh) -> None:
    patch = _cli("one-shot-patch")
    assert patch.returncode == 0
    dsh = make_dsh(
        sidecar={"subagentCassette": {"mode": "record", "file": CASSETTE, "provider": {"transparent": True}}},
        extra_patch=RENAMED_SPAWN + patch.stdout,
    )

    # run_in_background omitted: the default that would go through startContinuable.
    run = dsh.run(f"/mock run {_call(CHILD_PROMPT, background=None)}")

    assert run.rc == 0, run.stderr
    assert run.bodies() == ["echo"]
    assert _cli("verify", str(dsh.cwd / CASSETTE)).returncode == 0


def _script(dsh: Dsh, *steps: dict[str, Any]) -> str:
    (dsh.cwd / "parent.json").write_text(json.dumps({"type": "dsh-mock-script", "version": 1, "steps": list(steps)}))
    return "/mock replay parent.json"


def test_an_abort_while_a_replayed_run_is_pending_settles_it_as_aborted(make_dsh: MakeDsh) -> None:
    delegate = {"tool": "delegate", "args": {"label": "audit", "promptFile": "audit.prompt"}}
    recorder = make_dsh(**_transparent("record"))
    (recorder.cwd / "audit.prompt").write_text(CHILD_PROMPT)
    sleepy = {"tool": "sleepy", "args": {"label": "x", "ms": 1}}
    recorded = recorder.run(_script(recorder, {"parallel": [sleepy, delegate]}))
    assert recorded.rc == 0, recorded.stderr
    replay = _transparent("replay")
    # Recorded timing slowed 1000x: the replayed result would settle minutes later.
    replay["sidecar"]["subagentCassette"].update(timing="recorded", speed=0.001)
    replayer = _with_cassette(make_dsh, recorder.cwd / CASSETTE, **replay)
    (replayer.cwd / "audit.prompt").write_text(CHILD_PROMPT)

    run = replayer.run(_script(replayer, {"parallel": [{"tool": "cancel_later", "args": {"ms": 300}}, delegate]}))

    assert run.rc == 1
    assert run.elapsed < 8
    assert run.bodies() == ["cancel_later", "delegate"]
    assert _children(replayer.cwd) == []
    assert [e["data"]["reason"]["kind"] for e in run.events("turn/end")] == ["aborted"]
