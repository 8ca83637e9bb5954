"""Named failures of the subagent cassette.

Rule: every message is built from typed, structural fields (file names without directories,
line numbers, call keys, fingerprints, field names, counts). Text that comes from a cassette
file (call keys, labels, versions) goes through ``escape`` first; prompts, result bodies,
error messages and raw stop reasons never reach a message.
"""

from __future__ import annotations

from dsh_sidecar.python_core.errors import SidecarError

__all__ = [
    "AmbiguousCassette",
    "AppendIncompatible",
    "CassetteExists",
    "CassetteFormatError",
    "CassetteIOError",
    "CassetteIntegrityError",
    "CassetteLocked",
    "CassetteMiss",
    "CassetteNotFound",
    "CassetteStateError",
    "InvalidStartRequest",
    "NotComparable",
    "NothingRecorded",
    "RedactedReplayRefused",
    "ReplayPoisoned",
    "TargetMismatch",
    "UnconsumedInteractions",
    "UnsettledCalls",
    "escape",
]

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape(text: str, limit: int = 120) -> str:
    """Return ``text`` with control characters escaped and at most ``limit`` characters."""
    out: list[str] = []
    for char in text[:limit]:
        code = ord(char)
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code < 0xE000 or code in (
            0x2028,
            0x2029,
        ):
            out.append(f"\\u{code:04x}")
        else:
            out.append(char)
    if len(text) > limit:
        out.append("...")
    return "".join(out)


class CassetteFormatError(SidecarError):
    """A cassette file breaks the format contract at ``name:line``."""

    code = "CASSETTE_FORMAT_ERROR"

    def __init__(self, name: str, line: int, reason: str) -> None:
        super().__init__(f"{escape(name)}:{line}: {reason}")
        self.name = name
        self.line = line
        self.reason = reason


class CassetteIntegrityError(CassetteFormatError):
    """A record hash or chain link does not match the bytes on disk."""

    code = "CASSETTE_INTEGRITY_ERROR"


class TargetMismatch(SidecarError):
    """The cassette targets another DSH subagent version than the host runs."""

    code = "TARGET_MISMATCH"

    def __init__(self, name: str, found: str, expected: str) -> None:
        super().__init__(
            f"{escape(name)} targets dsh-subagent {escape(found, 40)}, "
            f"this host runs {escape(expected, 40)}"
        )
        self.name = name
        self.found = found
        self.expected = expected


class CassetteIOError(SidecarError):
    """A cassette file cannot be read, written or published (OS-level failure; the tool cassette's code too)."""

    code = "CASSETTE_IO"

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{escape(name)}: {reason}")
        self.name = name
        self.reason = reason


class CassetteNotFound(SidecarError):
    """Replay or inspection names a cassette that does not exist."""

    code = "CASSETTE_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__(f"{escape(name)} does not exist")
        self.name = name


class CassetteExists(SidecarError):
    """``writeMode: create`` refuses to overwrite an existing cassette."""

    code = "CASSETTE_EXISTS"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{escape(name)} already exists (writeMode create); use truncate or append"
        )
        self.name = name


class CassetteLocked(SidecarError):
    """Another writer holds ``<file>.writer.lock``; never broken automatically."""

    code = "CASSETTE_LOCKED"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{escape(name)}.writer.lock exists: another writer is active or crashed; "
            "remove the directory only after checking no writer uses the cassette"
        )
        self.name = name


class AppendIncompatible(SidecarError):
    """``writeMode: append`` found a header whose policy differs from the configuration."""

    code = "APPEND_INCOMPATIBLE"

    def __init__(self, name: str, field: str) -> None:
        super().__init__(f"{escape(name)}: header {field} differs from this configuration")
        self.name = name
        self.field = field


class CassetteMiss(SidecarError):
    """Replay found no recorded interaction for a start; names what differed."""

    code = "CASSETTE_MISS"

    def __init__(self, call_key: str, differed: tuple[str, ...]) -> None:
        super().__init__(
            f"no recorded interaction for {escape(call_key)}: {', '.join(differed)} differed"
        )
        self.call_key = call_key
        self.differed = differed


class ReplayPoisoned(SidecarError):
    """Replay already failed once; every later start fails the same way."""

    code = "REPLAY_POISONED"

    def __init__(self, first_code: str) -> None:
        super().__init__(f"replay stopped after an earlier {first_code}")
        self.first_code = first_code


class AmbiguousCassette(SidecarError):
    """A matching group holds different outcomes and ``duplicatePolicy`` is ``reject``."""

    code = "AMBIGUOUS_CASSETTE"

    def __init__(self, parent_key: str, request_fingerprint: str, outcomes: int) -> None:
        super().__init__(
            f"group {escape(parent_key)} request {request_fingerprint[:19]} has {outcomes} "
            "different outcomes; set duplicatePolicy: sequence to replay them in order"
        )
        self.parent_key = parent_key
        self.request_fingerprint = request_fingerprint
        self.outcomes = outcomes


class RedactedReplayRefused(SidecarError):
    """A successful result was redacted when recorded; replaying it would feed substitutes."""

    code = "REDACTED_REPLAY_REFUSED"

    def __init__(self, call_key: str, redactions: int) -> None:
        super().__init__(
            f"{escape(call_key)}: recorded result has {redactions} redaction(s); "
            "set allowRedactedReplay to replay it"
        )
        self.call_key = call_key
        self.redactions = redactions


class UnconsumedInteractions(SidecarError):
    """Replay ended with recorded interactions left over (``assertConsumed``)."""

    code = "CASSETTE_UNCONSUMED"

    def __init__(self, count: int, call_keys: tuple[str, ...]) -> None:
        shown = ", ".join(escape(key) for key in call_keys[:3])
        more = "" if len(call_keys) <= 3 else f" and {len(call_keys) - 3} more"
        super().__init__(f"{count} recorded interaction(s) not replayed: {shown}{more}")
        self.count = count
        self.call_keys = call_keys


class NothingRecorded(SidecarError):
    """Record mode closed without a single subagent ``start()``."""

    code = "NOTHING_RECORDED"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"no subagent start() reached the cassette; {escape(name)} was not written "
            "(continuable delegations bypass start(): use backgroundMode one-shot)"
        )
        self.name = name


class UnsettledCalls(SidecarError):
    """Record mode closed while runs were still in flight; they were written as errors."""

    code = "UNSETTLED_CALLS"

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} run(s) had not settled at close; recorded as abandoned")
        self.count = count


class CassetteStateError(SidecarError):
    """An engine event is illegal in the current state; nothing changed."""

    code = "CASSETTE_STATE"

    def __init__(self, event: str, state: str) -> None:
        super().__init__(f"{event} is not allowed while {state}")
        self.event = event
        self.state = state


class InvalidStartRequest(SidecarError):
    """A ``subagent/start`` payload breaks the wire contract at ``location``."""

    code = "INVALID_START_REQUEST"

    def __init__(self, location: str, reason: str) -> None:
        super().__init__(f"{reason} at {location}")
        self.location = location
        self.reason = reason


class NotComparable(SidecarError):
    """Two cassettes cannot be diffed (different DSH target)."""

    code = "NOT_COMPARABLE"

    def __init__(self, field: str) -> None:
        super().__init__(f"header {field} differs; the cassettes are not comparable")
        self.field = field
