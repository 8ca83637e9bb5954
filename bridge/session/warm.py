"""A warm host's sidecar side: sessions opened from the run API's control socket, one state each.

The run API (``bridge/api/warm_pool.py``) listens on a Unix socket and starts DSH with the row
config ``warm: <socket>``; the sidecar connects at ``initialize``. Each ``WarmRun`` line it
reads becomes a ``SessionState`` opened from that run's own config and cwd, and the answer to
the shim runner's pending ``warm/next``; ``warm/done`` closes the session (publish or refuse,
its report) and sends the run's ``WarmReply``. The shim only relays: it creates the session,
sends the task, waits for idle and flushes the log, as rc.8's headless runner does.

A replay whose recorded tools no plugin of the host registered (an MCP server gone) stays warm:
the ``WarmJob`` names those stand-ins and the shim registers them on that session's agent only.

A session runs with the process's working directory set to its own folder (``processCwd``), as a
cold process has it: third-party tools read and write relative to ``process.cwd()`` (issue 29).
The process has one working directory, so a run whose folder differs from an open session's
waits until that session closes; runs in the same folder may overlap. The run API's pool sends
one run at a time, so its runs never wait.
"""

from __future__ import annotations

import uuid

import anyio
import msgspec
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from dsh_sidecar.bridge.session.state import SessionState
from dsh_sidecar.bridge.transport.control import MAX_CONTROL_LINE, WarmReply, WarmRun
from dsh_sidecar.bridge.transport.later import Later
from dsh_sidecar.bridge.transport.protocol import (
    Empty,
    RegistryParams,
    ShutdownResult,
    StandIn,
    WarmDoneParams,
    WarmJob,
)
from dsh_sidecar.python_core.cli_errors import EXIT_FAILED
from dsh_sidecar.python_core.composition import Composition
from dsh_sidecar.python_core.config import parse_sidecar_config
from dsh_sidecar.python_core.errors import ProtocolError, SidecarError

__all__ = ["WarmHost", "WarmSessionUnknown"]

class WarmSessionUnknown(ProtocolError):
    """A hook of a warm host named no session, or one that is not open."""

    code = "WARM_SESSION_UNKNOWN"

    def __init__(self, method: str, session_id: str | None, *, handle: bool = False) -> None:
        which = "no session" if not session_id else "a session that is not open"
        if handle:
            which = "a call handle no open session gave out"
        super().__init__(f"{method} names {which} in a warm host; every call of a warm host belongs to a "
                         "session the run API opened (an agentless call or a delegated child cannot run warm)")


class _Open:
    """A warm session: the run it answers, its state and the stderr lines it has so far."""

    __slots__ = ("lines", "run", "state")

    def __init__(self, run: WarmRun, state: SessionState, lines: list[str]) -> None:
        self.run = run
        self.state = state
        self.lines = lines


