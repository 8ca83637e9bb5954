"""The one error tree of dsh-sidecar.

Every failure a user can meet is a ``SidecarError`` subclass with a class-level ``code`` (a
command's exit code comes from ``python_core.cli_errors``'s one table, not from the error).
Messages are built from typed, structural fields only: tool names, call paths, ordinals,
fingerprints, ``file:line``. Never raw arguments, results, secrets or absolute paths.
"""

from __future__ import annotations

__all__ = [
    "CanonicalJsonError",
    "ConfigError",
    "FilterRaised",
    "FilterUnresolved",
    "LiveToolBlocked",
    "ProtocolError",
    "SidecarError",
    "printable",
]


def printable(text: str) -> str:
    """Escape control characters, lone surrogates and line separators as ``\\uXXXX``.

    Messages may carry user-chosen names (file names, config keys): escaped, they stay one
    printable line and can always be encoded (a lone surrogate cannot be written as UTF-8).
    """
    if text.isascii() and text.isprintable():
        return text
    return "".join(
        f"\\u{ord(c):04x}"
        if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or 0xD800 <= ord(c) < 0xE000 or c in "\u2028\u2029"
        else c
        for c in text
    )


class SidecarError(Exception):
    """Base of every named dsh-sidecar failure."""

    code: str = "SIDECAR_ERROR"
    hint: str = ""
    """How to fix it, when one sentence can say so; shown on its own line after the error."""

    def __init__(self, message: str) -> None:
        message = printable(message)
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def to_wire(self) -> dict[str, object]:
        """Return the JSON-RPC error ``data`` for this failure."""
        return {"code": self.code, "hint": self.hint} if self.hint else {"code": self.code}


class ConfigError(SidecarError):
    """A plugin or CLI configuration value is invalid; names the field, never its value."""

    code = "INVALID_CONFIG"
    hint = "correct that key in the `sidecar` row's config (your profile's cordis.patch.yml or the --patch file)"

    def __init__(self, field: str, reason: str, *, hint: str | None = None) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        if hint is not None:
            # A fix more precise than "correct that key" (e.g. a path: record it, create it).
            self.hint = hint


class LiveToolBlocked(SidecarError):
    """A tool call no cassette serves ran into the offline guard (record mode ``none``)."""

    code = "LIVE_TOOL_BLOCKED"
    hint = (
        "record it (tools=[...], --dsh-record-mode once) or let it run live (--dsh-allow-live-tools, "
        "marker allow_live_tools=[...], ini dsh_allow_live_tools)"
    )

    def __init__(self, tool: str, path: str) -> None:
        super().__init__(f"tool {tool} (call {path}) would run live in record mode none; no cassette serves it")
        self.tool = tool


class CanonicalJsonError(SidecarError):
    """A value cannot be put in the strict canonical JSON profile."""

    code = "NON_CANONICAL_JSON"

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{reason} at {location}")
        self.location = location
        self.reason = reason


class ProtocolError(SidecarError):
    """The peer broke the JSON-RPC wire contract."""

    code = "PROTOCOL_ERROR"


_REFERENCE_FIX = ("give module:function (importable from the DSH cwd) or file.py:function (relative to "
                  "the DSH cwd)")


class FilterUnresolved(SidecarError):
    """A filter's ``call`` reference cannot be imported or does not name a callable."""

    code = "FILTER_UNRESOLVED"

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(f"toolCassette.filters[{index}].call: {reason}; {_REFERENCE_FIX}")
        self.index = index


class FilterRaised(SidecarError):
    """A filter function raised, or returned a value the file cannot hold; the call is refused."""

    code = "FILTER_RAISED"

    def __init__(self, index: int, identity: str, tool: str, where: str, what: str) -> None:
        part = "arguments" if where == "args" else "outcome"
        super().__init__(
            f"toolCassette.filters[{index}] ({printable(identity)}) {what} on the {part} of {printable(tool)}; "
            "the call was refused and nothing it was given reached the file; fix the filter"
        )
        self.index = index
        self.tool = tool
