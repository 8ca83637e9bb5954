"""The ``dsh-subagent-cassette`` file format: version 2 (rc.8, written) and version 1 (read).

Versions: v1 is the rc.7 format, read only (target ``0.1.0-rc.7``, or ``0.1.0-rc.8`` as a
v1 writer retargeted to rc.8 stamps it; closed header without ``provider.continuable``, an
unvalidated ``result.diagnostic``, a ``start-error`` may be published); v2 is the rc.8
profile this product writes (``provider.continuable`` required, the host's target,
``diagnostic`` capped, ``start-error`` unpublished). Both share every other rule.

Rule: this module owns every record shape and every validity rule of a cassette document
(closed Structs, canonical bytes, digests, hash chain, sequence/occurrence/call-key rules,
publication invariants, request views). It does no I/O: ``CassetteParser.feed`` takes lines,
``seal_header``/``seal_interaction`` return the exact bytes to write. Writers revalidate every
record with the same checks the loader runs, so nothing written here can fail to load.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from dsh_sidecar.python_core.canonical import (
    MAX_SAFE_INTEGER,
    NOT_CANONICAL,
    Count,
    canonical_bytes,
    decode_canonical,
    digest,
    loads_strict,
)
from dsh_sidecar.python_core.cassette_io import mapping_hash, schema_location, seal_mapping
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.subagent_cassette.errors import (
    CassetteFormatError,
    CassetteIntegrityError,
    TargetMismatch,
    escape,
)

__all__ = [
    "DIAGNOSTIC_MAX_BYTES",
    "FORMAT",
    "SUPPORTED_TARGETS",
    "VERSION",
    "Capabilities",
    "Cassette",
    "CassetteParser",
    "FullRequest",
    "FullView",
    "Header",
    "Interaction",
    "MetadataView",
    "Outcome",
    "ProviderFacts",
    "RecordedError",
    "RequestMetadata",
    "RequestView",
    "ResultErrorOutcome",
    "ResultOutcome",
    "StartErrorOutcome",
    "Target",
    "Timing",
    "ToolFilter",
    "ambiguous_groups",
    "check_blocks",
    "check_header",
    "check_interaction",
    "group_key",
    "outcome_fingerprint",
    "outcome_kind",
    "project_stop_reason",
    "seal_header",
    "seal_interaction",
    "to_json",
]

FORMAT: Final = "dsh-subagent-cassette"
VERSION: Final = 2
V1: Final = 1
READ_VERSIONS: Final = (V1, VERSION)
V1_TARGET: Final = "0.1.0-rc.7"
# Version 1 as an rc.8 writer that kept the v1 header stamps it: read like rc.7's (same
# start() contract but for continuable and diagnostic, neither of which v1 carries).
V1_TARGETS: Final = frozenset({V1_TARGET, "0.1.0-rc.8"})
SUPPORTED_TARGETS: Final = frozenset({"0.1.0-rc.8"})
DIAGNOSTIC_MAX_BYTES: Final = 4096
STOP_REASONS: Final = frozenset({"completed", "aborted", "error", "max-tokens", "refusal"})

Digest = Annotated[str, Meta(pattern=r"^sha256:[0-9a-f]{64}$")]
NonEmpty = Annotated[str, Meta(min_length=1)]
Positive = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
Millis = Annotated[float, Meta(ge=0)]
JsonObject = dict[str, Any]


class _Closed(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """Base of every cassette-owned wrapper: closed, immutable, optional keys omitted."""


class Target(_Closed, frozen=True, kw_only=True):
    """The exact DSH subagent contract the recording ran against."""

    dshSubagent: NonEmpty


class Capabilities(_Closed, frozen=True, kw_only=True):
    """``SubagentProvider.capabilities`` of the upstream, mirrored during replay."""

    outputSchema: bool
    depthLimit: bool
    toolFilter: bool
    persona: bool


class ProviderFacts(_Closed, frozen=True, kw_only=True):
    """Provider names and upstream facts; ``continuable`` is the v2 (rc.8) extension.

    Required in version 2 and absent in version 1 (``check_header`` enforces both): a v1
    provider's continuability is unknown.
    """

    cassette: NonEmpty
    upstream: NonEmpty
    capabilities: Capabilities
    inheritsParentContext: bool
    continuable: bool | UnsetType = UNSET


class Header(_Closed, frozen=True, kw_only=True, tag_field="kind", tag="cassette/header"):
    """Line 1 of every cassette."""

    format: str
    version: int
    cassetteId: NonEmpty
    createdAt: NonEmpty
    target: Target
    provider: ProviderFacts
    requestStorage: Literal["metadata", "full"]
    redactSecrets: bool
    redactionPatterns: list[str]
    hash: Digest


class ToolFilter(_Closed, frozen=True, kw_only=True):
    """``ToolRestriction``: optional allow/deny string arrays, nothing else."""

    allow: list[str] | UnsetType = UNSET
    deny: list[str] | UnsetType = UNSET


class RequestMetadata(_Closed, frozen=True, kw_only=True):
    """The privacy-preserving request view: shapes and flags, no prompt text."""

    label: str | UnsetType = UNSET
    promptBlocks: Count
    promptBytes: Count
    hasOutputSchema: bool
    maxDepth: Count | UnsetType = UNSET
    childProvider: str | UnsetType = UNSET
    childModel: str | UnsetType = UNSET
    toolFilter: ToolFilter | UnsetType = UNSET
    hasPersona: bool


class MetadataView(_Closed, frozen=True, kw_only=True, tag_field="storage", tag="metadata"):
    """``requestStorage: metadata`` arm (the default)."""

    metadata: RequestMetadata


class FullRequest(_Closed, frozen=True, kw_only=True):
    """The normalized request without ``parent``, ``signal`` and ``descriptor``."""

    label: str | UnsetType = UNSET
    prompt: list[JsonObject]
    agentOptions: JsonObject | UnsetType = UNSET
    outputSchema: JsonObject | UnsetType = UNSET
    maxDepth: Count | UnsetType = UNSET
    toolFilter: ToolFilter | UnsetType = UNSET
    persona: str | UnsetType = UNSET


class FullView(_Closed, frozen=True, kw_only=True, tag_field="storage", tag="full"):
    """``requestStorage: full`` arm: the redacted normalized request."""

    value: FullRequest
    redactions: Count


RequestView = MetadataView | FullView


class Timing(_Closed, frozen=True, kw_only=True):
    """Observed timing; offsets are milliseconds from the start admission."""

    startedAt: NonEmpty
    startLatencyMs: Millis
    durationMs: Millis
    signalAbortedAtMs: Millis | UnsetType = UNSET
    disposeCalledAtMs: Millis | UnsetType = UNSET


class RecordedError(_Closed, frozen=True, kw_only=True):
    """The only error facts persisted: name, (redacted) message, optional code."""

    name: str
    message: str
    code: str | UnsetType = UNSET


class ResultOutcome(_Closed, frozen=True, kw_only=True, tag_field="kind", tag="result"):
    """A settled ``SubagentResult``; the result object itself stays extensible."""

    result: JsonObject
    redactions: Count


class StartErrorOutcome(_Closed, frozen=True, kw_only=True, tag_field="kind", tag="start-error"):
    """``provider.start()`` rejected before publication."""

    error: RecordedError


class ResultErrorOutcome(_Closed, frozen=True, kw_only=True, tag_field="kind", tag="result-error"):
    """``run.result`` rejected after publication (infrastructure fault)."""

    error: RecordedError


Outcome = ResultOutcome | StartErrorOutcome | ResultErrorOutcome


class Interaction(_Closed, frozen=True, kw_only=True, tag_field="kind", tag="cassette/interaction"):
    """One terminal subagent boundary call."""

    sequence: Positive
    callKey: NonEmpty
    parentKey: NonEmpty
    parentContextFingerprint: Digest
    occurrence: Positive
    requestFingerprint: Digest
    request: RequestView
    timing: Timing
    published: bool
    local: bool
    outcome: Outcome
    previousHash: Digest
    hash: Digest


class Cassette(Struct, frozen=True, kw_only=True):
    """A fully validated document (``interactions`` empty when parsed with ``keep=False``)."""

    name: str
    header: Header
    interactions: tuple[Interaction, ...]
    count: int
    last_hash: str


# Version 2 lines are canonical JSON (what is hashed is the bytes read, as in every format this
# product defines); version 1 (rc.7) lines need only be canonicalisable.
_NOT_CANONICAL = "not canonical JSON (version 2 lines are written canonical; this one was edited)"
_KNOWN_BLOCKS: Final[dict[str, tuple[str, ...]]] = {
    "text": ("text",),
    "reasoning": ("text",),
    "tool-call": ("id", "name"),
    "tool-result": ("toolCallId",),
    "image": (),
}


def to_json(value: Struct) -> Any:
    """Return the JSON builtins of a record (``UNSET`` keys omitted, tags included)."""
    return msgspec.to_builtins(value)


def group_key(parent_key: str, parent_fp: str, request_fp: str) -> tuple[str, str, str]:
    """Return the matching group of an interaction (occurrence counts within it)."""
    return (parent_key, parent_fp, request_fp)


def outcome_fingerprint(outcome: Outcome) -> str:
    """Return the canonical digest of an outcome (diff equivalence and ambiguity)."""
    return digest(to_json(outcome))


def project_stop_reason(outcome: Outcome) -> str:
    """Project an outcome to a printable class; unknown stop reasons become ``other``."""
    if isinstance(outcome, ResultOutcome):
        reason = outcome.result.get("stopReason")
        return reason if isinstance(reason, str) and reason in STOP_REASONS else "other"
    return outcome_kind(outcome)


def outcome_kind(outcome: Outcome) -> str:
    """Return the ``kind`` tag of an outcome arm."""
    if isinstance(outcome, ResultOutcome):
        return "result"
    return "start-error" if isinstance(outcome, StartErrorOutcome) else "result-error"


def _render_path(node: tuple[Any, ...] | None) -> str:
    """Render a parent-pointer path (built lazily so deep nesting stays linear)."""
    parts: list[str] = []
    while node is not None:
        parent, label = node
        parts.append(label)
        node = parent
    return "".join(reversed(parts))


def check_blocks(blocks: Any, where: str) -> str | None:
    """Validate typed content blocks iteratively; return the first problem or ``None``.

    Built-in types need their required fields; unknown types only need a string ``type``.
    Nested ``tool-result.content`` arrays go on a worklist, so work is linear in blocks.
    """
    worklist: list[tuple[Any, tuple[Any, ...]]] = [(blocks, (None, where))]
    while worklist:
        items, path = worklist.pop()
        if not isinstance(items, list):
            return f"{_render_path(path)} is not an array"
        for index, block in enumerate(items):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                return f"{_render_path(path)}[{index}] is not a typed content block"
            required = _KNOWN_BLOCKS.get(block["type"])
            if required is None:
                continue
            for field in required:
                if not isinstance(block.get(field), str):
                    return f"{_render_path(path)}[{index}].{field} is not a string"
            kind = block["type"]
            if kind == "tool-call" and "arguments" not in block:
                return f"{_render_path(path)}[{index}].arguments is missing"
            if kind == "image":
                attachment = block.get("attachment")
                if not isinstance(attachment, dict) or not all(
                    isinstance(attachment.get(key), str) for key in ("attachmentId", "mediaType")
                ):
                    return f"{_render_path(path)}[{index}].attachment is not an image reference"
            if kind == "tool-result":
                if "isError" in block and not isinstance(block["isError"], bool):
                    return f"{_render_path(path)}[{index}].isError is not a boolean"
                worklist.append((block.get("content"), ((path, f"[{index}]"), ".content")))
    return None


def _check_result(result: JsonObject, *, diagnostic: bool = True) -> str | None:
    """Check the minimum ``SubagentResult`` shape (plus, in v2, the rc.8 ``diagnostic`` cap)."""
    if "output" not in result:
        return "outcome.result.output is missing"
    problem = check_blocks(result["output"], "outcome.result.output")
    if problem is not None:
        return problem
    if not isinstance(result.get("stopReason"), str):
        return "outcome.result.stopReason is not a string"
    if diagnostic and "diagnostic" in result:
        text = result["diagnostic"]
        if not isinstance(text, str):
            return "outcome.result.diagnostic is not a string"
        if len(text.encode("utf-8", "surrogatepass")) > DIAGNOSTIC_MAX_BYTES:
            return f"outcome.result.diagnostic exceeds {DIAGNOSTIC_MAX_BYTES} UTF-8 bytes"
    return None


def _is_timestamp(text: str) -> bool:
    """Tell whether ``text`` is an ISO-8601 timestamp."""
    try:
        _dt.datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def check_header(header: Header) -> str | None:
    """Return the first semantic problem of a header (target excepted), or ``None``."""
    if header.format != FORMAT:
        return "format is not dsh-subagent-cassette"
    if header.version not in READ_VERSIONS:
        return f"version {header.version} is not supported (expected 1 or 2)"
    if header.version == V1 and header.target.dshSubagent not in V1_TARGETS:
        return f"version 1 targets dsh-subagent {V1_TARGET} (or 0.1.0-rc.8)"
    if header.version == V1 and header.provider.continuable is not UNSET:
        return "provider.continuable is not a field of version 1 (its header is closed)"
    if header.version == VERSION and header.provider.continuable is UNSET:
        return "provider.continuable is required in version 2"
    if not _is_timestamp(header.createdAt):
        return "createdAt is not an ISO-8601 timestamp"
    return None


def _check_target(name: str, header: Header, expected_target: str | None) -> None:
    """Refuse a target other than the host's (or, without a host, a supported one)."""
    found = header.target.dshSubagent
    if header.version == V1:
        # Version 1 targets 0.1.0-rc.7, or rc.8 as a v1 writer retargeted to it stamps it
        # (check_header). Its start() contract is rc.8's minus continuable and diagnostic,
        # so an rc.8 host replays it.
        return
    if expected_target is not None:
        if found != expected_target:
            raise TargetMismatch(name, found, expected_target)
    elif found not in SUPPORTED_TARGETS:
        raise TargetMismatch(name, found, " or ".join(sorted(SUPPORTED_TARGETS)))


