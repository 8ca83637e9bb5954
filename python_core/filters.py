"""Filters: values replaced by a stable placeholder before a recording reaches its file.

Rule: a filter names what to hide, never how the value looks in the file: a key glob (any
object member at any depth whose key matches, case-insensitive), a JSON pointer, a regular
expression over string values (the matched text is replaced), or a Python function (``call``:
a ``module:function`` / ``file.py:function`` reference, imported in the sidecar process by the
bridge and handed in as ``functions``) that takes one decoded value and returns its
replacement. ``"credentials"`` is the default set (authorization, cookie, ``*token*``,
``*secret*``, ``*password*``, ``*api_key*``, ``*apikey*``, ``*api-key*``). Filters run over the
arguments (``in: args``), the outcome (``in: result``: value, error message, content, meta,
contexts, each part on its own) or both (default), optionally for one ``tool``. A function that
raises, or returns a value with no canonical JSON form, is ``FilterRaised``: the caller refuses
the call before anything of it is written.

The argument fingerprint is computed over the FILTERED arguments: replay filters the live
arguments with the rules recorded in the header, then matches exactly, so a redacted
recording matches the same call. The header keeps the rules' fingerprint, not the rules (a regex
may spell the secret itself); a function counts by its identity
(``python_core.references.reference_identity``), so a change to its code is not detected. A
replayed outcome holding the placeholder is refused (``CASSETTE_REDACTED_REPLAY``) unless
``allowRedactedReplay`` says the agent may see it.

``normalize`` (with a key, a pointer or a regex) replaces with a fixed value of the user's
instead of the placeholder: a volatile part of a result (a duration, a chunk id) becomes the same
valid value in every recording, so recordings stay diff-equal and replay without
``allowRedactedReplay``. It hides nothing: a normalized success keeps its recorded rendering
(the tool cassette drops the rendering only for a redacting rule, which may hide a secret that the
rendered text spells). ``steps`` yields the value after each rule, so a caller can name the rule
that made a value invalid for its schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from dsh_sidecar.python_core.canonical import canonical_bytes, digest_bytes
from dsh_sidecar.python_core.errors import CanonicalJsonError, ConfigError, FilterRaised, FilterUnresolved
from dsh_sidecar.python_core.json_pointers import encodable, parse_pointer
from dsh_sidecar.python_core.references import check_reference, reference_identity

__all__ = ["CREDENTIAL_KEYS", "PLACEHOLDER", "FilterFunction", "FilterRule", "Filters", "parse_filters",
           "rules_digest"]

PLACEHOLDER = "[redacted]"
CREDENTIAL_KEYS = ("authorization", "cookie", "*token*", "*secret*", "*password*", "*api_key*",
                   "*apikey*", "*api-key*")
_MAX_PATTERN = 512

Where = Literal["args", "result", "both"]
FilterFunction = Callable[[Any], Any]


class FilterRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One filter as declared: exactly one of preset/key/pointer/regex/call."""

    preset: str | None = None
    key: str | None = None
    pointer: str | None = None
    regex: str | None = None
    call: str | None = None
    tool: str | None = None
    where: Where = msgspec.field(default="both", name="in")
    # A fixed replacement instead of the placeholder (any JSON value; absent: UNSET).
    normalize: Any = UNSET

    @property
    def normalizes(self) -> bool:
        """Whether the rule replaces with its ``normalize`` value (hides nothing) instead of the placeholder."""
        return self.normalize is not UNSET

    @property
    def replacement(self) -> object:
        """What a matched part becomes: the ``normalize`` value, or ``PLACEHOLDER``."""
        return PLACEHOLDER if self.normalize is UNSET else self.normalize


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else re.escape(c) for c in pattern.lower()), re.DOTALL)


