"""From the user text entering a step to a mock plan, or to the status of a refused turn.

Rule: a turn is a mock turn when one of the texts entering its first step is a ``/mock``
command or a near miss of one (``find_command``). Its plan is assembled here: the grammar, then for ``replay`` the
path policy, the source, the validator and the nested-tool preflight; any refusal on the way
is the turn's error and ``refused_turn_status`` its terminal ``mock/status``. Reading the
replay source is the only I/O (read-only, ``source.read_source``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from typing import Literal

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.command import ReplayCommand, parse_command
from dsh_sidecar.python_core.mock.nearmiss import is_near_miss
from dsh_sidecar.python_core.mock.nested import DEFAULT_NESTED_TOOLS, reject_nested_tools
from dsh_sidecar.python_core.mock.paths import resolve_replay_path
from dsh_sidecar.python_core.mock.plan import MockPlan, MockStatus, refused_status
from dsh_sidecar.python_core.mock.source import load_source, read_source, source_name_for

__all__ = ["assemble_plan", "find_command", "refused_turn_status"]

_COMMAND = "/mock"


def find_command(texts: Sequence[str]) -> str | None:
    """The first text that is a ``/mock`` command or a near miss of one, else ``None``.

    A near miss (``nearmiss.py``) makes a mock turn too, which the grammar then refuses with a
    "did you mean": routed to the mock, it never reaches a real model.
    """
    return next((text for text in texts if _is_command(text)), None)


def _is_command(text: str) -> bool:
    words = text.split(None, 1)
    return bool(words) and (words[0] == _COMMAND or is_near_miss(text) is not None)


def assemble_plan(
    text: str,
    *,
    session_id: str,
    turn: int,
    cwd: str,
    default_gap_ms: int,
    nested_tools: Collection[str] = (),
    replayed_delegation: Collection[str] = (),
    sessions_roots: Sequence[str] = (),
) -> MockPlan:
    """Build the plan of the ``/mock`` command ``text`` for ``turn`` of ``session_id``.

    ``nested_tools`` extends the default nested tools a replay refuses; ``replayed_delegation``
    are the delegation tools a subagent cassette serves, which a replay may call.
    ``sessions_roots`` are where replay may read besides ``cwd``.

    Raises:
        SidecarError: the command, path, source, script or nested-tool preflight refused it.
    """
    command = parse_command(text)
    if not isinstance(command, ReplayCommand):
        return MockPlan(
            command.script, session_id=session_id, turn_id=str(turn), mode="run",
            source_format="command", default_gap_ms=default_gap_ms,
        )
    path = resolve_replay_path(command.path, session_cwd=cwd, allowed_roots=sessions_roots)
    name = source_name_for(command.path)
    data = read_source(path, source=name)
    source_format, script = load_source(data, source_name=name, preserve_timing=True)
    # A replayed nested tool would run its children live: refuse it up front. A `run` names
    # its calls explicitly, so it may delegate (that is how subagents are tested).
    nested = (DEFAULT_NESTED_TOOLS | set(nested_tools)) - set(replayed_delegation)
    reject_nested_tools(script, nested_tools=nested)
    return MockPlan(
        script, session_id=session_id, turn_id=str(turn), mode="replay",
        source_format=source_format, overwrite_wait_ms=command.overwrite_wait_ms,
        default_gap_ms=default_gap_ms, source_name=name, call_id_tag=_source_tag(data),
    )


def _source_tag(data: bytes) -> str:
    """``r`` and 8 hex digits of the source's digest: the call-id tag of its replays.

    A log written by a mock turn holds that turn's minted ids, and the converted script holds
    none, so a replay at the same turn number would mint them again. A digest of the bytes that
    hold those ids is not among them (short of a 1 in 2^32 collision); the same file always
    gives the same ids, so a replay stays deterministic.
    """
    return "r" + hashlib.sha256(data).hexdigest()[:8]


def refused_turn_status(error: SidecarError, text: str, *, session_id: str, turn: int) -> MockStatus:
    """The terminal ``mock/status`` of a turn refused before any tool ran.

    Its mode and source name are given as far as the command's grammar is valid.
    """
    mode: Literal["run", "replay"] | None = None
    source_name = None
    try:
        command = parse_command(text)
    except SidecarError:
        pass
    else:
        mode = "replay" if isinstance(command, ReplayCommand) else "run"
        if isinstance(command, ReplayCommand):
            source_name = source_name_for(command.path)
    return refused_status(
        error, session_id=session_id, turn_id=str(turn), mode=mode, source_name=source_name
    )