def check_interaction(header: Header, record: Interaction) -> str | None:
    """Return the first per-record rule a complete interaction breaks, or ``None``."""
    storage = "full" if isinstance(record.request, FullView) else "metadata"
    if storage != header.requestStorage:
        return (
            f"request.storage {storage} differs from header requestStorage "
            f"{header.requestStorage}"
        )
    if isinstance(record.request, FullView):
        problem = check_blocks(record.request.value.prompt, "request.value.prompt")
        if problem is not None:
            return problem
    timing = record.timing
    if not _is_timestamp(timing.startedAt):
        return "timing.startedAt is not an ISO-8601 timestamp"
    if timing.durationMs < timing.startLatencyMs:
        return "timing.durationMs is less than timing.startLatencyMs"
    outcome = record.outcome
    if isinstance(outcome, StartErrorOutcome):
        # Version 1 allows a published start-error; v2 requires it unpublished.
        if record.published and header.version != V1:
            return "published must be false for a start-error outcome"
    elif not record.published:
        return f"published must be true for a {outcome_kind(outcome)} outcome"
    if record.local and not record.published:
        return "local requires a published run"
    if isinstance(outcome, ResultOutcome):
        return _check_result(outcome.result, diagnostic=header.version != V1)
    return None


def _schema_reason(exc: msgspec.ValidationError) -> str:
    """Turn a msgspec message into a reason that never echoes a file value."""
    text = str(exc)
    message = text.partition(" - at ")[0]
    if message.startswith("Invalid enum value") or message.startswith("Invalid value"):
        message = "invalid value"
    elif message.startswith("Expected `str` matching regex"):
        message = "expected a sha256:<64 lowercase hex> digest"
    elif message.startswith("Object contains unknown field"):
        field = message.removeprefix("Object contains unknown field ")
        message = "unknown field " + escape(field, 60)
    return f"{message} at {schema_location(exc)}"


