"""A `dsh web` session is refused by name (``profile``) before anything is written; a headless one is not.

``data/web.session.jsonl.zstd`` is a real rc.8 `dsh web` session (two tasks typed in Chromium,
the first calling ``weather_lookup``, the loopback provider answering), its working directory
and DSH checkout paths rewritten to ``/srv/example/...``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main as sidecar
from dsh_sidecar.python_core.session_import import ImportUnfaithful, calls_of, one_turn, refuse_other_profile
from dsh_sidecar.python_core.session_import.profile import WEB_SURFACE
from dsh_sidecar.python_core.session_log import final_text, read_session_log

DATA = Path(__file__).parent / "data"
WEB = DATA / "web.session.jsonl.zstd"


def _header(system: object) -> dict[str, Any]:
    return {"type": "request/header", "seq": 3, "time": 2, "data": {"header": {
        "config": {"provider": "deepseek-official"}, "system": system, "tools": []}}}


def test_the_real_web_log_parses_as_two_turns_and_is_refused_as_dsh_web() -> None:
    events = read_session_log(WEB)
    assert events[0].get("agentPreset") == "standard"  # headless rc.8 composes no agent preset
    # The log itself reads like a headless one: two turns, turn 1 of two calls with its answer.
    with pytest.raises(ImportUnfaithful, match=r"^IMPORT_UNFAITHFUL: turns: the session has 2 turns"):
        one_turn(events, None)
    first = one_turn(events, 1)
    assert [(c.turn, c.step) for c in calls_of(first).calls] == [(1, 1), (1, 2)]
    assert final_text(first) == "It is sunny in Paris, 21C."
    for log in (events, first):
        with pytest.raises(ImportUnfaithful) as refused:
            refuse_other_profile(log)
        assert refused.value.field == "profile"
        message = str(refused.value)
        assert message.startswith("IMPORT_UNFAITHFUL: profile: the session ran in `dsh web`: its system prompt is "
                                  "the web GUI's")
        assert "nothing was written; fix: run the task in headless DSH" in message
        assert "/srv/example" not in message and "127.0.0.1" not in message  # never a value


@pytest.mark.parametrize("log", ["retries", "parallel"])
def test_real_headless_logs_pass(log: str) -> None:
    refuse_other_profile(read_session_log(DATA / f"{log}.session.jsonl.zstd"))


@pytest.mark.parametrize("events", [
    [],
    [{"type": "session", "agentPreset": "standard"}, _header("You are an agent.")],  # a preset alone replays
    [{"type": "session"}, _header(None), _header(["not", WEB_SURFACE]), {"type": "request/header", "data": None}],
    [{"type": "session"}, {"type": "user/message", "data": {"text": WEB_SURFACE}}],  # the user may quote it
])
def test_what_is_not_a_web_request_header_passes(events: list[dict[str, Any]]) -> None:
    refuse_other_profile(events)


def test_a_web_system_prompt_in_any_request_header_is_refused() -> None:
    with pytest.raises(ImportUnfaithful, match=r"^IMPORT_UNFAITHFUL: profile: "):
        refuse_other_profile([{"type": "session"}, _header("Base."), _header(f"Base.\n\n{WEB_SURFACE}http://x.")])


def test_the_cli_refuses_it_before_turns_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(WEB, tmp_path / "session.jsonl.zstd")
    for args in ([], ["--turn", "1"]):
        for out in (["--test", "test_web.py"], ["--model-cassette", "m.ndjson"]):
            refused = CliRunner().invoke(sidecar, ["import", "session.jsonl.zstd", *args, *out],
                                         catch_exceptions=False)
            assert refused.exit_code == 1
            assert refused.output.startswith("dsh-sidecar: IMPORT_UNFAITHFUL: profile: the session ran in `dsh web`")
            assert refused.output.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl.zstd"]
