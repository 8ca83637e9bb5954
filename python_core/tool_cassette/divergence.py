"""Divergence of a replay from its recording: named, never silent.

Rule: a replay serves the selected calls without their bodies; everything else runs live. What
runs live may see another world than the recording did (a store the replayed call did not
write, a file it did not make), so the recording keeps digests (never values) of what it does
not serve: the final outcome of every *unselected* call (``observed/result``) and what each
model step was shown, its system prompt and its tool list (``observed/step``). A replay digests
the same things the same way and compares; the first difference is one ``REPLAY_DIVERGED``
line naming the call or the step, and the selected call served last before it, whose body did
not run, as the likely cause. A warning by default, an error under ``strictReplay``.

What a digest covers: a success's value (without the tool's ``volatile`` pointers, the session
cwd written ``<cwd>``), a failure's runtime code only (its message may name a folder); a step's
system prompt and each offered tool's name, description and parameters, cwd as ``<cwd>`` (the
model cassette's view, ``model_request.py``). The ``volatile`` pointers a recording used
are kept in each ``observed/result`` frame and applied again at replay, so digests compare.

Sans I/O: the bridge feeds events in; frames come out (record) and one error (replay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from msgspec import UNSET

from dsh_sidecar.python_core.canonical import canonical_bytes, digest_bytes
from dsh_sidecar.python_core.errors import CanonicalJsonError, SidecarError
from dsh_sidecar.python_core.json_pointers import parse_pointer, without
from dsh_sidecar.python_core.model_request import ModelRequestInvalid, normalize, parts_of, replace_cwd
from dsh_sidecar.python_core.tool_cassette.format import GENESIS, ObservedResult, ObservedStep

__all__ = [
    "DivergenceWatch",
    "ReplayDiverged",
    "StepObserver",
    "observe_result",
    "result_digest",
    "step_digests",
]


class ReplayDiverged(SidecarError):
    """A replay saw something its recording did not: an unselected call's outcome or a step's input."""

    code = "REPLAY_DIVERGED"

    def __init__(self, what: str, cause: tuple[str, str] | None, reads: str = "read", rerecord: bool = False) -> None:
        if cause is not None:
            tool, path = cause
            why = f"it may {reads} what the replayed {tool} at {path} did not do: select both, or neither"
            self.hint = (f"select {tool} and what depends on it in toolCassette.include, or neither; a field that "
                         "differs on every run is declared in toolCassette.volatile (docs/test-logic.md)")
        else:
            why = "no selected call was served before it: what it reads changed since the recording"
            self.hint = ("re-record, or declare the result fields that differ on every run in "
                         "toolCassette.volatile (docs/test-logic.md)")
        if rerecord:
            self.hint += "; volatile pointers declared after the recording count once it is re-recorded"
        super().__init__(f"{what}; {why}")


def result_digest(is_error: bool, value: bytes | None, code: str | None, ignore: Sequence[str], cwd: str) -> str | None:
    """The digest of one outcome (see the module rule); ``None`` when it has no canonical form.

    ``value``: a success's value as JSON text; ``code``: a failure's runtime code, if any.
    """
    if is_error:
        return digest_bytes(canonical_bytes({"isError": True, "code": code}))
    if value is None:
        return None
    try:
        decoded: Any = msgspec.json.decode(value)
        for pointer in ignore:
            decoded = without(decoded, parse_pointer(pointer))
        if len(cwd) > 1:  # a root cwd would rewrite every slash
            decoded = replace_cwd(decoded, cwd)
        return digest_bytes(canonical_bytes({"isError": False, "value": decoded}))
    except (msgspec.DecodeError, CanonicalJsonError):
        return None


def observe_result(path: str, tool: str, is_error: bool, value: bytes | None, code: str | None,
                   volatile: Mapping[str, tuple[str, ...]], cwd: str) -> ObservedResult | None:
    """The unchained ``observed/result`` frame of an unselected call's final outcome (``None``:
    nothing comparable, e.g. a value with no canonical form)."""
    ignore = volatile.get(tool, ())
    digest = result_digest(is_error, value, code, ignore, cwd)
    if digest is None:
        return None
    return ObservedResult(seq=0, prev=GENESIS, path=path, tool=tool, isError=is_error, digest=digest, ignore=ignore)


def step_digests(system: str | None, tools: Sequence[Mapping[str, Any]], cwd: str,
                 ) -> tuple[str | None, tuple[tuple[str, str], ...]] | None:
    """The system prompt's digest and each offered tool's ``(name, digest)``, as the model
    cassette digests them (``None``: a part with no canonical form, or not a tool list)."""
    request: dict[str, Any] = {"provider": "", "model": "", "tools": list(tools)}
    if system is not None:
        request["system"] = system
    try:
        parts = parts_of(normalize(request, cwd=cwd))
    except (CanonicalJsonError, ModelRequestInvalid):
        return None
    return parts.system, tuple((t.name, t.digest) for t in parts.tools)


class StepObserver:
    """Number the steps of a run's sessions: sessions in the order their first step came, each
    (session, turn, step) once (a retried request is the same step)."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._sessions: dict[str, int] = {}
        self._seen: set[tuple[int, int, int]] = set()

    def observe(self, session_id: str, turn: int, step: int, system: str | None,
                tools: Sequence[Mapping[str, Any]]) -> ObservedStep | None:
        """The unchained ``observed/step`` frame of a step seen for the first time, else ``None``."""
        session = self._sessions.setdefault(session_id, len(self._sessions))
        if (session, turn, step) in self._seen:
            return None
        self._seen.add((session, turn, step))
        digests = step_digests(system, tools, self.cwd)
        if digests is None:
            return None
        system_digest, offered = digests
        return ObservedStep(seq=0, prev=GENESIS, session=session, turn=turn, step=step,
                            system=UNSET if system_digest is None else system_digest, tools=offered)