def _decode(line: bytes) -> tuple[Any, bytes | None]:
    """Decode one line; return the value and, for canonical lines, the bytes themselves.

    Raises:
        CanonicalJsonError: the line breaks the strict profile (duplicate keys, -0, ...).
    """
    try:
        value = decode_canonical(line)
        if value is not NOT_CANONICAL:
            return value, line
    except (msgspec.DecodeError, CanonicalJsonError, UnicodeError, RecursionError):
        pass
    value = loads_strict(line)
    try:
        canonical = canonical_bytes(value)
    except UnicodeError:
        raise CanonicalJsonError("/", "lone surrogate in a string") from None
    except RecursionError:
        raise CanonicalJsonError("/", "nesting too deep") from None
    try:
        _LOSSLESS.decode(line.decode("utf-8-sig", "surrogatepass"))
    except UnicodeDecodeError:
        raise CanonicalJsonError("/", "not UTF-8") from None
    # The record as its canonical form reads (JavaScript's one number type: `1.0` is the
    # integer 1); the hash is the same either way.
    return _CANONICAL_READER.decode(canonical), None


def _lossless_float(text: str) -> float:
    """Refuse a literal whose decimal value differs from its double's shortest form's."""
    number = float(text)
    if math.isfinite(number) and Decimal(text) != Decimal(repr(number)):
        raise CanonicalJsonError("/", "number does not survive parsing")
    return number


