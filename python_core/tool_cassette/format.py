"""Cassette frames: closed Structs, canonical lines, the hash chain.

Rule: a cassette is NDJSON; each line is one frame, its members sorted by key. ``hash`` is the
``sha256:`` digest of the same frame without ``hash`` as written; ``prev`` is the previous
frame's ``hash`` (``GENESIS`` for the header); ``seq`` counts lines from 0.
Payloads stay ``msgspec.Raw``: arguments, definitions and host events hold canonical bytes; from
version 4 a ``call/result``'s outcome payloads (``value``, ``content``, ``meta``,
``additionalContexts``, ``cancellation.content``) and a ``tool`` frame's ``parameters`` and
``output`` hold the host's own JSON text verbatim (its key order), so a replay serves what the
model saw; every comparison and digest takes their canonical form (``canonical_outcome``,
``canonical_definition``).
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType

from dsh_sidecar.python_core.canonical import (
    NOT_CANONICAL,
    canonical_bytes,
    decode_canonical,
    is_canonical,
    loads_strict,
)
from dsh_sidecar.python_core.cassette_io import GENESIS, ChainFrame, probe_header, seal
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.tool_cassette.matching import MatchRule

__all__ = [
    "GENESIS",
    "IMPORTED_OUTPUT",
    "OBSERVED_VERSION",
    "PROTOCOL",
    "READABLE_VERSIONS",
    "VERBATIM_VERSION",
    "VERSION",
    "AnyFrame",
    "Cancellation",
    "CompleteFrame",
    "DefinitionFrame",
    "Frame",
    "HeaderFrame",
    "HostEvent",
    "HostState",
    "ObservedResult",
    "ObservedStep",
    "ResultFrame",
    "StartFrame",
    "ToolErrorInfo",
    "ToolFailure",
    "canonical_definition",
    "canonical_outcome",
    "canonical_payload",
    "canonical_text",
    "decode_frame",
    "encode",
    "is_well_formed",
    "probe_header",
    "seal",
    "verbatim_text",
]

PROTOCOL = "dsh-tool-cassette"
VERSION = 5
# An imported tool's output schema: its value is the content blocks it showed the model (as
# rc.8's ``defineContentToolFixture``), so the stand-in's rendering is the value itself.
IMPORTED_OUTPUT: Final = b'{"type":"array","items":{"type":"object"}}'
# Version 1 files have no ``host`` member on ``call/result``: their replays restore no host state.
# Versions 1 and 2 have no ``tool`` frames and no rendered content of successes: a tool that no
# plugin registers at replay cannot be stood up from them.
# Versions 1 to 3 keep outcome payloads canonical (keys sorted): a replay serves them so, and a
# tool that renders its value as JSON shows the model the keys sorted.
# Versions 1 to 4 hold no ``observed/*`` frames: their replays compare nothing they did not serve.
READABLE_VERSIONS = frozenset({1, 2, 3, 4, 5})
VERBATIM_VERSION = 4
OBSERVED_VERSION = 5


class ToolErrorInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """``error.info`` of a host failure: set iff the thrown value was a HarnessError."""

    name: str
    code: str


class ToolFailure(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """``error`` of a host failure; ``message`` has no ``Error: `` prefix."""

    message: str
    info: ToolErrorInfo | UnsetType = UNSET


class Cancellation(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """The final cancellation failure that replaced a success in the post phase.

    Its ``additionalContexts`` are not kept: they are the call's recorded contexts plus what
    live post policies add, and both come back on replay by themselves.
    """

    error: ToolFailure
    content: Raw


class Frame(ChainFrame, frozen=True, kw_only=True):
    """A tool cassette frame: ``seq``, ``prev`` and ``hash`` (``ChainFrame``), then its kind's fields."""


