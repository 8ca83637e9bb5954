"""Stubs: tools served from Python functions, declared in the row's ``stubs`` section.

Rule: ``stubs`` maps a tool name to a reference ``module:function`` (imported with the DSH
cwd first on ``sys.path``) or ``path/to/file.py:function`` (a file, relative to the DSH cwd).
The bridge imports them in the sidecar process at ``initialize``; a stubbed tool's real body
never runs: the function gets the decoded arguments and its return value is served through
the same path a cassette uses (DSH revalidates it against the tool's output schema). Raising
``StubFailure(code, message)`` serves a named tool failure; any other exception refuses the
call with ``STUB_RAISED`` and fails the run (a recording in that run is not published).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from dsh_sidecar.python_core.errors import ConfigError, SidecarError, printable
from dsh_sidecar.python_core.references import check_reference

__all__ = ["StubFailure", "StubRaised", "StubUnresolved", "parse_stubs"]

_CODE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")


class StubFailure(Exception):
    """Raise from a stub to fail the call as the tool would: ``code`` is the runtime code."""

    def __init__(self, code: str, message: str) -> None:
        if not _CODE.fullmatch(code):
            raise ValueError("StubFailure code must be an upper-case code such as TIMEOUT")
        super().__init__(message)
        self.code = code
        self.message = message


class StubUnresolved(SidecarError):
    """A stub reference cannot be imported or does not name a callable."""

    code = "STUB_UNRESOLVED"

    def __init__(self, tool: str, reason: str) -> None:
        super().__init__(f"stubs.{printable(tool)}: {reason}; give module:function (importable from the "
                         "DSH cwd) or file.py:function (relative to the DSH cwd)")
        self.tool = tool


class StubRaised(SidecarError):
    """A stub raised something other than ``StubFailure``, or returned a value with no JSON form."""

    code = "STUB_RAISED"

    def __init__(self, tool: str, path: str, what: str) -> None:
        super().__init__(f"stub of {printable(tool)} at {printable(path)} {what}; fix the stub, or raise "
                         "StubFailure(code, message) for a tool failure")
        self.tool = tool
        self.path = path


def parse_stubs(raw: object) -> dict[str, str]:
    """Validate the ``stubs`` section: tool name to ``module:function`` or ``file.py:function``.

    Raises:
        ConfigError: names ``stubs.<tool>`` and a value-free reason.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError("stubs", "must be an object of tool name to module:function")
    try:
        msgspec.json.encode(raw)
    except (UnicodeEncodeError, TypeError, OverflowError):
        raise ConfigError("stubs", "holds a lone surrogate or a value with no JSON form") from None
    out: dict[str, str] = {}
    for tool, ref in raw.items():
        if not isinstance(tool, str) or not tool.strip():
            raise ConfigError("stubs", "tool names must be non-empty strings")
        out[tool] = check_reference(f"stubs.{printable(tool)}", ref)
    return out
