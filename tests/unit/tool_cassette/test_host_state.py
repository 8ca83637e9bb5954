"""Host state: what a recording keeps of a body's observations and events, and how replay relocates."""

from __future__ import annotations

import msgspec
from msgspec import Raw

from dsh_sidecar.python_core.tool_cassette.format import GENESIS, HostState, ResultFrame
from dsh_sidecar.python_core.tool_cassette.host_state import HostCapture, HostEvent, Observed, kept, relocated, restored


def test_kept_relativizes_paths_below_the_cwd_dedupes_them_and_keeps_only_restored_events() -> None:
    capture = HostCapture(
        observed=(Observed("/w/a.txt", "present"), Observed("/w/a.txt", "present"), Observed("/etc/x", "absent")),
        events=(HostEvent("todo/write", Raw(b'{"todos": []}')), HostEvent("tool/progress", Raw(b"{}"))),
    )
    state = kept(capture, "/w")
    assert state is not None
    assert state.observe == ("a.txt", "/etc/x")
    assert [(e.type, bytes(e.data)) for e in state.events] == [("todo/write", b'{"todos":[]}')]
    assert state.cwd == ""
    assert kept(None, "/w") is None
    assert kept(HostCapture(), "/w", b'{"value":{"path":"/wx/a"}}') is None  # /wx is not below /w


def test_an_outcome_naming_the_cwd_keeps_it_and_replay_relocates_value_and_content() -> None:
    state = kept(None, "/rec", b'{"value":{"path":"/rec/out.txt"}}')
    assert state == HostState(cwd="/rec")
    frame = ResultFrame(seq=0, prev=GENESIS, ordinal=0, isError=False, value=Raw(b'{"path":"/rec/out.txt"}'),
                        additionalContexts=Raw(b"[]"), host=state)
    assert bytes(relocated(frame, "/play").value) == b'{"path":"/play/out.txt"}'
    assert relocated(frame, "/rec") is frame
    assert relocated(msgspec.structs.replace(frame, host=msgspec.UNSET), "/play").value == frame.value


def test_restored_gives_the_shim_absolute_paths_and_the_events_verbatim() -> None:
    state = HostState(observe=("a.txt",), events=(HostEvent("todo/write", Raw(b'{"todos":[1]}')),))
    assert bytes(restored(state, "/w")) == (
        b'{"events":[{"data":{"todos":[1]},"type":"todo/write"}],"observe":["/w/a.txt"]}'
    )
