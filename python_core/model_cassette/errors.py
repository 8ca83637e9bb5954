"""Named failures of the model cassette.

Rule: messages are built from structural fields only: call position, lane, provider/model
route, fingerprint, message index and role, tool definition name, option name, line number,
frame kind, file base name. Prompt text, answer text, file lines and absolute paths never reach
an error.
"""

from __future__ import annotations

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.model_request import ModelRequestInvalid

__all__ = [
    "ModelCallLeftOut",
    "ModelCassetteClosed",
    "ModelCassetteExists",
    "ModelCassetteIOError",
    "ModelCassetteInvalid",
    "ModelCassetteMismatch",
    "ModelExtraCall",
    "ModelRecordingIncomplete",
    "ModelReplayPoisoned",
    "ModelRequestInvalid",
    "ModelRulesDiffer",
    "ModelUnconsumed",
    "rerecord_hint",
    "short",
]


def short(digest: str) -> str:
    """Return the display form ``sha256:<12 hex>…`` of a ``sha256:`` digest."""
    return digest[:19] + "…"


def rerecord_hint(name: str) -> str:
    """The fix for a replay that no longer matches model cassette ``name`` (a base name)."""
    return (
        f"if the new model requests are intended, re-record: delete {name} and run the same task with "
        'modelCassette.mode: record (run API and pytest: record_mode "all")'
    )


def where(lane: str, position: int) -> str:
    """Name a call by its lane and position in that lane."""
    return f"model call {lane}#{position}"


class ModelCassetteMismatch(SidecarError):
    """A replayed request differs from the recorded one at its position; ``differences`` name what."""

    code = "MODEL_CASSETTE_MISMATCH"

    def __init__(self, lane: str, position: int, differences: list[str], fingerprint: str, recorded: str,
                 cassette: str = "the model cassette", *, view: object = None, recorded_view: object = None) -> None:
        shown = "; ".join(differences[:4]) + (f"; and {len(differences) - 4} more" if len(differences) > 4 else "")
        super().__init__(
            f"{where(lane, position)}: request {short(fingerprint)} differs from recorded {short(recorded)}: {shown}; "
            "no provider request was made"
        )
        self.lane = lane
        self.position = position
        self.differences = differences
        # The filtered request views, for a trace (never printed): the recorded one only when the
        # cassette keeps it (requestView: full).
        self.view = view
        self.recorded_view = recorded_view
        self.hint = rerecord_hint(cassette)


class ModelExtraCall(SidecarError):
    """Replay saw a model call at a position the cassette does not hold."""

    code = "MODEL_CASSETTE_EXTRA_CALL"

    def __init__(self, lane: str, position: int, recorded: int, cassette: str = "the model cassette") -> None:
        super().__init__(
            f"{where(lane, position)}: extra call, the cassette holds {recorded} calls in lane {lane}; "
            "no provider request was made"
        )
        self.lane = lane
        self.position = position
        self.hint = rerecord_hint(cassette)


class ModelReplayPoisoned(SidecarError):
    """Replay refuses every call after the first mismatch."""

    code = "MODEL_CASSETTE_POISONED"

    def __init__(self, lane: str, position: int) -> None:
        super().__init__(
            f"{where(lane, position)}: replay poisoned by an earlier mismatch; no provider request was made"
        )


class ModelUnconsumed(SidecarError):
    """Replay ended with recorded calls that were never requested."""

    code = "MODEL_CASSETTE_UNCONSUMED"

    def __init__(self, count: int, lane: str, position: int, cassette: str = "the model cassette") -> None:
        super().__init__(f"{count} recorded model calls not consumed, first {where(lane, position)}")
        self.count = count
        self.hint = rerecord_hint(cassette)


class ModelCallLeftOut(SidecarError):
    """Replay of a call the recording left out (the host abandoned it at exit): refused, run not failed."""

    code = "MODEL_CALL_LEFT_OUT"

    def __init__(self, lane: str, position: int) -> None:
        super().__init__(
            f"{where(lane, position)} was left out of the recording (the host abandoned it at exit); "
            "answered with this error, no provider request was made"
        )


class ModelCassetteClosed(SidecarError):
    """A model hook arrived after the cassette was closed (``shutdown`` already answered)."""

    code = "MODEL_CASSETTE_CLOSED"

    def __init__(self, method: str) -> None:
        # A late ``model/recorded`` reports a provider request already made: only a refused
        # ``model/request`` can say none was.
        made = "; no provider request was made" if method == "model/request" else ", the call is not recorded"
        super().__init__(f"{method} after shutdown: the model cassette is closed{made}")


class ModelRecordingIncomplete(SidecarError):
    """A recording could not complete; the partial file is kept and nothing is published."""

    code = "MODEL_RECORDING_INCOMPLETE"

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: {reason}; kept {name}.partial, nothing published")


class ModelCassetteExists(SidecarError):
    """Record mode found the cassette or its partial already present (create-only)."""

    code = "MODEL_CASSETTE_EXISTS"

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} already exists; record mode never overwrites (remove it or replay it)")


class ModelCassetteIOError(SidecarError):
    """A cassette file operation failed; names the operation, the base name and the errno."""

    code = "MODEL_CASSETTE_IO"

    def __init__(self, operation: str, name: str, errno_name: str) -> None:
        super().__init__(f"cannot {operation} {name}: {errno_name}")


class ModelCassetteInvalid(SidecarError):
    """The first structural failure of a cassette file, located by line, frame kind and call."""

    code = "MODEL_CASSETTE_INVALID"
    hint = "`dsh-sidecar model-cassette verify <file>` shows the first broken frame; re-record the cassette"

    def __init__(self, reason: str, *, line: int | None = None, kind: str | None = None,
                 ordinal: int | None = None) -> None:
        at = [] if line is None else [f"line {line}"]
        if kind is not None:
            at.append(f"frame {kind}")
        if ordinal is not None:
            at.append(f"call {ordinal}")
        super().__init__(f"{', '.join(at)}: {reason}" if at else reason)
        self.reason = reason
        self.line = line


class ModelRulesDiffer(SidecarError):
    """Replay declares other filters than the ones the recording's header fingerprints."""

    code = "MODEL_CASSETTE_RULES_DIFFER"
    hint = "declare the filters the cassette was recorded with, or re-record"

    def __init__(self, name: str) -> None:
        super().__init__(f"modelCassette.filters differs from the filters recorded in {name}")
        self.name = name
