"""The divergence check: digests of what a replay does not serve, and the one line naming the first difference."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.tool_cassette.config import parse_config
from dsh_sidecar.python_core.tool_cassette.divergence import (
    DivergenceWatch,
    StepObserver,
    observe_result,
    result_digest,
)
from dsh_sidecar.python_core.tool_cassette.format import ObservedResult, ObservedStep

CWD = "/work/project"
TOOLS = [{"name": "memo_list", "description": "List.", "parameters": {}}]


def _recorded(value: bytes, tool: str = "memo_list", path: str = "root/1",
              volatile: dict[str, tuple[str, ...]] | None = None) -> ObservedResult:
    frame = observe_result(path, tool, False, value, None, volatile or {}, CWD)
    assert frame is not None
    return frame


def _watch(results: list[ObservedResult] = (), steps: list[ObservedStep] = (),  # type: ignore[assignment]
           volatile: dict[str, tuple[str, ...]] | None = None) -> DivergenceWatch:
    return DivergenceWatch(results, steps, True, volatile or {}, CWD)


def test_an_unselected_result_that_differs_names_the_call_and_the_served_call_before_it() -> None:
    watch = _watch([_recorded(b'{"memos":"buy milk","count":1}')])
    watch.served("memo_save", "root/0")
    watch.result("root/1", "memo_list", False, b'{"memos":"","count":0}', None)
    assert str(watch.close()) == (
        "REPLAY_DIVERGED: unselected memo_list at root/1 returned another result than when recorded; it may read "
        "what the replayed memo_save at root/0 did not do: select both, or neither")


def test_the_same_result_in_another_key_order_and_folder_is_no_divergence() -> None:
    watch = _watch([_recorded(b'{"path":"/work/project/a.txt","n":1}')])
    watch.result("root/1", "memo_list", False, b'{"n":1,"path":"/tmp/elsewhere/a.txt"}', None)
    assert watch.cwd == CWD and watch.close() is not None  # another folder is another value...
    moved = DivergenceWatch([_recorded(b'{"path":"/work/project/a.txt","n":1}')], [], True, {}, "/tmp/elsewhere")
    moved.result("root/1", "memo_list", False, b'{"n":1,"path":"/tmp/elsewhere/a.txt"}', None)
    assert moved.close() is None  # ...unless it is the session's own folder


def test_a_failure_where_a_success_was_recorded_names_its_code_and_only_the_first_difference_is_kept() -> None:
    watch = _watch([_recorded(b'"x"', "read", "root/1"), _recorded(b'"y"', "read", "root/2")])
    watch.served("exec_command", "root/0")
    watch.result("root/1", "read", True, None, "FS_NOT_FOUND")
    watch.result("root/2", "read", False, b'"other"', None)
    assert str(watch.close()) == (
        "REPLAY_DIVERGED: unselected read at root/1 failed (FS_NOT_FOUND) where it succeeded when recorded; it may "
        "read what the replayed exec_command at root/0 did not do: select both, or neither")


def test_volatile_pointers_recorded_with_the_digest_are_left_out_again_on_replay() -> None:
    volatile = {"memo_list": ("/took",)}
    watch = _watch([_recorded(b'{"count":1,"took":3.5}', volatile=volatile)], volatile=volatile)
    watch.result("root/1", "memo_list", False, b'{"count":1,"took":9.25}', None)
    assert watch.close() is None
    undeclared = _watch([_recorded(b'{"count":1,"took":3.5}')], volatile=volatile)
    undeclared.result("root/1", "memo_list", False, b'{"count":1,"took":9.25}', None)
    diverged = undeclared.close()
    assert diverged is not None and "re-recorded" in diverged.hint


def test_calls_made_or_missing_only_on_one_side_are_named() -> None:
    extra = _watch([])
    extra.result("root/3", "memo_list", False, b"1", None)
    assert str(extra.close()).startswith("REPLAY_DIVERGED: unselected memo_list at root/3 was not called when recorded")
    missing = _watch([_recorded(b"1")])
    assert str(missing.close()).startswith(
        "REPLAY_DIVERGED: unselected memo_list at root/1, called when recorded, was not called")


def test_a_step_that_saw_another_system_prompt_or_other_tools_is_named() -> None:
    recorder = StepObserver(CWD)
    steps = [recorder.observe("s1", 1, 1, "Memos: 0", TOOLS), recorder.observe("s1", 1, 2, "Memos: 1", TOOLS)]
    assert recorder.observe("s1", 1, 2, "Memos: 1", TOOLS) is None  # a retried request is the same step
    watch = _watch(steps=[s for s in steps if s is not None])
    watch.served("memo_save", "root/0")
    watch.step("other-session-id", 1, 1, "Memos: 0", TOOLS)
    watch.step("other-session-id", 1, 2, "Memos: 0", TOOLS)
    assert str(watch.close()) == (
        "REPLAY_DIVERGED: model step 2 of turn 1 saw another system prompt than when recorded; it may show what "
        "the replayed memo_save at root/0 did not do: select both, or neither")
    tools = _watch(steps=[s for s in steps if s is not None])
    tools.step("x", 1, 1, "Memos: 0", [])
    assert str(tools.close()).startswith(
        "REPLAY_DIVERGED: model step 1 of turn 1 was offered other tools than when recorded (memo_list missing)")


def test_the_session_cwd_in_a_system_prompt_is_no_divergence() -> None:
    recorder = StepObserver(CWD)
    step = recorder.observe("s", 1, 1, f"cwd: {CWD}", TOOLS)
    assert step is not None
    watch = DivergenceWatch([], [step], True, {}, "/tmp/other")
    watch.step("t", 1, 1, "cwd: /tmp/other", TOOLS)
    assert watch.close() is None


def test_an_older_cassette_compares_nothing_and_says_nothing() -> None:
    watch = DivergenceWatch([], [], False, {}, CWD)
    watch.result("root/0", "memo_list", False, b"1", None)
    watch.step("s", 1, 1, "x", TOOLS)
    assert watch.close() is None


def test_a_failure_digest_keeps_the_code_not_the_message() -> None:
    assert result_digest(True, None, "FS_NOT_FOUND", (), CWD) == result_digest(True, None, "FS_NOT_FOUND", (), "/x")
    assert result_digest(True, None, "FS_NOT_FOUND", (), CWD) != result_digest(True, None, None, (), CWD)


@pytest.mark.parametrize(("volatile", "message"), [
    ([], "toolCassette.volatile: must be an object of tool name to [pointer, ...]"),
    ({"t": []}, "toolCassette.volatile.t: must be a non-empty list of JSON pointers"),
    ({"t": ["took"]}, "toolCassette.volatile.t[0]: must be a JSON pointer below the root, as /a/0"),
    ({"t": ["/a", "/a"]}, "toolCassette.volatile.t: repeats a pointer"),
])
def test_a_bad_volatile_declaration_is_refused_by_field(volatile: object, message: str, tmp_path: Path) -> None:
    raw = {"mode": "record", "file": "c.ndjson", "include": ["t"], "volatile": volatile}
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, cwd=str(tmp_path))
    assert caught.value.message == message
