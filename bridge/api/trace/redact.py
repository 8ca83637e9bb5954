"""What keeps a secret out of a trace: the cassette's filters, the credential filter, and a last pass.

A trace shows values (arguments, outputs, the model's text), so each value goes through the
filters a recording applies, plus ``credentials`` always. What a filter hid is remembered: a
secret a tool received often comes back in its output or in the model's next message, where no
key names it, so the last pass (``scrub``) replaces every hidden text wherever it appears. A
filter that fails hides its whole value (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from dsh_sidecar.python_core.canonical import too_deep
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.filters import FilterRule, Filters, parse_filters

__all__ = ["HIDDEN", "NOT_SHOWN", "Redactor", "json_document"]

HIDDEN = "[filtered]"
NOT_SHOWN = "[not shown: a filter failed on this value]"
# A hidden text shorter than this is not scrubbed elsewhere: it would replace common words.
_SHORTEST = 4


class Redactor:
    """The filters of one trace and the texts they hid so far."""

    def __init__(self, rules: Sequence[Any] = (), functions: Mapping[str, Callable[[Any], Any]] | None = None,
                 *, hide_all: bool = False) -> None:
        """``rules``: the cassette's ``filters`` entries as the row takes them (``credentials`` is added);
        ``hide_all``: no value is shown (the filters a user declared could not be compiled).

        Raises:
            SidecarError: a rule does not parse (the run refused it already, with the same error).
        """
        parsed: tuple[FilterRule, ...] = parse_filters(["credentials", *rules], "trace")
        self._filters = Filters(parsed, functions)
        self._model = Filters(tuple(r for r in parsed if r.tool is None), functions)
        self.hidden: set[str] = set()
        self._hide_all = hide_all

    def value(self, value: object, *, tool: str, where: Literal["args", "result"]) -> object:
        """``value`` with its filtered parts replaced."""
        return self._apply(self._filters, value, tool, where)

    def model(self, value: object) -> object:
        """A model text or request part: the rules that name no tool."""
        return self._apply(self._model, value, "", "result")

    def text(self, text: str, *, tool: str, where: Literal["args", "result"]) -> str:
        """A text a tool rendered: a JSON document in it is filtered as a value, then written back."""
        decoded = json_document(text)
        if decoded is None:
            shown = self._apply(self._filters, text, tool, where)
            return shown if isinstance(shown, str) else NOT_SHOWN
        shown = self._apply(self._filters, decoded, tool, where)
        return text if shown == decoded else msgspec.json.encode(shown).decode()

    def _apply(self, filters: Filters, value: object, tool: str, where: Literal["args", "result"]) -> object:
        if self._hide_all:
            return NOT_SHOWN
        try:
            shown = filters.apply(value, tool=tool, where=where)
        except (SidecarError, RecursionError, TypeError, ValueError):
            return NOT_SHOWN
        self._remember(value, shown)
        return shown

    def _remember(self, before: object, after: object) -> None:
        """Keep each text the filters replaced (walks both values side by side)."""
        stack = [(before, after)]
        while stack:
            was, now = stack.pop()
            if was == now:
                continue
            if isinstance(was, str):
                if len(was) >= _SHORTEST:
                    self.hidden.add(was)
                    # A regex hides a part of a text: keep the parts it replaced.
                    if isinstance(now, str):
                        self.hidden.update(p for p in _replaced(was, now) if len(p) >= _SHORTEST)
            elif isinstance(was, dict) and isinstance(now, dict):
                stack.extend((v, now.get(k)) for k, v in was.items())
            elif isinstance(was, list) and isinstance(now, list) and len(was) == len(now):
                stack.extend(zip(was, now, strict=True))
            elif isinstance(was, dict | list):
                stack.extend((v, None) for v in (was.values() if isinstance(was, dict) else was))

    def scrub(self, document: Any) -> Any:
        """``document`` (builtins) with every hidden text replaced wherever it appears, and every
        lone surrogate (a log may hold one) as U+FFFD, so the page is valid UTF-8."""
        secrets = sorted(self.hidden, key=len, reverse=True)

        def clean(text: str) -> str:
            for secret in secrets:
                if secret in text:
                    text = text.replace(secret, HIDDEN)
            try:
                text.encode()
            except UnicodeEncodeError:
                text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
            return text

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                return clean(value)
            if isinstance(value, dict):
                return {clean(k): walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            return value

        return walk(document)


def _replaced(was: str, now: str) -> list[str]:
    """The middle of ``was`` that differs from ``now`` (same prefix and suffix cut)."""
    start = 0
    while start < min(len(was), len(now)) and was[start] == now[start]:
        start += 1
    end = 0
    while end < min(len(was), len(now)) - start and was[-1 - end] == now[-1 - end]:
        end += 1
    middle = was[start:len(was) - end]
    return [middle] if middle else []


def json_document(text: str) -> object | None:
    """``text`` decoded when it is a JSON object or array (a rendering), else ``None``."""
    if not text.lstrip().startswith(("{", "[")) or too_deep(text):
        return None
    try:
        decoded: object = msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        return None
    return decoded