def _rule(index: int, raw: object, field: str) -> FilterRule:
    if raw == "credentials":
        return FilterRule(preset="credentials")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{field}[{index}]", "must be \"credentials\" or an object")
    try:
        rule = msgspec.convert(raw, FilterRule)
    except msgspec.ValidationError:
        raise ConfigError(f"{field}[{index}]",
                          "takes key, pointer, regex, call or preset, with optional tool, in and normalize") from None
    kinds = [k for k in (rule.preset, rule.key, rule.pointer, rule.regex, rule.call) if k is not None]
    if len(kinds) != 1:
        raise ConfigError(f"{field}[{index}]", "must name exactly one of key, pointer, regex, call, preset")
    if rule.call is not None:
        check_reference(f"{field}[{index}].call", rule.call)
    if rule.preset is not None and rule.preset != "credentials":
        raise ConfigError(f"{field}[{index}].preset", "must be \"credentials\"")
    if rule.key is not None and not rule.key.strip("*"):
        raise ConfigError(f"{field}[{index}].key", "must hold more than '*'")
    if rule.pointer is not None and not parse_pointer(rule.pointer):
        raise ConfigError(f"{field}[{index}].pointer", "must be a JSON pointer below the root, as /a/0")
    if rule.regex is not None:
        if not rule.regex or len(rule.regex) > _MAX_PATTERN:
            raise ConfigError(f"{field}[{index}].regex", f"must be 1 to {_MAX_PATTERN} characters")
        try:
            compiled = re.compile(rule.regex)
        except (re.error, RecursionError, OverflowError):
            raise ConfigError(f"{field}[{index}].regex", "is not a valid regular expression") from None
        if compiled.fullmatch(""):
            raise ConfigError(f"{field}[{index}].regex", "must not match the empty string")
    if rule.normalizes:
        if rule.preset is not None or rule.call is not None:
            raise ConfigError(f"{field}[{index}].normalize",
                              "goes with key, pointer or regex (a call filter returns its own replacement)")
        if rule.regex is not None and not isinstance(rule.normalize, str):
            raise ConfigError(f"{field}[{index}].normalize", "must be a string with regex (it replaces matched text)")
        try:
            canonical_bytes(rule.normalize)
        except CanonicalJsonError as exc:
            raise ConfigError(f"{field}[{index}].normalize", f"has no canonical JSON form ({exc.reason})") from None
    if rule.tool is not None and not rule.tool.strip():
        raise ConfigError(f"{field}[{index}].tool", "must not be empty")
    return rule


def parse_filters(raw: object, field: str = "toolCassette.filters") -> tuple[FilterRule, ...]:
    """Validate a filter list.

    Raises:
        ConfigError: names the entry and a value-free reason.
    """
    if not encodable(raw):
        raise ConfigError(field, "holds a lone surrogate or a value with no JSON form")
    if not isinstance(raw, list | tuple):
        raise ConfigError(field, "must be a list")
    return tuple(_rule(index, item, field) for index, item in enumerate(raw))


def rules_digest(rules: Sequence[FilterRule]) -> str:
    """The fingerprint of a filter list, as the header records it (never the patterns).

    A function counts by its identity, not by where it was imported from: the same function
    named by file or by module, from another checkout, gives the same fingerprint.
    """
    named = [rule if rule.call is None else msgspec.structs.replace(rule, call=reference_identity(rule.call))
             for rule in rules]
    return digest_bytes(msgspec.json.encode(named, order="sorted"))


_Compiled = list[re.Pattern[str]] | tuple[str, ...] | re.Pattern[str] | FilterFunction


