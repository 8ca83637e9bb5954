"""Texts that were meant as a ``/mock`` command but misspell it (docs/mock.md, Near misses).

Rule: a near miss is refused like a broken command, so a typo never reaches a real (paid)
model. Words are compared lowercased by Damerau-Levenshtein distance (optimal string
alignment: insert, delete, substitute, swap two neighbours). A text is a near miss when its
first word is not ``/mock`` and either

- that word is ``/mock`` in other letter case (``/Mock``), or
- that word is within distance 2 of ``/mock``, the second word within distance 2 of ``run``
  or ``replay``, and the rest has that subcommand's shape: a ``[`` or ``name(`` after a
  run-like word; one token (a path), possibly followed by ``--`` options, after a replay-like
  word.

The shape requirement keeps ordinary prompts out: ``/model``, ``/mode up the hill`` and prose
go to the model as before.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MAX_DISTANCE", "closest_subcommand", "distance", "is_near_miss"]

MAX_DISTANCE: Final = 2
_COMMAND: Final = "/mock"
_SUBCOMMANDS: Final = ("run", "replay")
_RUN_SHAPE: Final = re.compile(r"\[|[A-Za-z0-9_-]+[ \t\r\n]*\(")


def distance(a: str, b: str) -> int:
    """The optimal string alignment distance between ``a`` and ``b``."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def _close(word: str, target: str) -> bool:
    # Longer words cannot be close; this also bounds the table for a huge first word.
    return abs(len(word) - len(target)) <= MAX_DISTANCE and distance(word.lower(), target) <= MAX_DISTANCE


def closest_subcommand(word: str) -> str | None:
    """``run`` or ``replay`` if ``word`` is within the distance of one of them (nearest first)."""
    scored = [(distance(word.lower(), sub), sub) for sub in _SUBCOMMANDS if _close(word, sub)]
    return min(scored)[1] if scored else None


def is_near_miss(text: str) -> str | None:
    """The subcommand ``text`` was probably meant to run (``""`` if unknown), or ``None``."""
    words = text.split(None, 2)
    if not words or words[0] == _COMMAND or not words[0].startswith("/"):
        return None
    sub = closest_subcommand(words[1]) if len(words) > 1 else None
    if words[0].lower() == _COMMAND:
        return sub or ""
    if sub is None or len(words) < 3 or not _close(words[0][1:], _COMMAND[1:]):
        return None
    rest = words[2]
    if sub == "run":
        return sub if _RUN_SHAPE.match(rest) else None
    _path, *options = rest.split()
    return sub if all(option.startswith("--") or option.isdigit() for option in options) else None