class WarmHost:
    """The sessions of one warm DSH process, keyed by session id."""

    def __init__(self, stream: SocketStream, host: dict[str, str | None], plugins: Composition | None = None,
                 ) -> None:
        self._stream = stream
        self._receive = BufferedByteReceiveStream(stream)
        self._host = host
        # The warm process's composition: every session it serves runs with it.
        self._plugins = plugins
        self._open: dict[str, _Open] = {}
        self._registry: RegistryParams | None = None
        self._send = anyio.Lock()
        self._decoder = msgspec.json.Decoder(WarmRun)
        self._closed = False
        # Set (and replaced) whenever a session closes: a run waiting for the process cwd looks again.
        self._session_closed = anyio.Event()

    @classmethod
    async def connect(cls, path: str, host: dict[str, str | None], plugins: Composition | None = None,
                      ) -> WarmHost:
        """Connect to the run API's control socket at ``path``."""
        try:
            stream = await anyio.connect_unix(path)
        except OSError as error:
            raise ProtocolError(f"warm: cannot connect to the run API's control socket ({error.strerror}); "
                                "a warm host is started by the run API, not by hand") from None
        return cls(stream, host, plugins)

    def is_open(self, session_id: str) -> bool:
        """Whether ``session_id`` is an open session of this host."""
        return session_id in self._open

    def state(self, session_id: str | None, method: str) -> SessionState:
        """The open session a hook belongs to."""
        found = self._open.get(session_id) if session_id else None
        if found is None:
            raise WarmSessionUnknown(method, session_id)
        return found.state

    def registry(self, params: RegistryParams) -> None:
        """Keep the host's registered tools: every session opened later is told of them."""
        self._registry = params

    async def next(self) -> WarmJob:
        """The next session to run: wait for a run on the control socket and open its state."""
        while not self._closed:
            try:
                line = await self._receive.receive_until(b"\n", MAX_CONTROL_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError, anyio.ClosedResourceError):
                break  # the run API is gone: no more sessions
            try:
                run = self._decoder.decode(line)
            except msgspec.DecodeError as error:
                raise ProtocolError(f"warm: the control line is not a run ({error})") from None
            job = await self._start(run)
            if job is not None:
                return job
        self._closed = True
        return WarmJob(stop=True)

    async def _start(self, run: WarmRun) -> WarmJob | None:
        lines: list[str] = []
        state = SessionState(warn=lines.append)
        try:
            config = parse_sidecar_config(run.config, cwd=run.cwd)
            unsuited = _unsuited(config.subagent_cassette is not None, config.mock.enabled, config.warm is not None)
            if unsuited:
                await self._reply(WarmReply(id=run.id, unsuited=unsuited))
                return None
            state.open(config, self._host, self._plugins)
        except SidecarError as error:
            text = f"dsh-sidecar: {error}\n" + (f"dsh-sidecar: fix: {error.hint}\n" if error.hint else "")
            await self._reply(WarmReply(id=run.id, exitCode=EXIT_FAILED, stderr=text))
            return None
        stand_ins = _stand_ins(state, self._registry)
        if self._registry is not None and state.tools is not None:
            # The session's own view: the host's tools and the stand-ins its agent alone registers.
            own = msgspec.structs.replace(self._registry, standIns=[s.name for s in stand_ins], failed=[])
            later = state.tools.registry(own)
            if isinstance(later, Later):
                await later.writer.written(later.ticket)
        while any(o.run.cwd != run.cwd for o in self._open.values()):
            await self._session_closed.wait()
        session_id = f"session-{uuid.uuid4()}"
        state.note_session(session_id)
        self._open[session_id] = _Open(run, state, lines)
        return WarmJob(sessionId=session_id, cwd=run.cwd, task=run.task, standIns=stand_ins, processCwd=run.cwd)

    async def done(self, params: WarmDoneParams) -> Empty:
        """Close the session whose turn ended, and answer its run."""
        found = self._open.pop(params.sessionId, None)
        if found is None:
            raise WarmSessionUnknown("warm/done", params.sessionId)
        self._session_closed.set()
        self._session_closed = anyio.Event()
        await self._reply(await _finish(found, params))
        return Empty()

    async def shutdown(self) -> ShutdownResult:
        """The process is ending: close the sessions still open, each failing its run."""
        for session_id, found in list(self._open.items()):
            del self._open[session_id]
            params = WarmDoneParams(sessionId=session_id, failure="the warm host exited during the run")
            await self._reply(msgspec.structs.replace(await _finish(found, params), ended=True))
        self._closed = True
        await self._stream.aclose()
        return ShutdownResult(exitCode=0, errors=[])

    async def _reply(self, reply: WarmReply) -> None:
        async with self._send:
            try:
                await self._stream.send(msgspec.json.encode(reply) + b"\n")
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the run API is gone (it gave up on the run): nobody to answer


def _stand_ins(state: SessionState, registry: RegistryParams | None) -> list[StandIn]:
    """A replay's recorded tools that no plugin of the host registered (an imported cassette's in
    any case, to shadow the plugin's): the shim registers them on this session's agent only
    (rc.8 scopes a registration made through ``agent.ctx``), so another session of the host
    never sees them."""
    registered = {t.name for t in registry.tools} if registry is not None else set()
    wanted = state.tools.stand_ins() if state.tools is not None else []
    return sorted((s for s in wanted if s.shadow or s.name not in registered), key=lambda s: s.name)


def _unsuited(subagent: bool, mock: bool, nested: bool) -> str:
    if subagent:
        return "a subagent cassette registers a provider for the whole process"
    if not mock:
        return "the mock route is on in a warm host; a run with mock.enabled false needs its own"
    if nested:
        return "warm inside a warm run"
    return ""


async def _finish(found: _Open, params: WarmDoneParams) -> WarmReply:
    """The run's reply: the lines a cold process prints, in its order, and its exit code."""
    status = await found.state.close()
    lines = list(found.lines)
    if params.failure:
        lines.append(f"dsh: {params.failure}")
    if params.reason == "error":
        lines.append(f"dsh: {params.code}: {params.message}")
    lines += [f"dsh-sidecar: {line}" for line in (*status.notes, *status.errors)]
    lines += [f"dsh-sidecar: fix: {hint}" for hint in status.fixes]
    turn = 0 if params.reason == "completed" and not params.failure else EXIT_FAILED
    return WarmReply(
        id=found.run.id, sessionId=params.sessionId, exitCode=max(turn, status.exitCode),
        stdout=params.text + "\n", stderr="".join(f"{line}\n" for line in lines),
    )