class HeaderFrame(Frame, tag="header", frozen=True, kw_only=True):
    """First frame: protocol name, version and the include patterns of the recording.

    ``filters`` and ``match`` (optional, absent when none were declared) are the test-logic
    rules the recording was made with; replay refuses other rules (docs/test-logic.md).
    ``filters`` is the fingerprint of the rules only: a regex may spell the secret itself.
    ``plugins`` (optional) is the composition: a mismatch names what changed since.
    """

    protocol: str
    version: int
    include: tuple[str, ...]
    filters: str | UnsetType = UNSET
    match: dict[str, MatchRule] | UnsetType = UNSET
    # The plugin packages and versions composed at record time (python_core.composition), never
    # their config; absent in files recorded before it was kept, or when the shim reported none.
    plugins: dict[str, str | None] | UnsetType = UNSET
    # ``session-log``: imported from a session log (docs/import.md), not recorded. Each success
    # holds the content the model was shown as its value and its content, and a replay stands
    # every selected tool in from its ``tool`` frame even where a plugin registers it.
    source: Literal["session-log"] | UnsetType = UNSET


class StartFrame(Frame, tag="call/start", frozen=True, kw_only=True):
    """A selected call entered ``tools/execute``; ``ordinal`` counts starts from 0."""

    ordinal: int
    path: str
    tool: str
    args: Raw
    argsDigest: str


class DefinitionFrame(Frame, tag="tool", frozen=True, kw_only=True):
    """A selected tool's contract as registered at record time (version 3), once per tool.

    What a replay needs to stand the tool up when no plugin registers it (its MCP server down,
    its row absent): the model-facing ``description`` and ``parameters`` and the ``output``
    schema DSH validates a served value against. Rendering is data: each success keeps the
    content the real renderer produced. Version 4 keeps both schemas as the host serialized them.
    """

    tool: str
    description: str
    parameters: Raw
    output: Raw
    presentationMeta: bool | UnsetType = UNSET
    timeoutMs: int | UnsetType = UNSET


