"""The sidecar's method handlers: decode a hook, route it to its session's state, answer the shim.

One ``Sidecar`` per connection (no globals). A plain ``dsh`` run has one ``SessionState`` for
the whole process, made from the row config at ``initialize``. A warm host (row config
``warm``, docs/warm-host.md) has none at first: each run the run API sends opens a
``SessionState`` of its own, every hook is routed by its session id, and the run's outcome is
answered when its session closes, while the process lives on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec

from dsh_sidecar.bridge.hooks.tools import ToolHooks
from dsh_sidecar.bridge.session.state import SessionState
from dsh_sidecar.bridge.session.warm import WarmHost, WarmSessionUnknown
from dsh_sidecar.bridge.transport.later import Later, Pending
from dsh_sidecar.bridge.transport.protocol import (
    METHODS,
    PROTOCOL_VERSION,
    REQUIRED,
    InitializeParams,
    InitializeResult,
    Method,
    NotInitialized,
    RegistryParams,
    ShutdownParams,
    ShutdownResult,
    WarmDoneParams,
    WarmNextParams,
)
from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.composition import Composition, compose
from dsh_sidecar.python_core.config import parse_sidecar_config
from dsh_sidecar.python_core.errors import ProtocolError

__all__ = ["Sidecar"]

class Sidecar:
    """State and handlers of one sidecar connection: the process's session, or a warm host's."""

    def __init__(self) -> None:
        self.process: SessionState | None = None
        self.warm: WarmHost | None = None
        # Python's model-call handles are per session; the wire's are per connection.
        self._model_handles: dict[int, tuple[SessionState, int]] = {}
        self._next_model_handle = 0
        # tools/post-execute names only the call's handle: the session its execute named.
        self._tool_sessions: dict[str, SessionState] = {}

    # The process's features, as a plain run and the bridge tests see them.
    @property
    def tools(self) -> ToolHooks | None:
        """The plain run's tool hooks (``None`` in a warm host)."""
        return None if self.process is None else self.process.tools

    async def initialize(self, params: InitializeParams) -> InitializeResult:
        """Check the protocol, parse the config and open the configured features (or the warm host)."""
        if params.protocolVersion != PROTOCOL_VERSION:
            raise ProtocolError(
                f"shim speaks protocol {params.protocolVersion}, sidecar speaks {PROTOCOL_VERSION}; "
                "reinstall the plugin with `dsh-sidecar install`"
            )
        config = parse_sidecar_config(params.config, cwd=params.cwd)
        if config.warm is not None:
            self.warm = await WarmHost.connect(config.warm, dict(params.host), _composition(params))
            return InitializeResult(
                protocolVersion=PROTOCOL_VERSION, hooks=["tools", "llm", "model", "turns", "warm", "steps"],
                sidecarVersion=__version__, askExecute=True, registry="contracts", warm=True,
            )
        state = SessionState()
        state.open(config, params.host, _composition(params))
        self.process = state
        return InitializeResult(
            protocolVersion=PROTOCOL_VERSION, hooks=state.hooks, sidecarVersion=__version__,
            subagent=None if state.subagents is None else state.subagents.setup, askExecute=state.ask_execute,
            standIns=[] if state.tools is None else state.tools.stand_ins(),
            registry="none" if state.tools is None else state.tools.registry_view(),
        )

    async def shutdown(self, _params: ShutdownParams) -> ShutdownResult:
        """Close every feature; report the errors that must fail the DSH process."""
        if self.warm is not None:
            return await self.warm.shutdown()
        if self.process is None:
            return ShutdownResult(exitCode=0, errors=[])
        return await self.process.close()

    def _state(self, session_id: str | None, method: str) -> SessionState:
        if self.warm is not None:
            return self.warm.state(session_id, method)
        if self.process is None:
            raise NotInitialized(method)
        return self.process

    # --- the warm host's own methods (the shim's runner asks, Python answers) ---

    def warm_next(self, _params: WarmNextParams) -> Pending:
        """``warm/next``: the next session to run, once the run API sends one."""
        return Pending(self._warm("warm/next").next)

    def warm_done(self, params: WarmDoneParams) -> Pending:
        """``warm/done``: a session's turn ended and its log is flushed: close it, answer its run."""
        warm = self._warm("warm/done")
        if warm.is_open(params.sessionId):
            # Calls the host never finished keep nothing of a closed session alive.
            state = warm.state(params.sessionId, "warm/done")
            for handle in [h for h, s in self._tool_sessions.items() if s is state]:
                del self._tool_sessions[handle]
            for number in [n for n, (s, _) in self._model_handles.items() if s is state]:
                del self._model_handles[number]
        return Pending(lambda: warm.done(params))

    def _warm(self, method: str) -> WarmHost:
        if self.warm is None:
            raise NotInitialized(method)
        return self.warm

    def tools_registry(self, params: RegistryParams) -> Later | None:
        """``tools/registry`` notification: the registered tools (every session of a warm host)."""
        if self.warm is not None:
            self.warm.registry(params)
            return None
        tools = self._state(None, "tools/registry").tools
        if tools is None:
            raise NotInitialized("tools/registry")
        return tools.registry(params)

    # --- every other hook, routed from the method table ---

    def handler_for(self, method: str) -> Callable[[Any], Any] | None:
        """The handler the server calls for ``method``: the router for a routed row, else the
        connection's own method the row names."""
        row = METHODS[method]
        if row.feature is not None:
            return functools.partial(self.route, method)
        handler: Callable[[Any], Any] | None = getattr(self, row.handler, None)
        return handler

    def route(self, method: str, params: Any) -> Any:
        """Serve a routed row of ``METHODS``: find the session its ``via`` names, hand the params to
        the method ``handler`` of that session's ``feature``, keep the call handles it gives out."""
        row = METHODS[method]
        state, params = self._session(row, method, params)
        if state is None:
            return None  # a closed warm session's notification (``gone_ok``)
        served = state.feature(row.feature) if row.feature is not None else None
        if served is None:
            if row.absent is REQUIRED:
                raise NotInitialized(method)
            return row.absent
        if row.closes == "tool-call":
            self._tool_sessions.pop(params.handle, None)
        if row.opens == "tool-call" and self.warm is not None:
            self._tool_sessions[params.handle] = state
        answer = getattr(served, row.handler)(params)
        if row.notes:
            state.note_session(params.sessionId)
        if row.opens == "model-call" and self.warm is not None and answer.action == "forward":
            # Python's model-call handles are per session; the wire's are per connection.
            self._next_model_handle += 1
            self._model_handles[self._next_model_handle] = (state, answer.handle)
            return msgspec.structs.replace(answer, handle=self._next_model_handle)
        return answer

    def _session(self, row: Method, method: str, params: Any) -> tuple[SessionState | None, Any]:
        """The session that serves ``params`` (``None``: a closed warm session's notification),
        and the params as its feature takes them."""
        if row.via == "tool-call" and self.warm is not None:
            state = self._tool_sessions.get(params.handle)
            if state is None:
                raise WarmSessionUnknown(method, None, handle=True)
            return state, params
        if row.via == "model-call" and self.warm is not None:
            found = self._model_handles.pop(params.handle, None)
            if found is None:
                raise WarmSessionUnknown(method, None, handle=True)
            found_state, handle = found
            return found_state, msgspec.structs.replace(params, handle=handle)
        session_id = params.sessionId if row.via == "id" else None
        if row.gone_ok and self.warm is not None and not self.warm.is_open(session_id or ""):
            return None, params
        return self._state(session_id, method), params


def _composition(params: InitializeParams) -> Composition | None:
    """The run's plugin composition from the loader rows the shim reported (``None``: it reported none)."""
    return None if params.plugins is None else compose(params.plugins)
