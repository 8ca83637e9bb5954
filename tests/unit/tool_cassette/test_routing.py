"""The call router decides, with no I/O, which way a call entering tools/execute goes."""

from __future__ import annotations

import json

from dsh_sidecar.python_core.tool_cassette.dependencies import DependencyTracker
from dsh_sidecar.python_core.tool_cassette.routing import Blocked, CallRouter, Live, Selected, Stubbed


def _router(**overrides: object) -> CallRouter:
    options: dict[str, object] = {
        "stubbed": ["weather"], "live_tools": ["echo"], "selects": lambda tool: tool in ("weather", "notes"),
        "dependencies": None, "recording": False, "traced": False,
    }
    options.update(overrides)
    return CallRouter(**options)  # type: ignore[arg-type]


def test_a_stub_wins_over_the_cassette_and_a_selected_tool_goes_to_the_cassette() -> None:
    router = _router()
    assert isinstance(router.admit("h0", "weather", "root/0", "{}"), Stubbed)
    assert not router.selects("weather")  # a stubbed tool is never the cassette's
    assert isinstance(router.admit("h1", "notes", "root/1", "{}"), Selected)


def test_the_offline_guard_refuses_each_call_and_names_each_tool_once() -> None:
    router = _router()
    first = router.admit("h0", "bash", "root/0", "{}")
    second = router.admit("h1", "bash", "root/1", "{}")
    assert isinstance(first, Blocked) and isinstance(second, Blocked)
    assert first.error.code == "LIVE_TOOL_BLOCKED" and "root/0" in str(first.error)
    assert [e.tool for e in router.blocked] == ["bash"]
    assert router.admit("h2", "echo", "root/2", "{}") == Live(watched=False)
    assert _router(live_tools=["*"]).admit("h3", "bash", "root/3", "{}") == Live(watched=False)
    assert _router(live_tools=None, traced=True).admit("h4", "bash", "root/4", "{}") == Live(watched=True)


def test_a_replayed_dependency_is_named_only_when_the_dependent_call_fails() -> None:
    def router(recording: bool) -> CallRouter:
        return _router(stubbed=[], live_tools=None, selects=lambda tool: tool == "write",
                       dependencies=DependencyTracker("/work"), recording=recording)

    write = json.dumps({"file_path": "notes.txt", "content": "x"})
    read = json.dumps({"file_path": "notes.txt"})
    replay = router(recording=False)
    assert isinstance(replay.admit("h0", "write", "root/0", write), Selected)
    assert isinstance(replay.admit("h1", "read", "root/1", read), Live)
    assert not replay.settled("h1", failed=False) and replay.named == []
    replay.admit("h2", "read", "root/2", read)
    assert replay.settled("h2", failed=True) and [d.code for d in replay.named] == ["TOOL_DEPENDENCY"]
    recording = router(recording=True)
    recording.admit("h0", "write", "root/0", write)
    recording.admit("h1", "read", "root/1", read)
    assert [d.code for d in recording.named] == ["TOOL_DEPENDENCY"]  # a warning at record time