# A version 1 line may print a number in any form that denotes the value its double prints as
# ("lossless canonical numbers"): `829.1700` and `8.2917e2` are 829.17, while
# `829.17000000000000000001` also reads as 829.17 but says more than the double holds: refused.
# Runs after ``loads_strict``, which has refused everything else the profile refuses.
_LOSSLESS: Final = json.JSONDecoder(parse_float=_lossless_float)
_CANONICAL_READER: Final = msgspec.json.Decoder()


class CassetteParser:
    """Incremental validator: ``feed`` every physical line, then ``finish``."""

    def __init__(self, name: str, *, expected_target: str | None = None, keep: bool = True):
        """Start a parse of the document called ``name`` (a display name, no directories)."""
        self.name = name
        self._expected_target = expected_target
        self._keep = keep
        self._header: Header | None = None
        self._previous = ""
        self._interactions: list[Interaction] = []
        self._count = 0
        self._max_sequence = 0
        self._sequences: set[int] = set()
        self._call_keys: set[str] = set()
        self._groups: dict[tuple[str, str, str], tuple[set[int], int]] = {}
        self._last_line = 0

    def _fail(self, line: int, reason: str) -> CassetteFormatError:
        return CassetteFormatError(self.name, line, reason)

    def feed(self, line: bytes, lineno: int) -> None:
        """Validate one physical line (``lineno`` counts from 1; blank lines are skipped).

        Raises:
            CassetteFormatError: schema, canonical-JSON or rule violation at this line.
            CassetteIntegrityError: hash or chain link mismatch at this line.
            TargetMismatch: the header targets another DSH subagent version.
        """
        line = line.rstrip(b"\r\n")
        if not line.strip():
            return
        self._last_line = lineno
        try:
            value, canonical_line = _decode(line)
        except CanonicalJsonError as exc:
            raise self._fail(lineno, exc.message) from None
        if not isinstance(value, dict):
            raise self._fail(lineno, "record is not a JSON object")
        if self._header is None:
            self._feed_header(value, canonical_line, lineno)
        else:
            self._feed_interaction(self._header, value, canonical_line, lineno)

    def _feed_header(self, value: dict[str, Any], line: bytes | None, lineno: int) -> None:
        if value.get("kind") != "cassette/header":
            raise self._fail(lineno, "first record is not a cassette/header")
        if value.get("format") != FORMAT:
            raise self._fail(lineno, "format is not dsh-subagent-cassette")
        if value.get("version") not in READ_VERSIONS:
            raise self._fail(lineno, "version is not 1 or 2")
        try:
            header = msgspec.convert(value, Header)
        except msgspec.ValidationError as exc:
            raise self._fail(lineno, _schema_reason(exc)) from None
        problem = check_header(header)
        if problem is not None:
            raise self._fail(lineno, problem)
        if line is None and header.version == VERSION:
            raise self._fail(lineno, _NOT_CANONICAL)
        _check_target(self.name, header, self._expected_target)
        if mapping_hash(value, line) != header.hash:
            raise CassetteIntegrityError(self.name, lineno, "header hash does not match")
        self._header = header
        self._previous = header.hash

    def _feed_interaction(
        self, header: Header, value: dict[str, Any], line: bytes | None, lineno: int
    ) -> None:
        if value.get("kind") != "cassette/interaction":
            raise self._fail(lineno, "record is not a cassette/interaction")
        if line is None and header.version == VERSION:
            raise self._fail(lineno, _NOT_CANONICAL)
        try:
            record = msgspec.convert(value, Interaction)
        except msgspec.ValidationError as exc:
            raise self._fail(lineno, _schema_reason(exc)) from None
        problem = check_interaction(header, record)
        if problem is not None:
            raise self._fail(lineno, problem)
        if mapping_hash(value, line) != record.hash:
            raise CassetteIntegrityError(self.name, lineno, "interaction hash does not match")
        if record.previousHash != self._previous:
            raise CassetteIntegrityError(
                self.name, lineno, "previousHash does not link to the preceding record"
            )
        if record.sequence in self._sequences:
            raise self._fail(lineno, f"sequence {record.sequence} is repeated")
        if record.callKey in self._call_keys:
            raise self._fail(lineno, f"callKey {escape(record.callKey)} is repeated")
        key = group_key(
            record.parentKey, record.parentContextFingerprint, record.requestFingerprint
        )
        occurrences, _ = self._groups.get(key, (set(), 0))
        if record.occurrence in occurrences:
            raise self._fail(lineno, f"occurrence {record.occurrence} is repeated in its group")
        occurrences.add(record.occurrence)
        self._groups[key] = (occurrences, lineno)
        self._sequences.add(record.sequence)
        self._call_keys.add(record.callKey)
        self._max_sequence = max(self._max_sequence, record.sequence)
        self._previous = record.hash
        self._count += 1
        if self._keep:
            self._interactions.append(record)

    def finish(self) -> Cassette:
        """Check document-wide rules and return the cassette.

        Raises:
            CassetteFormatError: no header, non-contiguous sequences or occurrences.
        """
        if self._header is None:
            raise self._fail(1, "missing cassette/header")
        if self._max_sequence != self._count:
            raise self._fail(
                self._last_line,
                f"sequences are not contiguous: {self._count} interaction(s), "
                f"highest sequence {self._max_sequence}",
            )
        for occurrences, lineno in self._groups.values():
            if max(occurrences) != len(occurrences):
                raise self._fail(lineno, "occurrences are not contiguous from 1 in a group")
        return Cassette(
            name=self.name,
            header=self._header,
            interactions=tuple(self._interactions),
            count=self._count,
            last_hash=self._previous,
        )


