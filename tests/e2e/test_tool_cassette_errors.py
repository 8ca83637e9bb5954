"""Tool cassette failures as a user reads them on stderr, through real headless DSH.

Each test checks the exact shape: how many lines, the named code, the field or the JSON
pointers, the one ``fix:`` line, and the exit code. Runs go through ``dshrun.Dsh`` (the raw
row) so the stderr is DSH's own, not the run API's account of it.

The mock prints ``TOOL_FAILED: …`` for the refused call (the mock's failure report, tested with
the mock); these tests leave those lines out and check every cassette line exactly.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable

import msgspec
import pytest
from dshrun import ROOT, Dsh, Run

from dsh_sidecar.python_core.cassette_io import Chain
from dsh_sidecar.python_core.tool_cassette.format import ResultFrame, decode_frame

MakeDsh = Callable[..., Dsh]
CASSETTE = "c.ndjson"
TOOL = str(ROOT / ".venv" / "bin" / "dsh-tool-cassette")
FIX_RERECORD = (
    "dsh-sidecar: fix: if the new calls are intended, re-record: delete c.ndjson and run the same "
    'task with toolCassette.mode: record (run API and pytest: record_mode "all")'
)


def _row(mode: str, file: str = CASSETTE, include: tuple[str, ...] = ("echo",)) -> dict[str, object]:
    return {"toolCassette": {"mode": mode, "file": file, "include": list(include)}}


def _cassette_lines(run: Run) -> list[str]:
    """Stderr without the mock's own report of the refused step."""
    return [line for line in run.stderr.splitlines() if "TOOL_FAILED: " not in line]


def _registered(run: Run) -> int:
    """How many tools the host registered, as the sidecar's trace of ``tools/registry`` says."""
    [registry] = [line for line in run.trace if line["method"] == "tools/registry"]
    count = registry["tools"]
    assert isinstance(count, int) and count > 0
    return count


