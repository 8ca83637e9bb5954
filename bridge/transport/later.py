"""``Later`` and ``Pending``: inline handlers' answers that are not known yet.

An inline row runs in the reader, in arrival order, because that order is what the cassettes
number. When its answer depends on lines a ``LineWriter`` has queued, the handler returns a
``Later``: the decision is already taken and its lines submitted; ``finish`` turns the ticket's
outcome into the answer. The server makes the lines durable in one task per writer, finishes
every ``Later`` of a batch together and sends their answers in one write, while the reader goes
on reading, so ``$/cancelRequest`` and every other request are served meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from dsh_sidecar.bridge.transport.line_writer import LineWriter, Ticket
from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["Later", "Pending", "durable"]


class Later:
    """The answer ``finish(failure)`` gives (or the error it raises) once ``ticket`` is done."""

    __slots__ = ("finish", "ticket", "writer")

    def __init__(self, writer: LineWriter, ticket: Ticket,
                 finish: Callable[[SidecarError | None], Any]) -> None:
        self.writer = writer
        self.ticket = ticket
        self.finish = finish


_T = TypeVar("_T")


def durable(answer: _T, failure: SidecarError | None) -> _T:
    """``answer`` once its lines are durable; a lost line fails the answer (and the recording)."""
    if failure is not None:
        raise failure
    return answer


class Pending:
    """An inline handler's answer that comes after a wait (a mock step's ``wait``).

    The decision is taken in the reader; the server awaits ``answer()`` in a task of its own
    under a ``CancelScope`` that ``$/cancelRequest`` cancels, and the reader reads on. An
    answer with no wait is returned as it is, with no task.
    """

    __slots__ = ("answer",)

    def __init__(self, answer: Callable[[], Awaitable[Any]]) -> None:
        self.answer = answer