def seal_header(
    *,
    cassette_id: str,
    created_at: str,
    target: str,
    provider: ProviderFacts,
    request_storage: Literal["metadata", "full"],
    redact_secrets: bool,
    redaction_patterns: list[str],
) -> tuple[Header, bytes]:
    """Build, hash and validate a header; return it with its line bytes.

    Raises:
        CassetteFormatError: the header would not load (e.g. unsupported target).
    """
    body = {
        "kind": "cassette/header",
        "format": FORMAT,
        "version": VERSION,
        "cassetteId": cassette_id,
        "createdAt": created_at,
        "target": {"dshSubagent": target},
        "provider": to_json(provider),
        "requestStorage": request_storage,
        "redactSecrets": redact_secrets,
        "redactionPatterns": list(redaction_patterns),
    }
    _, line = seal_mapping(body)
    parser = CassetteParser("<new header>", expected_target=target)
    parser.feed(line, 1)
    return parser.finish().header, line


def seal_interaction(header: Header, record: Interaction) -> tuple[Interaction, bytes]:
    """Hash a complete interaction (its ``hash`` is ignored) and revalidate it.

    Raises:
        CassetteFormatError: the record breaks a schema or per-record rule.
        CanonicalJsonError: the record holds a value with no canonical form.
    """
    body = to_json(record)
    body.pop("hash", None)
    record_hash, line = seal_mapping(body)
    try:
        sealed = msgspec.convert({**body, "hash": record_hash}, Interaction)
    except msgspec.ValidationError as exc:
        raise CassetteFormatError("<new interaction>", 0, _schema_reason(exc)) from None
    problem = check_interaction(header, sealed)
    if problem is not None:
        raise CassetteFormatError("<new interaction>", 0, problem)
    return sealed, line


def ambiguous_groups(
    interactions: Iterable[Interaction],
) -> dict[tuple[str, str, str], int]:
    """Return each group holding more than one distinct canonical outcome, with that count."""
    outcomes: dict[tuple[str, str, str], set[str]] = {}
    for record in interactions:
        key = group_key(
            record.parentKey, record.parentContextFingerprint, record.requestFingerprint
        )
        outcomes.setdefault(key, set()).add(outcome_fingerprint(record.outcome))
    return {key: len(found) for key, found in outcomes.items() if len(found) > 1}
