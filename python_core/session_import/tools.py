"""Whether a session log can become a tool cassette of the selected tools: what it lacks, by name.

Rule: a tool cassette replays a call by serving what the tool returned (``call/result.value``,
its ``meta`` and host state) at a structural call path, and stands a tool up from its contract
(the ``tool`` frame's output schema). A session log holds each call's name, id and argument text
(``tool/call``) and the text the result showed the model (``tool/result``), nothing more: a
registered tool renders a served value itself, so the shown text cannot stand for the value. The
selected calls are therefore refused by name, never written half (docs/import.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

from dsh_sidecar.python_core.session_import.log_calls import ImportUnfaithful
from dsh_sidecar.python_core.session_log import tool_calls
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig

__all__ = ["MISSING", "refuse_tools", "selected_calls"]

MISSING: Final = ("call/result.value (the value the tool returned; the log holds the text shown to the model)",
                  "call/result.meta and host state", "call/start.path (the structural call path)",
                  "the tool frame's output schema")


def selected_calls(events: Sequence[Mapping[str, Any]], include: Sequence[str]) -> dict[str, int]:
    """The selected tools the log called, with their call counts (log order)."""
    selection = ToolCassetteConfig(mode="record", file="", include=tuple(include))
    counts: dict[str, int] = {}
    for call in tool_calls(events):
        if selection.selects(call.tool):
            counts[call.tool] = counts.get(call.tool, 0) + 1
    return counts


def refuse_tools(events: Sequence[Mapping[str, Any]], include: Sequence[str]) -> NoReturn:
    """Refuse the selection by name: what a tool cassette of its calls needs and the log lacks.

    Raises:
        ImportUnfaithful: always; ``field`` is ``tools``, the message names the selected tools
            (or that none was called) and the missing fields.
    """
    counts = selected_calls(events, include)
    if not counts:
        raise ImportUnfaithful("tools", f"no call of a tool matching {', '.join(include)} is in the log",
                               "name the tools `dsh-sidecar sessions show SESSION` lists")
    names = ", ".join(f"{tool} ({n} call{'s' if n != 1 else ''})" for tool, n in counts.items())
    raise ImportUnfaithful("tools", f"{names}: the log lacks {'; '.join(MISSING)}",
                           "import without --tools (the tools run live at replay), or record them with a tool "
                           "cassette (toolCassette.mode: record)")
