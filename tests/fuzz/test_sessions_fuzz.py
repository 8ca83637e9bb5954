"""Seeded, bounded fuzz of the session-log readers and ``dsh-sidecar sessions``: named lines, never a traceback.

``DSH_FUZZ_SEED`` picks the seed (printed either way). 10,000 generated logs (an rc.8-shaped
log with its bytes mutated, a member replaced by a value of another type, nesting past the depth
limit, lone surrogates in keys and strings; some zstd-compressed) go through
``decode_session_log`` and everything ``sessions show`` does with a decoded log; 300 of them are
written to a DSH home and read through ``sessions list`` and ``sessions show`` (plain, ``--json``,
``--events``). The contract: decoding gives events that every reader summarizes and every view
prints as UTF-8, or raises ``SESSION_LOG_INVALID``; the CLI exits 0 or 1 and its every stderr
line is one named error.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

import msgspec
import zstandard
from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main as sidecar
from dsh_sidecar.python_core.session_log import (
    SessionLogInvalid,
    decode_session_log,
    final_text,
    mock_statuses,
    project_key,
    summarize,
    tool_calls,
    tool_results,
)

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261203"))
LOGS = 10_000
CLI_LOGS = 300
POISON = [b"[", b"{", b"}", b'"', b"\\", b"\\ud800", b"\\udfff", b"\xed\xa0\x80", b"\xff", b"\x00", b"\n", b",",
          b"1e400", b"null", b'"type":"session",', b'"type":"mock/status",']
STATUS = {"session_id": "s", "turn_id": "1", "mode": "run", "source_format": "command", "source_name": None,
          "script_id": "sha256:0", "step_count": 1, "steps_started": 1, "steps_completed": 0, "state": "failed",
          "error_code": "TOOL_FAILED", "failed_tool": "broken", "failed_step": 1, "phase": "failed", "step": 1}
NAMED = re.compile(r"dsh-sidecar: (SESSION_LOG_INVALID|SESSION_LOG_UNREADABLE|SESSION_NOT_FOUND): .+")


def _events(session_id: str) -> list[dict[str, Any]]:
    """An rc.8-shaped log: header, task, a failed tool call, the mock's status, the turn's end."""
    return [
        {"type": "session", "id": session_id, "cwd": "/w", "createdAt": 1796279379476, "delegationDepth": 0},
        {"type": "user/message", "data": {"source": {"kind": "user"}, "content": [{"type": "text", "text": "go"}]}},
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "tool/call", "data": {"callId": "c1", "name": "broken", "arguments": '{"why":"x"}', "turn": 1,
                                       "step": 1}},
        {"type": "tool/result", "data": {"message": {"content": [{"type": "tool-result", "toolCallId": "c1",
                                                                  "content": [{"type": "text", "text": "Error: x"}],
                                                                  "isError": True}]},
                                         "error": {"name": "Error", "code": "E"}}},
        {"type": "mock/status", "data": dict(STATUS)},
        {"type": "assistant/message", "data": {"message": {"content": [{"type": "text", "text": "done"}]}}},
        {"type": "turn/end", "data": {"turn": 1, "reason": {"kind": "error"}}},
    ]


def _key(rand: random.Random) -> str:
    return rand.choice(["\ud800", "\udfff"]) if rand.random() < 0.05 else rand.choice(["k", "é", "", "type"])


def _value(rand: random.Random, depth: int = 0) -> Any:
    kind = rand.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return rand.choice([None, True, 0, -1, 2**53, 2**64, 1.5, "h", "\U0001f600"])
    if kind == 1:
        return "".join(rand.choice("ab\"\\\x00\u2028é\U0001f600") for _ in range(rand.randrange(4)))
    if kind == 2:
        return rand.choice(["\ud800", "a\udfff"]) if rand.random() < 0.2 else "\ud83d\ude00"
    if kind == 3:
        return [1] if rand.random() < 0.5 else {}
    if kind == 4:
        return rand.randrange(-3, 3)
    if kind in (5, 6):
        return {_key(rand): _value(rand, depth + 1) for _ in range(2)}
    return [_value(rand, depth + 1) for _ in range(rand.randrange(3))]


def _replace(rand: random.Random, event: Any) -> None:
    """Replace one member somewhere in ``event`` by a value of another type."""
    node = event
    for _ in range(rand.randrange(1, 4)):
        if not isinstance(node, dict) or not node:
            return
        key = rand.choice(list(node))
        if rand.random() < 0.4 or not isinstance(node[key], (dict, list)):
            node[key] = _value(rand)
            return
        node = node[key] if isinstance(node[key], dict) else {}


def _line(event: Any) -> bytes:
    # A lone surrogate has no UTF-8 form: written escaped, as JSON allows.
    return json.dumps(event, ensure_ascii=True).encode()


def _log(rand: random.Random, session_id: str) -> bytes:
    events = _events(session_id)
    # The header and mock/status are checked on decode; the other records stress the readers.
    checked, read = [events[0], events[5]], [e for i, e in enumerate(events) if i not in (0, 5)]
    for _ in range(rand.randrange(1, 4)):
        _replace(rand, rand.choice(checked if rand.random() < 0.2 else read))
    lines = [_line(e) for e in events]
    if rand.random() < 0.15:
        depth = rand.choice([255, 256, 257, 1000])
        lines.insert(rand.randrange(len(lines) + 1), b'{"type":"x","data":' + b"[" * depth + b"]" * depth + b"}")
    data = bytearray(b"\n".join(lines) + b"\n")
    # Most logs keep their bytes: their members' types and nesting are what is tested.
    for _ in range(rand.randrange(1, 3) if rand.random() < 0.3 else 0):
        at = rand.randrange(len(data) + 1)
        op = rand.randrange(4)
        if op == 0:
            data[at:at] = rand.choice(POISON)
        elif op == 1:
            del data[at : at + rand.randrange(1, 30)]
        elif op == 2 and at < len(data):
            data[at] = rand.randrange(256)
        else:
            del data[at:]
    if rand.random() < 0.2:
        cut = rand.random() < 0.3
        frame = zstandard.ZstdCompressor().compress(bytes(data))
        return frame[: len(frame) - rand.randrange(1, 5)] if cut else frame
    return bytes(data)


def _views(events: list[dict[str, Any]]) -> None:
    """Everything ``sessions list`` / ``show`` computes and prints from a decoded log."""
    summary = summarize(events)
    document = {"summary": summary, "tool_calls": tool_calls(events), "tool_results": tool_results(events),
                "mock": mock_statuses(events), "events": events}
    msgspec.json.encode(document).decode()
    final_text(events)
    for event in events:
        json.dumps(event, ensure_ascii=False).encode("utf-8")


def test_fuzz_decoded_logs_are_summarized_or_refused_by_name() -> None:
    print(f"sessions fuzz seed: {SEED} (set DSH_FUZZ_SEED to change it)", file=sys.stderr)
    rand = random.Random(SEED)
    refused = 0
    for i in range(LOGS):
        data = _log(rand, f"session-{i}")
        try:
            events = decode_session_log(data, source="s/session.jsonl")
        except SessionLogInvalid as error:
            assert str(error).startswith("SESSION_LOG_INVALID: s/session.jsonl")
            str(error).encode("utf-8")
            refused += 1
            continue
        _views(events)
    # Both outcomes are exercised: the generator is not all noise, nor all valid.
    assert LOGS // 20 < refused < LOGS - LOGS // 20


def test_fuzz_sessions_list_and_show_exit_0_or_1_with_named_lines(tmp_path: Path) -> None:
    rand = random.Random(SEED + 1)
    home, cwd = tmp_path / "home", tmp_path / "w"
    cwd.mkdir()
    folder = home / "sessions" / project_key(os.path.realpath(cwd))
    ids = [f"session-{i}" for i in range(CLI_LOGS)]
    for session_id in ids:
        (folder / session_id).mkdir(parents=True)
        data = _log(rand, session_id)
        name = "session.jsonl.zstd" if data.startswith(b"\x28\xb5\x2f\xfd") else "session.jsonl"
        (folder / session_id / name).write_bytes(data)
    runner = CliRunner()
    where = ["--cwd", str(cwd), "--dsh-home", str(home)]
    listed = runner.invoke(sidecar, ["sessions", "list", "--limit", str(CLI_LOGS), *where])
    assert listed.exit_code == 0, listed.exception
    skipped = listed.stderr.splitlines()
    assert all(NAMED.fullmatch(line) and line.endswith("; skipped") for line in skipped)
    # Every log is either listed or skipped by name, once.
    assert len(listed.stdout.splitlines()) + len(skipped) == CLI_LOGS
    for session_id in rand.sample(ids, 60):
        for view in ([], ["--json"], ["--events"]):
            shown = runner.invoke(sidecar, ["sessions", "show", session_id, *view, *where])
            assert shown.exit_code in (0, 1), shown.exception
            assert shown.exception is None or isinstance(shown.exception, SystemExit), shown.exception
            lines = shown.stderr.splitlines()
            assert (shown.exit_code, len(lines)) in ((0, 0), (1, 1)) and all(NAMED.fullmatch(x) for x in lines)


def test_fuzz_the_pytest_session_index_never_gives_a_traceback(tmp_path: Path) -> None:
    # 200 mutated indexes (the plugin's lines, cut, retyped, with bytes flipped): --last-run and
    # --test list what decodes, skip the rest, and fail only by name.
    rng = random.Random(SEED)
    good = [json.dumps({"nodeid": f"t.py::t{i}", "session": f"session-{i}", "cwd": str(tmp_path / f"w{i}"),
                        "exit": 0}).encode() for i in range(4)]
    good.append(json.dumps({"nodeid": "t.py::t1", "session": "s", "cwd": "a\u0000b", "exit": 1}).encode())
    index = tmp_path / ".dsh-sidecar" / "pytest-sessions.jsonl"
    index.parent.mkdir()
    home = tmp_path / "home"
    for case in range(200):
        lines = [bytearray(rng.choice(good)) for _ in range(rng.randint(0, 5))]
        for line in lines:
            for _ in range(rng.randint(0, 3)):
                at = rng.randrange(len(line))
                line[at:at + rng.randint(0, 4)] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 4)))
        index.write_bytes(b"\n".join(lines))
        for args in (["--last-run"], ["--test", "t.py::t1"], ["--last-run", "--json"]):
            result = CliRunner().invoke(sidecar, ["sessions", "list", "--cwd", str(tmp_path), "--dsh-home", str(home),
                                                  *args])
            assert result.exception is None or isinstance(result.exception, SystemExit), (SEED, case, result.output)
            assert result.exit_code in (0, 1), (SEED, case, result.output)