def _short(args: dict[str, object]) -> str:
    """The 12-hex display fingerprint of the canonical form of ``args`` (ASCII, no floats)."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(canonical).hexdigest()[:12] + "…"


def _recorded(make_dsh: MakeDsh, task: str, include: tuple[str, ...] = ("echo",)) -> Dsh:
    """A cwd holding ``c.ndjson`` recorded from ``task``; returns a replaying runner for that cwd."""
    recorder = make_dsh(sidecar=_row("record", include=include))
    run = recorder.run(task)
    assert run.rc == 0, run.stderr
    assert (recorder.cwd / CASSETTE).is_file()
    return Dsh(cwd=recorder.cwd, sidecar=_row("replay", include=include))


def test_a_mismatch_names_the_differing_pointers_and_prints_the_fix_once(make_dsh: MakeDsh) -> None:
    recorded = {"n": {"k": 1}, "tags": ["x"], "text": "sk-live-OLD"}
    replayed = {"m": 2, "tags": ["x", "y"], "text": "sk-live-NEW"}
    replayer = _recorded(make_dsh, f"/mock run echo({json.dumps(recorded)})")

    run = replayer.run(f"/mock run echo({json.dumps(replayed)})")

    assert run.rc == 1
    assert _cassette_lines(run) == [
        "dsh-sidecar: tool cassette replay: 1 selected calls, 0 consumed, 1 unconsumed, poisoned: yes",
        f"dsh-sidecar: CASSETTE_MISMATCH: echo at root/0, ordinal 0: args {_short(replayed)} differ from "
        f"recorded {_short(recorded)}: added /m, removed /n, added /tags/1, changed /text",
        "dsh-sidecar: CASSETTE_UNCONSUMED: 1 recorded calls not consumed, first echo at root/0, ordinal 0",
        FIX_RERECORD,
    ]
    assert "sk-live" not in run.stderr + run.stdout
    assert str(replayer.cwd) not in run.stderr
    assert run.bodies() == ["echo"]


def test_more_than_five_differences_are_counted_not_listed(make_dsh: MakeDsh) -> None:
    recorded = {"text": "t"}
    replayed = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "text": "u"}
    replayer = _recorded(make_dsh, f"/mock run echo({json.dumps(recorded)})")

    run = replayer.run(f"/mock run echo({json.dumps(replayed)})")

    assert run.rc == 1
    mismatch = [line for line in _cassette_lines(run) if "CASSETTE_MISMATCH" in line]
    assert mismatch == [
        f"dsh-sidecar: CASSETTE_MISMATCH: echo at root/0, ordinal 0: args {_short(replayed)} differ from "
        f"recorded {_short(recorded)}: added /a, added /b, added /c, added /d, added /e, and 2 more"
    ]
    assert _cassette_lines(run).count(FIX_RERECORD) == 1


def test_an_extra_call_prints_the_re_record_fix_once(make_dsh: MakeDsh) -> None:
    replayer = _recorded(make_dsh, '/mock run echo({"text": "a"})')

    run = replayer.run('/mock run [echo({"text": "a"}) echo({"text": "b"})]')

    assert run.rc == 1
    assert _cassette_lines(run) == [
        "dsh-sidecar: tool cassette replay: 2 selected calls, 1 consumed, 0 unconsumed, poisoned: yes",
        "dsh-sidecar: CASSETTE_EXTRA_CALL: echo at root/1, ordinal 1: extra call, the cassette holds 1 calls",
        FIX_RERECORD,
    ]


@pytest.mark.parametrize(("mode", "file", "message", "fix"), [
    pytest.param(
        "replay", "absent.ndjson", "absent.ndjson does not exist (replay reads it)",
        "record it first: run the same task once with toolCassette.mode: record, then replay; or fix the path",
        id="missing-in-replay",
    ),
    pytest.param(
        "replay", "a-dir", "a-dir is a directory",
        "name a file inside it (toolCassette.file: a-dir/<name>) or fix the path", id="directory-replay",
    ),
    pytest.param(
        "record", "a-dir", "a-dir is a directory",
        "name a file inside it (toolCassette.file: a-dir/<name>) or fix the path", id="directory-record",
    ),
    pytest.param(
        "record", "a-file/sub/c.ndjson", "the directory of c.ndjson cannot be made (a part of its path is a file)",
        "fix the path", id="directory-under-a-file",
    ),
])
def test_an_unusable_cassette_path_names_the_field_and_its_own_fix(
    make_dsh: MakeDsh, mode: str, file: str, message: str, fix: str,
) -> None:
    dsh = make_dsh(sidecar=_row(mode, file))
    (dsh.cwd / "a-dir").mkdir()
    (dsh.cwd / "a-file").write_text("")

    run = dsh.run('/mock run echo({"text": "a"})')

    assert (run.rc, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [
        f"dsh-sidecar: INVALID_CONFIG: toolCassette.file: {message}",
        f"dsh-sidecar: fix: {fix}",
    ]
    assert run.bodies() == []


def test_a_recording_makes_its_missing_directory_and_replays_from_it(make_dsh: MakeDsh) -> None:
    # The quick start's path in a fresh project: `.dsh-cassettes/` does not exist yet.
    file = ".dsh-cassettes/weather.tool-cassette.jsonl"
    recorder = make_dsh(sidecar=_row("record", file))

    recorded = recorder.run('/mock run echo({"text": "hi"})')

    assert recorded.rc == 0, recorded.stderr
    directory = recorder.cwd / ".dsh-cassettes"
    assert sorted(p.name for p in directory.iterdir()) == ["weather.tool-cassette.jsonl"]
    assert directory.stat().st_mode & 0o777 == 0o700
    replayed = Dsh(cwd=recorder.cwd, sidecar=_row("replay", file)).run('/mock run echo({"text": "hi"})')
    assert replayed.rc == 0, replayed.stderr
    assert "tool cassette replay: 1 selected calls, 1 consumed, 0 unconsumed, poisoned: no" in replayed.stderr
    assert replayed.bodies() == ["echo"]


def test_recording_over_a_leftover_partial_is_refused_with_the_fix(make_dsh: MakeDsh) -> None:
    dsh = make_dsh(sidecar=_row("record"))
    (dsh.cwd / f"{CASSETTE}.partial").write_text("evidence\n")

    run = dsh.run('/mock run echo({"text": "a"})')

    assert (run.rc, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [
        "dsh-sidecar: CASSETTE_EXISTS: c.ndjson.partial already exists; recording never overwrites",
        "dsh-sidecar: fix: replay it (toolCassette.mode: replay), or delete it (and any .partial) to record anew",
    ]
    assert (dsh.cwd / f"{CASSETTE}.partial").read_text() == "evidence\n"
    assert run.bodies() == []


def test_replaying_a_tampered_cassette_is_refused_at_boot_with_the_fix(make_dsh: MakeDsh) -> None:
    replayer = _recorded(make_dsh, '/mock run echo({"text": "hello"})')
    path = replayer.cwd / CASSETTE
    path.write_bytes(path.read_bytes().replace(b'"text":"hello"', b'"text":"HELLO"'))

    run = replayer.run('/mock run echo({"text": "hello"})')

    assert (run.rc, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [
        # line 2 is echo's recorded contract (a tool frame), line 3 the model step that called it
        # (an observed/step frame, version 5)
        "dsh-sidecar: CASSETTE_INVALID: line 4 call/start ordinal 0: hash does not match the frame",
        "dsh-sidecar: fix: `dsh-tool-cassette verify <file>` shows the first broken frame; re-record the cassette",
    ]
    assert "hello" not in run.stderr.lower()
    assert run.bodies() == ["echo"]


def test_replaying_with_another_include_list_is_refused_at_boot_with_the_fix(make_dsh: MakeDsh) -> None:
    replayer = _recorded(make_dsh, '/mock run echo({"text": "a"})')
    replayer.sidecar = _row("replay", include=("echo", "sleepy"))

    run = replayer.run('/mock run echo({"text": "a"})')

    assert (run.rc, run.stdout) == (1, "")
    assert run.stderr.splitlines() == [
        "dsh-sidecar: CASSETTE_INCLUDE_DIFFERS: toolCassette.include differs from the include recorded in c.ndjson",
        "dsh-sidecar: fix: use the include list the cassette was recorded with, or re-record it",
    ]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=30)


def test_inspect_lists_each_record_and_diff_names_what_drifted(make_dsh: MakeDsh) -> None:
    a = _recorded(make_dsh, '/mock run [echo({"text": "a"}) sleepy({"label": "z", "ms": 1})]',
                  include=("echo", "sleepy"))
    b = _recorded(make_dsh, '/mock run [echo({"text": "b", "tags": ["t"]}) sleepy({"label": "z", "ms": 1})]',
                  include=("echo", "sleepy"))
    file_a, file_b = str(a.cwd / CASSETTE), str(b.cwd / CASSETTE)

    inspect = _cli("inspect", file_a)
    same = _cli("diff", file_a, file_a)
    drift = _cli("diff", file_a, file_b)

    assert inspect.returncode == 0
    table = inspect.stdout.splitlines()[inspect.stdout.splitlines().index("records:") + 1:]
    assert table == [
        "  ordinal  tool    path    args                  outcome",
        f"  0        echo    root/0  {_short({'text': 'a'})}  value",
        f"  1        sleepy  root/1  {_short({'label': 'z', 'ms': 1})}  value",
    ]
    assert (same.returncode, same.stdout) == (
        0, "equivalent: 2 -> 2 calls, 2 unchanged, 0 changed, 0 added, 0 removed\n",
    )
    assert drift.returncode == 2
    assert drift.stdout.splitlines()[:3] == [
        "different: 2 -> 2 calls, 1 unchanged, 1 changed, 0 added, 0 removed",
        "  ~ #0 echo at root/0",
        f"      args {_short({'text': 'a'})} -> {_short({'tags': ['t'], 'text': 'b'})}: added /tags, changed /text",
    ]
    assert drift.stdout.splitlines()[3].startswith("      outcome sha256:")
    # The outcome holds the recorded rendering too (what a stand-in shows).
    assert drift.stdout.splitlines()[3].endswith(": changed /content/0/text, added /value/tags, changed /value/text")
    assert str(a.cwd) not in drift.stdout + inspect.stdout


def test_a_tool_whose_plugin_is_off_during_replay_is_stood_up_from_the_cassette(make_dsh: MakeDsh) -> None:
    # A plain dsh run: the tools plugin is off during replay, so no plugin registers echo; the
    # recording kept its contract and rendering, and the shim stands it up (issue 21, item 1).
    replayer = _recorded(make_dsh, '/mock run echo({"text": "hi"})')
    replayer.extra_patch = '- {"id": "example-tools", "name": "dsh-example-tools", "disabled": true}\n'

    run = replayer.run('/mock run echo({"text": "hi"})')

    assert run.rc == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("dsh-sidecar: ")]
    assert lines[0] == (
        "dsh-sidecar: tool cassette replay: 1 selected calls, 1 consumed, 0 unconsumed, poisoned: no, "
        "stood up from the cassette (no plugin registered them): echo"
    )
    # The plugin's other tools are gone with it: the model is offered fewer tools than when
    # recorded, which the replay names (issue 29: divergence is named, never silent).
    assert len(lines) == 2 and lines[1].startswith(
        "dsh-sidecar: warning: REPLAY_DIVERGED: model step 1 of turn 1 was offered other tools than when recorded")
    assert run.bodies() == ["echo"]  # the recording's body only


def test_a_recorded_value_the_current_schema_rejects_fails_the_replay(make_dsh: MakeDsh) -> None:
    replayer = _recorded(make_dsh, '/mock run echo({"text": "hi"})')
    # Give the recorded value a key echo's output schema forbids, and re-seal the chain: the
    # file verifies, so only the current tool definition can catch it.
    path = replayer.cwd / CASSETTE
    frames = [decode_frame(line) for line in path.read_bytes().splitlines()]
    chain, out = Chain(), []
    for frame in frames:
        if isinstance(frame, ResultFrame):
            frame = msgspec.structs.replace(frame, value=msgspec.Raw(b'{"extra":1,"text":"hi"}'))
        out.append(chain.link(msgspec.structs.replace(frame, hash=msgspec.UNSET))[1])
    path.write_bytes(b"".join(out))
    assert subprocess.run([TOOL, "verify", CASSETTE], cwd=replayer.cwd, capture_output=True).returncode == 0

    run = replayer.run('/mock run echo({"text": "hi"})')

    assert run.rc == 1
    assert [line for line in run.stderr.splitlines() if line.startswith("dsh-sidecar: ")] == [
        "dsh-sidecar: tool cassette replay: 1 selected calls, 1 consumed, 0 unconsumed, poisoned: yes",
        "dsh-sidecar: CASSETTE_VALUE_REJECTED: echo at root/0, ordinal 0: replayed value rejected with "
        "INVALID_TOOL_OUTPUT",
        "dsh-sidecar: fix: the current output schema, renderer or presentation meta of echo rejects the "
        "recorded value: make the tool accept it again, or re-record the cassette",
    ]
    assert run.bodies() == ["echo"]


def test_selecting_a_composite_tool_and_its_child_fails_the_recording(make_dsh: MakeDsh) -> None:
    recorder = make_dsh(sidecar=_row("record", include=("relay", "echo")))

    run = recorder.run('/mock run relay({"tool": "echo", "json": "{\\"text\\": \\"hi\\"}"})')

    assert run.rc == 1
    lines = [line for line in run.stderr.splitlines() if line.startswith("dsh-sidecar: ")]
    assert lines == [
        "dsh-sidecar: tool cassette record: 2 selected calls, 0 recorded, published: no",
        "dsh-sidecar: CASSETTE_NESTED_SELECTION: echo at root/0/0: started inside the selected call relay at "
        "root/0, ordinal 0; cassette V1 cannot select a composite tool and its child tools together",
        "dsh-sidecar: CASSETTE_RECORDING_INCOMPLETE: not published: recording failed with "
        "CASSETTE_NESTED_SELECTION; kept c.ndjson.partial",
        "dsh-sidecar: fix: select either the composite tool or its child tools in toolCassette.include, not both",
    ]
    assert run.bodies() == ["relay"]
    assert sorted(p.name for p in recorder.cwd.iterdir() if CASSETTE in p.name) == [CASSETTE + ".partial"]


def test_a_selected_call_that_concludes_the_turn_fails_the_recording_with_its_code(make_dsh: MakeDsh) -> None:
    recorder = make_dsh(sidecar=_row("record", include=("conclude",)))

    run = recorder.run('/mock run conclude({"text": "done"})')

    assert run.rc == 1
    # The call's failure carries the code (the mock's report of the failed step names it).
    assert run.stderr.splitlines()[0].startswith(
        "dsh: TOOL_FAILED: conclude (mock-1-1-0) failed at step 1 with runtime code CASSETTE_CONCLUDES_TURN;"
    )
    assert [line for line in run.stderr.splitlines() if line.startswith("dsh-sidecar: ")] == [
        "dsh-sidecar: tool cassette record: 1 selected calls, 0 recorded, published: no",
        "dsh-sidecar: CASSETTE_CONCLUDES_TURN: conclude at root/0, ordinal 0: concludesTurn is not supported by "
        "cassette V1",
        "dsh-sidecar: CASSETTE_RECORDING_INCOMPLETE: not published: recording failed with CASSETTE_CONCLUDES_TURN; "
        "kept c.ndjson.partial",
        "dsh-sidecar: fix: leave conclude out of toolCassette.include: cassette V1 cannot replay a call that "
        "concludes the turn",
    ]
    assert run.bodies() == ["conclude"]
    assert not (recorder.cwd / CASSETTE).exists()


def test_a_selected_call_denied_before_tools_execute_fails_closed(make_dsh: MakeDsh) -> None:
    # The example tools plugin's own pre-execute policy denies `forbidden`.
    recorder = make_dsh(sidecar=_row("record", include=("forbidden",)))

    run = recorder.run('/mock run forbidden({"text": "x"})')

    assert run.rc == 1
    assert run.stderr.splitlines()[0].startswith(
        "dsh: TOOL_FAILED: forbidden (mock-1-1-0) failed at step 1 with runtime code CASSETTE_SHORT_CIRCUITED;"
    )
    assert [line for line in run.stderr.splitlines() if line.startswith("dsh-sidecar: ")] == [
        "dsh-sidecar: tool cassette record: 0 selected calls, 0 recorded, published: no",
        "dsh-sidecar: CASSETTE_SHORT_CIRCUITED: forbidden at (not dispatched): reached tools/post-execute without "
        "passing tools/execute",
        "dsh-sidecar: CASSETTE_RECORDING_INCOMPLETE: not published: recording failed with CASSETTE_SHORT_CIRCUITED; "
        "kept c.ndjson.partial",
        "dsh-sidecar: fix: forbidden never reached the cassette's tools/execute wrapper (denied by a pre-execute "
        "policy or guard, refused by the host, or answered by another plugin first): allow that call in this run, "
        "or leave forbidden out of toolCassette.include",
    ]
    assert run.bodies() == []
    assert not (recorder.cwd / CASSETTE).exists()


def test_a_recording_that_selects_no_call_fails_closed_and_publishes_nothing(make_dsh: MakeDsh) -> None:
    # The spec's own example pattern: DSH names MCP tools mcp__<server>__<tool>, so it selects nothing.
    dsh = make_dsh(sidecar=_row("record", include=("mcp_*_read",)))

    run = dsh.run('/mock run echo({"text": "a"})')

    assert run.rc == 1
    assert _cassette_lines(run) == [
        # at boot, when the first agent is created: the pattern matches no registered tool
        "dsh-sidecar: warning: CASSETTE_PATTERN_UNMATCHED: toolCassette.include pattern mcp_*_read matches none "
        f"of the {_registered(run)} tools the host registered; fix: match the pattern to a tool name the host "
        "registers (an MCP tool is mcp__<server>__<tool>: mcp__notes__* or mcp__*__read*), or drop it",
        "dsh-sidecar: tool cassette record: 0 selected calls, 0 recorded, published: no",
        "dsh-sidecar: CASSETTE_NOTHING_SELECTED: no call of a selected tool reached the cassette "
        "(toolCassette.include: mcp_*_read); c.ndjson was not published and nothing was kept",
        "dsh-sidecar: fix: match toolCassette.include to the tool names the host registers (an MCP tool is "
        "mcp__<server>__<tool>: mcp__notes__* or mcp__*__read*), or drop the tool cassette from this run",
    ]
    assert sorted(p.name for p in dsh.cwd.iterdir() if p.name.startswith(CASSETTE)) == []
    assert run.bodies() == ["echo"]
