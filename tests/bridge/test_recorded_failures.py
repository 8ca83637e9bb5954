"""``RecordedFailures``: the failed calls a recording wrote, named by tool, path and code only."""

from __future__ import annotations

import msgspec
from msgspec import UNSET

from dsh_sidecar.bridge.hooks.recorded_failures import RecordedFailures
from dsh_sidecar.python_core.tool_cassette.engine import HostToolResult
from dsh_sidecar.python_core.tool_cassette.format import ToolErrorInfo, ToolFailure

OK = HostToolResult(isError=False, content=msgspec.Raw(b"[]"))


def _failed(code: str | None = None) -> HostToolResult:
    info = UNSET if code is None else ToolErrorInfo(name="HarnessError", code=code)
    return HostToolResult(isError=True, content=msgspec.Raw(b"[]"),
                      error=ToolFailure(message="secret-token-in-message", info=info))


def test_only_failed_outcomes_the_recording_wrote_are_named() -> None:
    failures = RecordedFailures()
    failures.captured("h1", "echo", "root/0", OK)
    failures.captured("h2", "weather", "root/1", _failed("UPSTREAM_DOWN"))
    failures.captured("h3", "broken", "root/2", _failed())
    failures.captured("h4", "broken", "root/3", _failed())
    for handle in ("h1", "h2", "h3"):
        failures.settled(handle, written=True)
    failures.settled("h4", written=False)  # the recording had already failed: not in the file

    assert failures.note(recorded=3, published=True) == (
        "TOOL_FAILURE_RECORDED: 2 of 3 recorded call(s) failed (weather at root/1 with runtime code UPSTREAM_DOWN; "
        "broken at root/2 with no runtime code); the cassette is published anyway and replays them; if a tool "
        "should succeed, fix it (or the service it needs) and re-record (record mode all)"
    )


def test_the_note_shows_three_calls_never_a_message_or_a_code_that_is_not_one() -> None:
    failures = RecordedFailures()
    for n in range(5):
        failures.captured(f"h{n}", "t", f"root/{n}", _failed("not a code: secret" if n == 0 else "E"))
        failures.settled(f"h{n}", written=True)

    note = failures.note(recorded=5, published=False)

    assert note is not None and "secret" not in note
    assert note.startswith("TOOL_FAILURE_RECORDED: 5 of 5 recorded call(s) failed (t at root/0 with no runtime code; "
                           "t at root/1 with runtime code E; t at root/2 with runtime code E; and 2 more); the "
                           "cassette is not published (see the errors);")


def test_a_recording_without_failures_has_no_note() -> None:
    failures = RecordedFailures()
    failures.captured("h1", "echo", "root/0", OK)
    failures.settled("h1", written=True)
    assert failures.note(recorded=1, published=True) is None
