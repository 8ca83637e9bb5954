"""What a person reads when a mock turn fails: the fix for a refusal, a tool's schema reason.

Rule: hints are fixed sentences chosen by error code; they never quote the user's text,
arguments or paths. Runtime messages pass only through known shapes that name property paths
and schema rules, never argument values.
"""

from __future__ import annotations

import re
from typing import Final

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.errors import PathRefused

__all__ = ["full_message_hint", "refusal_hint", "schema_reasons"]

_GRAMMAR: Final = (
    "write `/mock run tool({...})`, `/mock run [a({...}) b({...})]` or "
    "`/mock replay PATH [--overwrite-wait-time-ms N]`; arguments are one strict JSON object "
    "(docs/mock.md, Command grammar)"
)

_HINTS: Final[dict[str, str]] = {
    "INVALID_COMMAND": _GRAMMAR,
    "INVALID_SCRIPT": "check the script with `dsh-sidecar mock validate FILE` (docs/mock.md, Canonical script)",
    "CONVERSION_MISMATCH": "check the log with `dsh-sidecar mock validate FILE`; convert an intact session log",
    "PATH_REFUSED": (
        "replay a file inside the session's folder or $DSH_HOME/sessions, named without `~` or `..` "
        "(docs/mock.md, Replay path policy)"
    ),
    "SOURCE_UNREADABLE": "name a readable regular file; a relative path starts at the session's folder",
    "UNSUPPORTED_NESTED_TOOL": (
        "call the tool with `/mock run`, or give the row a subagentCassette section to replay `subagent`"
    ),
    "DUPLICATE_MOCK_TURN": "send one /mock command per turn",
    "MID_TURN_MOCK_COMMAND": (
        "send /mock as its own message once the turn has ended, or as the /mock slash command, "
        "which queues it as the next turn"
    ),
}
# Path rules whose fix is not the general one.
_PATH_HINTS: Final[dict[str, str]] = {
    "not-a-regular-file": (
        "name an existing regular file (a script, or a session log listed by `dsh-sidecar sessions "
        "list`); a relative path starts at the session's folder"
    ),
    "no-session-cwd": "name the file by its absolute path inside $DSH_HOME/sessions",
}


def refusal_hint(error: SidecarError) -> str | None:
    """The fix for a mock turn refused before any tool ran with ``error``, when one is known."""
    if isinstance(error, PathRefused) and error.rule in _PATH_HINTS:
        return _PATH_HINTS[error.rule]
    return _HINTS.get(error.code)

_PATH: Final = r'"(?P<path>[^"]{1,200})"'
_VIOLATIONS: Final = (
    re.compile(r'missing required property "(?P<path>[^"]{1,200})"'),
    re.compile(_PATH + r" is not a declared property \(additionalProperties: false\)"),
    re.compile(_PATH + r" must match exactly one oneOf branch \(matched \d+\)"),
    re.compile(_PATH + r" must be (?:a |an )?(?:dense )?lossless JSON (?:object|array|value)"),
    re.compile(
        _PATH + r" must be (?:an object|an array|a string|a number|a finite JSON number|an integer|a boolean|null)"
    ),
    re.compile(_PATH + r" must be one of (?P<schema>.{1,200})"),
    re.compile(_PATH + r' must be (?P<const>["\[{0-9tfn-].{0,199})'),
)
_SHOWN: Final = 3
_PREFIX: Final = "invalid arguments: "
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def schema_reasons(message: str | None) -> tuple[str | None, bool]:
    """The runtime's schema violations of an ``INVALID_ARGS`` result, in its own words.

    rc.8 writes ``invalid arguments: <violation>; <violation>...``, each naming a property path
    and a schema rule. Only violations of those known shapes are kept (the first three, plus a
    count of the rest), so no argument value can pass. Returns the text (``None`` when none is
    recognised) and whether it says everything the runtime said.
    """
    if message is None or not message.startswith(_PREFIX):
        return None, False
    pieces = message[len(_PREFIX) :].split("; ")
    known = [piece for piece in pieces if any(p.fullmatch(piece) for p in _VIOLATIONS)]
    if not known:
        return None, False
    shown = "; ".join(_CONTROL.sub("?", piece) for piece in known[:_SHOWN])
    more = len(pieces) - min(len(known), _SHOWN)
    return (shown, True) if more == 0 else (f"{shown}; and {more} more", False)


def full_message_hint(session_id: str) -> str:
    """Where a tool's full error message is, and the command that shows it."""
    return f"its full message is in the session log: dsh-sidecar sessions show {session_id}"
