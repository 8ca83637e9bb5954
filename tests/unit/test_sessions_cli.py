"""``dsh-sidecar sessions``: every malformed log is one named line; the list skips it and says so."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main as sidecar
from dsh_sidecar.python_core.session_log import project_key


def _header(session_id: str, cwd: Path, created: int = 1) -> str:
    return json.dumps({"type": "session", "id": session_id, "cwd": str(cwd), "createdAt": created,
                       "delegationDepth": 0})


def _log(home: Path, cwd: Path, session_id: str, *lines: str) -> Path:
    folder = home / "sessions" / project_key(os.path.realpath(cwd)) / session_id
    folder.mkdir(parents=True)
    path = folder / "session.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _good(home: Path, cwd: Path, session_id: str = "session-good", created: int = 5) -> None:
    task = {"type": "user/message", "data": {"source": {"kind": "user"}, "content": [{"type": "text", "text": "hi"}]}}
    _log(home, cwd, session_id, _header(session_id, cwd, created), json.dumps(task))


# The fuzz findings: each was a traceback in `sessions list` or `sessions show`.
BAD = {
    "session-deep": "[" * 1000 + "]" * 1000,
    "session-surrogate": '{"type":"user/message","data":{"\\ud800":1}}',
    "session-status": '{"type":"mock/status","data":{"state":7}}',
}


def _invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(sidecar, ["sessions", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    for session_id, line in BAD.items():
        _log(home, tmp_path, session_id, _header(session_id, tmp_path), line)
    _log(home, tmp_path, "session-depth", json.dumps({"type": "session", "id": "session-depth",
                                                      "delegationDepth": [1]}))
    link = home / "sessions" / project_key(os.path.realpath(tmp_path)) / "session-link"
    link.mkdir()
    (link / "session.jsonl").symlink_to("x" * 300)  # a target name longer than NAME_MAX: ENAMETOOLONG
    _good(home, tmp_path)
    return home


def test_list_skips_each_malformed_log_with_one_named_line(home: Path, tmp_path: Path) -> None:
    code, out, err = _invoke("list", "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert code == 0
    assert [line.split("  ")[0] for line in out.splitlines()] == ["session-good"]
    assert err.splitlines() == [
        "dsh-sidecar: SESSION_LOG_INVALID: session-deep/session.jsonl:2: nested deeper than 256 levels; skipped",
        "dsh-sidecar: SESSION_LOG_INVALID: session-depth/session.jsonl:1: malformed header: Expected `int | null`, "
        "got `array` - at `$.delegationDepth`; skipped",
        "dsh-sidecar: SESSION_LOG_UNREADABLE: session-link/session.jsonl: the name is too long; skipped",
        "dsh-sidecar: SESSION_LOG_INVALID: session-status/session.jsonl:2: malformed mock/status record: Expected "
        "`str`, got `int` - at `$.data.state`; skipped",
        "dsh-sidecar: SESSION_LOG_INVALID: session-surrogate/session.jsonl:2: lone surrogate in a string or object "
        "key; skipped",
    ]


def test_list_json_keeps_stdout_json_and_names_the_skipped_logs_on_stderr(home: Path, tmp_path: Path) -> None:
    code, out, err = _invoke("list", "--json", "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert code == 0
    assert [s["session_id"] for s in json.loads(out)] == ["session-good"]
    assert len(err.splitlines()) == 5


@pytest.mark.parametrize("view", [[], ["--json"], ["--events"]])
@pytest.mark.parametrize("session_id", [*BAD, "session-depth"])
def test_show_of_a_malformed_log_is_one_named_line_and_exit_one(
    home: Path, tmp_path: Path, session_id: str, view: list[str]
) -> None:
    code, out, err = _invoke("show", session_id, *view, "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert (code, out) == (1, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"dsh-sidecar: SESSION_LOG_INVALID: {session_id}/session.jsonl:")


def test_show_of_an_unreadable_log_names_the_reason(home: Path, tmp_path: Path) -> None:
    code, _, err = _invoke("show", "session-link", "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert (code, err) == (1, "dsh-sidecar: SESSION_LOG_UNREADABLE: session-link/session.jsonl: the name is too long\n")


def test_show_finds_a_session_by_its_id_from_another_folder(home: Path, tmp_path: Path) -> None:
    # The account of a pytest run names the session of pytest's temporary folder: pasted where
    # the user is, the id alone finds it.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    code, out, err = _invoke("show", "session-good", "--cwd", str(elsewhere), "--dsh-home", str(home))

    assert (code, err) == (0, "")
    assert out.startswith("session session-good (")
    assert "task:    'hi'" in out


def test_show_of_an_unknown_id_names_where_it_looked(home: Path, tmp_path: Path) -> None:
    code, _, err = _invoke("show", "session-none", "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert (code, err) == (1, (
        "dsh-sidecar: SESSION_NOT_FOUND: session session-none is in no folder's sessions of this DSH home; list a "
        "folder's with `dsh-sidecar sessions list --cwd DIR`, or name the home with --dsh-home\n"
    ))


def test_show_without_an_id_shows_the_newest_readable_log(home: Path, tmp_path: Path) -> None:
    code, out, err = _invoke("show", "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert code == 0 and out.startswith("session session-good (")
    assert len(err.splitlines()) == 5 and all(line.endswith("; skipped") for line in err.splitlines())


def test_prune_removes_sessions_by_age_and_by_folder_and_dry_run_removes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    old = _log(home, here, "session-old", _header("session-old", here))
    _log(home, here, "session-new", _header("session-new", here))
    other = _log(home, there, "session-other", _header("session-other", there))
    for path in (old, other):
        os.utime(path, (0, 0))
        os.utime(path.parent, (0, 0))
    folder = project_key(os.path.realpath(here))

    code, out, err = _invoke("prune", "--older-than", "1", "--cwd", str(here), "--dsh-home", str(home), "--dry-run")
    assert (code, out, err) == (0, f"would remove session-old ({folder})\n", "1 session(s) to remove, 1 kept\n")
    assert old.exists()

    code, out, err = _invoke("prune", "--older-than", "1", "--cwd", str(here), "--dsh-home", str(home))
    assert (code, out) == (0, f"removed session-old ({folder})\n")
    assert not old.parent.exists() and other.exists()
    assert (home / "sessions" / folder / "session-new").is_dir()
    assert str(tmp_path) not in out + err

    code, out, err = _invoke("prune", "--dsh-home", str(home))
    assert code == 0 and sorted(line.split()[1] for line in out.splitlines()) == ["session-new", "session-other"]
    assert err == "2 session(s) removed, 0 kept\n"


def test_show_prints_each_call_with_its_arguments_and_result_credentials_filtered_and_errors_whole(
    tmp_path: Path,
) -> None:
    home, sid = tmp_path / "home", "session-tree"
    call = {"type": "tool/call", "data": {"callId": "c1", "name": "login", "turn": 1, "step": 1,
                                         "arguments": json.dumps({"user": "ann", "api_key": "sk-canary-123"})}}

    def result(call_id: str, text: str, error: dict[str, str] | None = None) -> dict[str, object]:
        block = {"type": "tool-result", "toolCallId": call_id, "isError": error is not None,
                 "content": [{"type": "text", "text": text}]}
        return {"type": "tool/result", "data": {"message": {"content": [block]}, **({"error": error} or {})}}

    second = {"type": "tool/call", "data": {"callId": "c2", "name": "fetch", "turn": 1, "step": 2,
                                           "arguments": json.dumps({"url": "u" * 400})}}
    failure = "CASSETTE_MISMATCH: fetch at root/1, ordinal 1: args sha256:" + "ab" * 40 + " differ from recorded"
    _log(home, tmp_path, sid, _header(sid, tmp_path), json.dumps(call),
         json.dumps(result("c1", json.dumps({"token": "sk-canary-123", "ok": True}))), json.dumps(second),
         json.dumps(result("c2", failure, {"code": "CASSETTE_MISMATCH", "message": "x"})))

    code, out, err = _invoke("show", sid, "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert (code, err) == (0, "")
    lines = out.splitlines()
    at = lines.index("call     c1 login (turn 1, step 1)")
    assert lines[at + 1] == '  args   {"user":"ann","api_key":"[redacted]"}'
    assert lines[at + 2] == '  result ok: {"token":"[redacted]","ok":true}'
    assert lines[at + 3] == "call     c2 fetch (turn 1, step 2)"
    # Cut to the terminal's width (at least 60 columns), the last character an ellipsis.
    assert lines[at + 4].endswith("…") and len(lines[at + 4]) == max(shutil.get_terminal_size().columns, 60)
    assert lines[at + 5] == f"  result error CASSETTE_MISMATCH: {failure}"
    assert "sk-canary-123" not in out


def test_events_fold_the_system_prompt_and_the_tool_list_unless_full(tmp_path: Path) -> None:
    home = tmp_path / "home"
    header = {"type": "request/header", "data": {"header": {"config": {"provider": "mock"}, "system": "S" * 20_000,
              "tools": [{"name": "read", "description": "D" * 5_000, "parameters": {}}]}, "reason": "initial"}}
    _log(home, tmp_path, "session-big", _header("session-big", tmp_path), json.dumps(header))

    code, out, _ = _invoke("show", "session-big", "--events", "--cwd", str(tmp_path), "--dsh-home", str(home))
    assert code == 0 and len(out) < 1_000
    shown = json.loads(out.splitlines()[1])["data"]["header"]
    assert shown == {"config": {"provider": "mock"},
                     "system": "<system prompt: 20000 characters; --full prints it>", "tools": ["read"]}
    code, out, _ = _invoke("show", "session-big", "--events", "--full", "--cwd", str(tmp_path), "--dsh-home", str(home))
    assert code == 0 and json.loads(out.splitlines()[1]) == header


def test_show_applies_the_filters_of_a_test_logic_file_and_hides_what_they_hid_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, sid = tmp_path / "home", "session-filtered"
    call = {"type": "tool/call", "data": {"callId": "c1", "name": "lookup", "turn": 1, "step": 1,
                                         "arguments": json.dumps({"city": "Paris", "ref": "acct-77123"})}}
    block = {"type": "tool-result", "toolCallId": "c1", "isError": False,
             "content": [{"type": "text", "text": "found acct-77123 in Paris"}]}
    _log(home, tmp_path, sid, _header(sid, tmp_path), json.dumps(call),
         json.dumps({"type": "tool/result", "data": {"message": {"content": [block]}}}))
    (tmp_path / "logic.json").write_text(json.dumps({"filters": [{"regex": "acct-[0-9]+"}]}))
    monkeypatch.chdir(tmp_path)

    plain = _invoke("show", sid, "--cwd", str(tmp_path), "--dsh-home", str(home))[1]
    code, out, err = _invoke("show", sid, "--config", "logic.json", "--cwd", str(tmp_path), "--dsh-home", str(home))

    assert "acct-77123" in plain  # without the file, only credentials are hidden
    assert (code, err) == (0, "") and "acct-77123" not in out
    assert '  args   {"city":"Paris","ref":"[redacted]"}' in out.splitlines()
    assert "  result ok: found [redacted] in Paris" in out.splitlines()
