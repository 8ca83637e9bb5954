"""``Later``: an inline handler's answer that is not known yet.

An inline row runs in the reader, in arrival order, because that order is what the cassettes
number. When its answer must wait (a recorded line being made durable), the handler returns a
``Later``: the decision is already taken and its effects queued, and the server awaits the
answer in a task of its own while the reader goes on reading, so ``$/cancelRequest`` and every
other request are served meanwhile.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

__all__ = ["Later"]


class Later:
    """Wraps the awaitable of an answer (a result, or an exception for an error answer)."""

    __slots__ = ("answer",)

    def __init__(self, answer: Awaitable[Any]) -> None:
        self.answer = answer
