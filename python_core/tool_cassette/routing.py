"""Which way a call entering ``tools/execute`` goes, decided before any I/O (sans-I/O).

Rule, in this order: a stubbed tool is served by its stub (stubs keep their tools out of the
cassette); a tool the cassette selects goes to the cassette; an unselected tool the offline
guard does not allow is refused (``LIVE_TOOL_BLOCKED``, named once per tool at shutdown, every
call refused); anything else runs live. With a cassette, every unselected live call is also
checked against the built-ins' dependency rules (``dependencies.py``): at record time a named
dependency is a warning; at replay it becomes an error only if the dependent call then fails.

The bridge (``bridge/hooks/tools.py``) turns the wire params into ``admit`` and the route back
into an answer; it holds no rule of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from dsh_sidecar.python_core.errors import LiveToolBlocked
from dsh_sidecar.python_core.tool_cassette.dependencies import DependencyTracker, ToolDependency

__all__ = ["Blocked", "CallRouter", "Live", "Route", "Selected", "Stubbed"]


class Stubbed(msgspec.Struct, frozen=True):
    """Served by the tool's stub."""


class Selected(msgspec.Struct, frozen=True):
    """Recorded or replayed by the cassette."""


class Blocked(msgspec.Struct, frozen=True):
    """Refused: the offline guard does not let this tool run live."""

    error: LiveToolBlocked


class Live(msgspec.Struct, frozen=True):
    """Runs for real (``watched``: the trace or a cassette still wants to see it)."""

    watched: bool


Route = Stubbed | Selected | Blocked | Live


class CallRouter:
    """Routes each call and keeps what the routing found for shutdown: the blocked tools and the
    built-ins' dependencies a recording or a failed replayed call named."""

    def __init__(self, *, stubbed: Sequence[str], live_tools: Sequence[str] | None,
                 selects: Callable[[str], bool] | None, dependencies: DependencyTracker | None,
                 recording: bool, traced: bool) -> None:
        self._stubbed = frozenset(stubbed)
        self._live_tools = None if live_tools is None else frozenset(live_tools)
        self._selects = selects
        self._dependencies = dependencies
        self._recording = recording
        self._traced = traced
        self.blocked: list[LiveToolBlocked] = []
        """One ``LIVE_TOOL_BLOCKED`` per tool, in the order first refused: the run fails with them."""
        self.named: list[ToolDependency] = []
        """Dependencies named: warnings of a recording, errors of a replay whose dependent call failed."""
        self._depends: dict[str, ToolDependency] = {}

    def selects(self, tool: str) -> bool:
        """Whether the cassette records or replays ``tool`` (a stubbed tool never)."""
        return self._selects is not None and tool not in self._stubbed and self._selects(tool)

    def admit(self, handle: str, tool: str, path: str, args_json: str) -> Route:
        """The route of the call ``handle`` entering ``tools/execute``."""
        if tool in self._stubbed:
            return Stubbed()
        selected = self.selects(tool)
        if not selected and self._live_tools is not None and "*" not in self._live_tools \
                and tool not in self._live_tools:
            blocked = LiveToolBlocked(tool, path)
            if all(e.tool != tool for e in self.blocked):
                self.blocked.append(blocked)
            return Blocked(blocked)
        if self._dependencies is not None:
            dependency = self._dependencies.call(tool, path, args_json, selected)
            if dependency is not None and self._recording:
                self.named.append(dependency)  # a warning at record time: the run still records
            elif dependency is not None:
                self._depends[handle] = dependency
        if selected:
            return Selected()
        return Live(watched=self._traced)

    def settled(self, handle: str, failed: bool) -> bool:
        """The call ``handle`` ended: a replayed run's dependency is named only if the call failed
        (then True: the built-in rule named this call more precisely than any other check could)."""
        dependency = self._depends.pop(handle, None)
        if dependency is not None and failed:
            self.named.append(dependency)  # the replay failed on it: an error
            return True
        return False
