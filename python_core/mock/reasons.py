"""What a person reads when a mock turn is refused: the fix.

Rule: hints are fixed sentences chosen by error code; they never quote the user's text,
arguments or paths.
"""

from __future__ import annotations

from typing import Final

__all__ = ["refusal_hint_for"]

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
}


def refusal_hint_for(code: str) -> str | None:
    """The fix for a mock turn refused before any tool ran with ``code``, when one is known."""
    return _HINTS.get(code)

