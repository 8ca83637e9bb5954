"""Which agent turns a run saw start and end: the evidence a recording needs to be published.

Rule: a recording is complete only if at least one turn ended and every turn that started
ended with a reason other than ``aborted`` or ``interrupted``. A DSH process stopped by SIGTERM
or SIGINT disposes its plugins mid-turn: the turn never logs ``turn/end``, so it stays open
here and the recording is refused. ``completed``, ``error``, ``blocked`` and ``max-tokens``
are real ends: the recording holds everything that turn did.

A follow-up turn (one after a turn of the same session really ended) that ends ``aborted``
while no selected call was open or cut short (``busy`` false) is not an interruption: headless
DSH aborts the follow-up turn a goal driver starts after ``create_goal``, and the recording
already holds every selected call of the task. An abort during a selected call still is.

The shim forwards each ``turn/start`` and ``turn/end`` session event (``session/turn``); this
ledger only counts them. It is sans-I/O and decides nothing about files.
"""

from __future__ import annotations

from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["INTERRUPTED_REASONS", "RecordingInterrupted", "TurnLedger"]

# turn/end reasons after which the turn's work did not run to its end.
INTERRUPTED_REASONS = frozenset({"aborted", "interrupted"})


class RecordingInterrupted(SidecarError):
    """A recording's turn did not really end; the cassette must not claim it is complete."""

    code = "RECORDING_INTERRUPTED"

    def __init__(self, cassette: str, why: str, kept: str) -> None:
        super().__init__(f"{cassette}: {why}; {kept}")
        self.cassette = cassette
        self.why = why
        self.kept = kept


class TurnLedger:
    """Count the turns that started and how each ended."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, int], None] = {}
        self._ended = 0
        self._cut: tuple[int, str] | None = None
        # Sessions with at least one turn that really ended: later aborted turns are follow-ups.
        self._settled: set[str] = set()

    def start(self, session: str, turn: int) -> None:
        """A turn started in ``session``."""
        self._open[(session, turn)] = None

    def end(self, session: str, turn: int, reason: str | None, busy: bool = False) -> None:
        """A turn ended with ``reason``; ``busy``: a selected call was open or cut short in it."""
        self._open.pop((session, turn), None)
        self._ended += 1
        if reason is not None and reason not in INTERRUPTED_REASONS:
            self._settled.add(session)
            return
        follow_up = session in self._settled and not busy and reason is not None
        if self._cut is None and not follow_up:
            self._cut = (turn, reason or "no reason")

    def interruption(self) -> str | None:
        """Return why the recorded turns did not all really end, or ``None`` if they did."""
        if self._open:
            _, turn = next(iter(self._open))
            return (f"turn {turn} did not end (DSH was stopped mid-turn, e.g. by SIGTERM or "
                    "SIGINT)")
        if self._cut is not None:
            turn, reason = self._cut
            return f"turn {turn} ended {reason}"
        if self._ended == 0:
            return "no agent turn ran to its end"
        return None
