"""Whether a session ran in a profile whose requests headless DSH sends: `dsh web`'s do not.

Rule: an imported cassette replays through headless DSH, which fingerprints the requests it
composes itself. rc.8's web profile sends other ones (measured, docs/import.md "A `dsh web`
session"): its system prompt adds the web app's surface section (``@deepseek-ai/dsh-web-app``
``webSurfacePrompt``: it names the GUI's URL, a port of that boot) and the DSH checkout's path;
an agent preset (``@deepseek-ai/dsh-agent-presets``: "the preset decides the tool schemas and
prompt sections the model sees"), which headless rc.8 does not compose, chooses its tools; and
the web client tags each task's ``source`` with an ``rpcId`` (new at every send) and its
``clientTimeZone``. Such a log imports to a cassette whose every call is a
``MODEL_CASSETTE_MISMATCH`` at replay, so it is refused by name before anything is written.

Found from what the log holds: a request header's ``system`` holding the web surface section.
The session header's ``agentPreset`` alone is not refused: a project whose pytest config
composes the agent-presets row into headless DSH could replay it (and a replay that differs
still fails closed, naming the part).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from dsh_sidecar.python_core.session_import.log_calls import ImportUnfaithful

__all__ = ["refuse_other_profile"]

# The opening of rc.8's web surface section (dsh-web-app lib/index.js, webSurfacePrompt).
WEB_SURFACE: Final = "You are interacting with the user through the DeepSeek Harness Web GUI at "
_FIX: Final = ("run the task in headless DSH through the sidecar and record it (dsh-sidecar run TASK "
               "--model-cassette FILE --record-mode once), or import a session of `dsh --profile headless`")


def _web(events: Sequence[Mapping[str, Any]]) -> bool:
    for event in events:
        data = event.get("data")
        header = data.get("header") if event.get("type") == "request/header" and isinstance(data, Mapping) else None
        system = header.get("system") if isinstance(header, Mapping) else None
        if isinstance(system, str) and WEB_SURFACE in system:
            return True
    return False


def refuse_other_profile(events: Sequence[Mapping[str, Any]]) -> None:
    """Refuse a log whose requests headless DSH never sends (checked before turns: no turn of it
    replays).

    Raises:
        ImportUnfaithful: ``profile``: the session ran in `dsh web`.
    """
    if _web(events):
        raise ImportUnfaithful("profile", "the session ran in `dsh web`: its system prompt is the web GUI's (it "
                                          "names the GUI's URL), an agent preset chose its tools and the web client "
                                          "tagged its task (a request id); headless DSH sends none of them, so every "
                                          "imported call would be a MODEL_CASSETTE_MISMATCH at replay (system prompt, "
                                          "tools, message 0)", _FIX)