class Filters:
    """Compiled filters of one cassette; ``apply`` returns a redacted copy of a decoded value.

    ``functions`` maps each ``call`` reference to the function the bridge imported for it.
    """

    def __init__(self, rules: Sequence[FilterRule], functions: Mapping[str, FilterFunction] | None = None) -> None:
        """Compile ``rules``.

        Raises:
            FilterUnresolved: a ``call`` rule has no imported function in ``functions``.
        """
        self.rules = tuple(rules)
        self._functions = functions or {}
        self._compiled = [(index, rule, self._compile(index, rule)) for index, rule in enumerate(self.rules)]

    def _compile(self, index: int, rule: FilterRule) -> _Compiled:
        if rule.call is not None:
            function = self._functions.get(rule.call)
            if function is None:
                raise FilterUnresolved(index, "was not imported in this process")
            return function
        if rule.preset is not None:
            return [_glob(key) for key in CREDENTIAL_KEYS]
        if rule.key is not None:
            return [_glob(rule.key)]
        if rule.pointer is not None:
            return tuple(parse_pointer(rule.pointer))
        assert rule.regex is not None
        return re.compile(rule.regex)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def apply(self, value: object, *, tool: str, where: Literal["args", "result"]) -> object:
        """Return ``value`` with every filtered part replaced by ``PLACEHOLDER``, a rule's
        ``normalize`` value, or a function's answer.

        Raises:
            FilterRaised: a filter function raised, or returned a value with no canonical JSON form.
        """
        result = value
        for _, _, after in self.steps(value, tool=tool, where=where):
            result = after
        return result

    def hides(self, value: object, *, tool: str, where: Literal["args", "result"]) -> bool:
        """Whether a redacting rule (not a ``normalize`` one) changes ``value``.

        Raises:
            FilterRaised: as ``apply``.
        """
        for _, rule, after in self.steps(value, tool=tool, where=where):
            if not rule.normalizes and after != value:
                return True
            value = after
        return False

    def steps(self, value: object, *, tool: str, where: Literal["args", "result"],
              ) -> Iterator[tuple[int, FilterRule, object]]:
        """Yield ``(index, rule, value after it)`` for each rule that applies to ``tool`` and ``where``.

        Raises:
            FilterRaised: a filter function raised, or returned a value with no canonical JSON form.
        """
        for index, rule, compiled in self._compiled:
            if rule.tool is not None and rule.tool != tool:
                continue
            if rule.where not in (where, "both"):
                continue
            if isinstance(compiled, list):
                value = _by_key(value, compiled, rule.replacement)
            elif isinstance(compiled, tuple):
                value = _by_pointer(value, compiled, rule.replacement)
            elif isinstance(compiled, re.Pattern):
                replacement = rule.replacement
                assert isinstance(replacement, str)
                value = _by_regex(value, compiled, replacement)
            else:
                assert rule.call is not None
                value = _by_function(value, compiled, index, reference_identity(rule.call), tool, where)
            yield index, rule, value


def _by_function(value: object, function: FilterFunction, index: int, identity: str, tool: str,
                 where: str) -> object:
    try:
        replaced = function(value)
    except Exception as exc:  # the user's function may raise anything; only its class is named
        raise FilterRaised(index, identity, tool, where, f"raised {type(exc).__name__}") from None
    try:
        canonical_bytes(replaced)  # what the file cannot hold must fail here, named, not later
    except CanonicalJsonError as exc:
        raise FilterRaised(index, identity, tool, where,
                           f"returned a value with no canonical JSON form ({exc.reason})") from None
    return replaced


def _by_key(value: object, globs: list[re.Pattern[str]], replacement: object) -> object:
    if isinstance(value, dict):
        return {key: replacement if any(g.fullmatch(key.lower()) for g in globs) else _by_key(item, globs, replacement)
                for key, item in value.items()}
    if isinstance(value, list):
        return [_by_key(item, globs, replacement) for item in value]
    return value


def _by_pointer(value: object, tokens: tuple[str, ...], replacement: object) -> object:
    if not tokens:
        return replacement
    head, rest = tokens[0], tokens[1:]
    if isinstance(value, dict) and head in value:
        return {**value, head: _by_pointer(value[head], rest, replacement)}
    if isinstance(value, list) and head.isdigit() and int(head) < len(value):
        index = int(head)
        return [*value[:index], _by_pointer(value[index], rest, replacement), *value[index + 1:]]
    return value


def _by_regex(value: object, pattern: re.Pattern[str], replacement: str) -> object:
    if isinstance(value, str):
        # A literal replacement: a backslash or group reference in it is text, not a template.
        return pattern.sub(lambda _: replacement, value)
    if isinstance(value, dict):
        return {key: _by_regex(item, pattern, replacement) for key, item in value.items()}
    if isinstance(value, list):
        return [_by_regex(item, pattern, replacement) for item in value]
    return value