def _step_name(step: ObservedStep) -> str:
    where = f"model step {step.step} of turn {step.turn}"
    return where if step.session == 0 else f"{where} (session {step.session + 1})"


def _tool_differences(recorded: Sequence[tuple[str, str]], actual: Sequence[tuple[str, str]]) -> str:
    before, after = dict(recorded), dict(actual)
    out = [f"{name} missing" for name in before if name not in after]
    out += [f"{name} added" for name in after if name not in before]
    out += [f"{name} changed" for name in after if name in before and before[name] != after[name]]
    shown = ", ".join(out[:3]) + (f" and {len(out) - 3} more" if len(out) > 3 else "")
    return shown or "their order"


class DivergenceWatch:
    """Compare a replay's unselected outcomes and model steps with the recording's digests.

    Only the first difference is kept (``first``): what follows it usually follows from it.
    A version 1 to 4 cassette has no digests: ``enabled`` is false and nothing is compared.
    """

    def __init__(self, results: Sequence[ObservedResult], steps: Sequence[ObservedStep], enabled: bool,
                 volatile: Mapping[str, tuple[str, ...]], cwd: str) -> None:
        self.enabled = enabled
        self._results = {r.path: r for r in results}
        self._steps = {(s.session, s.turn, s.step): s for s in steps}
        self._volatile = volatile
        self._observer = StepObserver(cwd)
        self.cwd = cwd
        self._made: set[str] = set()
        self._served: tuple[str, str] | None = None
        self.first: ReplayDiverged | None = None

    def served(self, tool: str, path: str) -> None:
        """A selected call was served from the cassette: its body did not run."""
        self._served = (tool, path)

    def _diverged(self, error: ReplayDiverged) -> None:
        if self.first is None:
            self.first = error

    def result(self, path: str, tool: str, is_error: bool, value: bytes | None, code: str | None) -> None:
        """An unselected call's final outcome, live."""
        if not self.enabled:
            return
        self._made.add(path)
        recorded = self._results.get(path)
        if recorded is None:
            self._diverged(ReplayDiverged(f"unselected {tool} at {path} was not called when recorded",
                                          self._served, "follow"))
            return
        if recorded.tool != tool:
            self._diverged(ReplayDiverged(
                f"unselected {tool} at {path} ran where the recording called {recorded.tool}", self._served, "follow"))
            return
        digest = result_digest(is_error, value, code, recorded.ignore, self.cwd)
        if digest == recorded.digest:
            return
        if is_error and not recorded.isError:
            what = f"unselected {tool} at {path} failed ({code or 'no runtime code'}) where it succeeded when recorded"
        elif recorded.isError and not is_error:
            what = f"unselected {tool} at {path} succeeded where it failed when recorded"
        else:
            what = f"unselected {tool} at {path} returned another result than when recorded"
        rerecord = tuple(self._volatile.get(tool, ())) != recorded.ignore
        self._diverged(ReplayDiverged(what, self._served, "read", rerecord))

    def step(self, session_id: str, turn: int, step: int, system: str | None,
             tools: Sequence[Mapping[str, Any]]) -> None:
        """A model step's request, live: its system prompt and tool list."""
        if not self.enabled:
            return
        seen = self._observer.observe(session_id, turn, step, system, tools)
        if seen is None:
            return
        recorded = self._steps.get((seen.session, seen.turn, seen.step))
        if recorded is None:
            self._diverged(ReplayDiverged(f"{_step_name(seen)} was not made when recorded", self._served, "follow"))
        elif recorded.system != seen.system:
            self._diverged(ReplayDiverged(f"{_step_name(seen)} saw another system prompt than when recorded",
                                          self._served, "show"))
        elif recorded.tools != seen.tools:
            self._diverged(ReplayDiverged(
                f"{_step_name(seen)} was offered other tools than when recorded "
                f"({_tool_differences(recorded.tools, seen.tools)})", self._served, "show"))

    def close(self) -> ReplayDiverged | None:
        """The first difference, counting a recorded unselected call the replay never made."""
        if self.enabled and self.first is None:
            for path, recorded in self._results.items():
                if path not in self._made:
                    self._diverged(ReplayDiverged(
                        f"unselected {recorded.tool} at {path}, called when recorded, was not called",
                        self._served, "follow"))
                    break
        return self.first