class HostEvent(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One session event appended during a body: its type and data, verbatim."""

    type: str
    data: Raw


class HostState(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    """The ``host`` member of ``call/result``: paths to observe again, events to append again."""

    observe: tuple[str, ...] = ()
    events: tuple[HostEvent, ...] = ()
    # The session cwd at record time, when the outcome names paths below it (a write's ``path``).
    cwd: str = ""


class ResultFrame(Frame, tag="call/result", frozen=True, kw_only=True):
    """Outcome of the call started with ``ordinal``, at the ``tools/post-execute`` input.

    A success keeps ``value`` and (version 3) the ``content`` and ``meta`` its renderer made
    (version 4: each as the host serialized it), which only a stand-in serves (a registered
    tool renders the value itself); a failure keeps ``error``, ``content`` and ``meta`` verbatim.
    ``cancellation`` is set when the post phase turned the success into an abort.
    """

    ordinal: int
    isError: bool
    value: Raw | UnsetType = UNSET
    error: ToolFailure | UnsetType = UNSET
    content: Raw | UnsetType = UNSET
    meta: Raw | UnsetType = UNSET
    additionalContexts: Raw
    cancellation: Cancellation | UnsetType = UNSET
    host: HostState | UnsetType = UNSET


class ObservedResult(Frame, tag="observed/result", frozen=True, kw_only=True):
    """The final outcome of an *unselected* call (version 5): what it returned, as a digest only.

    A replay runs such a call live and compares its outcome's digest with this one
    (``divergence.py``): a difference means the replayed run saw another world than the
    recording. ``digest`` is over the canonical ``{"isError": false, "value": ...}`` (the value
    without the ``ignore`` pointers, the session cwd as ``<cwd>``) or ``{"isError": true,
    "code": ...}`` (a failure's runtime code only: its message may name a folder).
    """

    path: str
    tool: str
    isError: bool
    digest: str
    ignore: tuple[str, ...] = ()


class ObservedStep(Frame, tag="observed/step", frozen=True, kw_only=True):
    """What one model step of the recording was shown (version 5), as digests only.

    ``session`` numbers the sessions in the order their first step came (0: the run's own);
    ``system`` is the digest of the system prompt (cwd as ``<cwd>``), absent when there was none;
    ``tools`` the offered tools, each ``[name, digest of {name, description, parameters}]``.
    """

    session: int
    turn: int
    step: int
    system: str | UnsetType = UNSET
    tools: tuple[tuple[str, str], ...] = ()


class CompleteFrame(Frame, tag="complete", frozen=True, kw_only=True):
    """Tail frame: the recording finished with ``calls`` calls, each with its result."""

    calls: int


AnyFrame = HeaderFrame | StartFrame | ResultFrame | DefinitionFrame | ObservedResult | ObservedStep | CompleteFrame

_ENCODER = msgspec.json.Encoder(order="sorted")
_DECODER: msgspec.json.Decoder[AnyFrame] = msgspec.json.Decoder(AnyFrame)


def encode(value: Any) -> bytes:
    """Encode Structs/dicts holding canonical ``Raw`` payloads with keys sorted (no newline)."""
    return _ENCODER.encode(value)


def decode_frame(line: bytes) -> AnyFrame:
    """Decode one line (without newline) into a frame.

    Raises:
        msgspec.DecodeError: the line is not JSON or not a frame of this schema.
    """
    return _DECODER.decode(line)


def canonical_payload(value: Any) -> Raw:
    """Return the strict canonical form of a decoded JSON value as ``Raw``.

    Raises:
        CanonicalJsonError: the value has no canonical form.
    """
    return Raw(canonical_bytes(value))


def canonical_text(data: bytes) -> Raw:
    """Parse JSON text strictly and return its canonical form as ``Raw``.

    Raises:
        CanonicalJsonError: the text is not JSON or breaks the strict profile.
    """
    # Text that is already canonical (the mock's arguments, sorted one-key objects, ...) is
    # kept as is after a C-speed check; anything else is parsed strictly and re-encoded.
    if decode_canonical(data) is not NOT_CANONICAL:
        return Raw(data)
    return canonical_payload(loads_strict(data))


def verbatim_text(data: bytes) -> Raw:
    """Return JSON text ``data`` as it is, once it is known to have a strict canonical form.

    Raises:
        CanonicalJsonError: the text is not JSON or breaks the strict profile.
    """
    canonical_text(data)
    return Raw(data)


def _canonical(raw: Raw) -> Raw:
    return canonical_text(bytes(raw))


def canonical_outcome(frame: ResultFrame) -> ResultFrame:
    """``frame`` with its outcome payloads in canonical form: what digests and comparisons see.

    Raises:
        CanonicalJsonError: a payload breaks the strict profile (a verified file never does).
    """
    cancellation = frame.cancellation
    if cancellation is not UNSET:
        cancellation = msgspec.structs.replace(cancellation, content=_canonical(cancellation.content))
    return msgspec.structs.replace(
        frame,
        value=UNSET if frame.value is UNSET else _canonical(frame.value),
        content=UNSET if frame.content is UNSET else _canonical(frame.content),
        meta=UNSET if frame.meta is UNSET else _canonical(frame.meta),
        additionalContexts=_canonical(frame.additionalContexts),
        cancellation=cancellation,
    )


def is_well_formed(body: bytes, frame: AnyFrame, version: int | None) -> bool:
    """Whether line ``body`` is ``frame`` as this format writes it: canonical JSON, except that a
    version 4 ``call/result`` or ``tool`` frame holds its payloads as the host's strict JSON text.

    ``version``: the file's header version (``None`` while reading the header).
    """
    if not isinstance(frame, ResultFrame | DefinitionFrame) or version is None or version < VERBATIM_VERSION:
        return is_canonical(body)
    if encode(frame) != body:
        return False
    try:
        canonical_outcome(frame) if isinstance(frame, ResultFrame) else canonical_definition(frame)
    except CanonicalJsonError:
        return False
    return True


def canonical_definition(frame: DefinitionFrame) -> DefinitionFrame:
    """``frame`` with ``parameters`` and ``output`` in canonical form (for comparisons).

    Raises:
        CanonicalJsonError: a schema breaks the strict profile (a verified file never does).
    """
    return msgspec.structs.replace(frame, parameters=_canonical(frame.parameters), output=_canonical(frame.output))
