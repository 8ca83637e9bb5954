"""The canonical view of one ``stream()`` request, its part digests and how two differ.

Rule: the view keeps what changes the answer and nothing volatile. Kept: ``provider``,
``model``, ``purpose``, ``system``, ``tools`` (name, description, parameters, in order),
``messages`` (role, source, content, in order) and every other request field as an *option*
(``maxTokens``, ``temperature``, ``reasoningEffort``, ``stop``, ...). Dropped: ``signal``,
``sessionId``, every message ``id`` and a compaction checkpoint's ``source.compactionId`` (and
``sourceCommandId``) (fresh UUIDs each run). The DSH working directory, which
rc.8 writes into the system prompt and the runtime-context message, becomes ``<cwd>`` so a
cassette replays from another folder and never holds an absolute path.

The fingerprint is the digest of the canonical ``RequestParts`` (route, purpose, one digest per
option, system, tool and message), so ``verify`` can recheck it without the prompt text and a
mismatch can name the message index, tool definition or option that differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from dsh_sidecar.python_core.canonical import canonical_bytes, digest_bytes
from dsh_sidecar.python_core.errors import SidecarError

__all__ = [
    "CWD_TOKEN",
    "FilterView",
    "MessageDigest",
    "ModelRequestInvalid",
    "RequestParts",
    "ToolDigest",
    "checked_parts",
    "compare",
    "filter_view",
    "lane_of",
    "normalize",
    "parts_of",
    "parts_of_canonical",
]


class ModelRequestInvalid(SidecarError):
    """A ``model/request`` whose request has a field of the wrong shape; names the field, never its value."""

    code = "MODEL_REQUEST_INVALID"

    def __init__(self, field: str, expected: str) -> None:
        super().__init__(f"model/request: request.{field} is not {expected}; no provider request was made")
        self.field = field

CWD_TOKEN = "<cwd>"
_VOLATILE = frozenset({"signal", "sessionId"})
_STRUCTURE = frozenset({"provider", "model", "purpose", "system", "tools", "messages"})
DEFAULT_LANE = "model"
_SORTED = msgspec.json.Encoder(order="sorted")


class ToolDigest(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    """One tool definition: its name and the digest of its canonical definition."""

    name: str
    digest: str


class MessageDigest(msgspec.Struct, frozen=True, forbid_unknown_fields=True, array_like=True):
    """One history message: its role and the digest of its canonical role, source and content."""

    role: str
    digest: str


class RequestParts(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """The digests a fingerprint is made of; text never appears here."""

    provider: str
    model: str
    purpose: str | None = None
    options: dict[str, str] = msgspec.field(default_factory=dict)
    system: str | None = None
    tools: list[ToolDigest] = msgspec.field(default_factory=list)
    messages: list[MessageDigest] = msgspec.field(default_factory=list)

    def fingerprint(self) -> str:
        """Return the ``sha256:`` digest of these parts' canonical JSON."""
        # Parts hold only strings and small integers: when every string is ASCII, msgspec's
        # sorted-key encoding is already the canonical form (a C-speed path for verify).
        fast = _SORTED.encode(self)
        return digest_bytes(fast if fast.isascii() else canonical_bytes(msgspec.to_builtins(self)))


def lane_of(purpose: str | None) -> str:
    """The lane a call is positioned in: its ``purpose``, else ``model`` (loop and hand-built calls)."""
    return purpose or DEFAULT_LANE


def replace_cwd(value: Any, cwd: str) -> Any:
    """``value`` with every occurrence of ``cwd`` in its strings written as ``<cwd>``."""
    if isinstance(value, str):
        return value.replace(cwd, CWD_TOKEN) if cwd in value else value
    if isinstance(value, list):
        return [replace_cwd(v, cwd) for v in value]
    if isinstance(value, dict):
        return {k: replace_cwd(v, cwd) for k, v in value.items()}
    return value


def _text(request: Mapping[str, Any], key: str) -> str:
    value = request.get(key, "")
    if not isinstance(value, str):
        raise ModelRequestInvalid(key, "a string")
    return value


def _objects(request: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    """``request[key]`` as a list of objects (absent or null: empty)."""
    value = request.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelRequestInvalid(key, "a list")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise ModelRequestInvalid(f"{key}[{index}]", "an object")
    return value


# Ids a message source carries that are fresh each run: a compaction checkpoint's
# (``@deepseek-ai/dsh-compaction`` ``compactCheckpointSource``), and the command's that asked for it.
_SOURCE_IDS = frozenset({"compactionId", "sourceCommandId"})


def _source(source: Any) -> Any:
    if isinstance(source, Mapping) and not _SOURCE_IDS.isdisjoint(source):
        return {k: v for k, v in source.items() if k not in _SOURCE_IDS}
    return source


def normalize(request: Mapping[str, Any], *, cwd: str) -> dict[str, Any]:
    """Return the canonical view of a request (see the module rule).

    Raises:
        CanonicalJsonError: a value has no canonical JSON form.
        ModelRequestInvalid: ``provider``/``model``/``purpose`` is not a string, or ``tools`` or
            ``messages`` is not a list of objects.
    """
    view: dict[str, Any] = {"provider": _text(request, "provider"), "model": _text(request, "model")}
    for key in ("purpose", "system"):
        if request.get(key) is not None:
            view[key] = request[key]
    if not isinstance(view.get("purpose", ""), str):
        raise ModelRequestInvalid("purpose", "a string")
    view["tools"] = [
        {k: t[k] for k in ("name", "description", "parameters") if k in t} for t in _objects(request, "tools")
    ]
    view["messages"] = [
        {k: _source(m[k]) if k == "source" else m[k] for k in ("role", "source", "content") if k in m}
        for m in _objects(request, "messages")
    ]
    options = {k: v for k, v in request.items() if k not in _STRUCTURE and k not in _VOLATILE and v is not None}
    if options:
        view["options"] = options
    # A root cwd would rewrite every slash: only a real folder path is replaced.
    if len(cwd) > 1:
        view = replace_cwd(view, cwd)
    canonical_bytes(view)  # raises on values with no canonical form, naming where
    return view


FilterView = Callable[[Any], Any]
"""One filter pass over a decoded value (``Filters.apply`` bound to the request side)."""


def filter_view(view: dict[str, Any], apply: FilterView) -> dict[str, Any]:
    """Return ``view`` with ``apply`` run over each part on its own, its structure kept.

    The parts are the system prompt, each tool definition, each message and each option's
    value (so a pointer is relative to one of them: ``/content/0/text`` in a message); the
    route (``provider``, ``model``, ``purpose``), the option names and the lists themselves are
    never replaced, so lane, position and part digests keep their meaning.
    """
    out = dict(view)
    if "system" in view:
        out["system"] = apply(view["system"])
    out["tools"] = [apply(tool) for tool in view["tools"]]
    out["messages"] = [apply(message) for message in view["messages"]]
    if "options" in view:
        out["options"] = {name: apply(value) for name, value in view["options"].items()}
    return out


class _Slices(msgspec.Struct, gc=False):
    """A canonical view split into the byte slices its digests are taken of."""

    provider: str
    model: str
    purpose: str | None = None
    system: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b""))
    tools: list[msgspec.Raw] = msgspec.field(default_factory=list)
    messages: list[msgspec.Raw] = msgspec.field(default_factory=list)
    options: dict[str, msgspec.Raw] = msgspec.field(default_factory=dict)


class _Named(msgspec.Struct, gc=False):
    name: str = ""


class _Role(msgspec.Struct, gc=False):
    role: str = ""


_SLICES = msgspec.json.Decoder(_Slices)
_NAMED = msgspec.json.Decoder(_Named)
_ROLE = msgspec.json.Decoder(_Role)


def parts_of(view: Mapping[str, Any]) -> RequestParts:
    """Digest a normalized view into its parts.

    Raises:
        CanonicalJsonError: a value has no canonical JSON form.
    """
    return parts_of_canonical(canonical_bytes(view))


def parts_of_canonical(view: bytes) -> RequestParts:
    """Digest the canonical bytes of a normalized view into its parts.

    The canonical form of an object embeds each member's canonical form verbatim, so every
    part digest is the digest of a slice of ``view``: one C-speed decode, no re-encoding.

    Raises:
        msgspec.DecodeError: ``view`` is not a request view.
    """
    return _parts(_SLICES.decode(view))


def checked_parts(view: bytes) -> tuple[RequestParts, bool]:
    """Digest ``view`` into its parts and tell whether ``view`` is exactly the canonical glue of
    its slices (sorted ASCII keys, no whitespace).

    Parts equal to a recorded ``RequestParts`` prove every slice is the recorded canonical
    bytes; the glue check proves the rest, so a verifier needs no separate canonical pass.

    Raises:
        msgspec.DecodeError: ``view`` is not a request view.
    """
    slices = _SLICES.decode(view)
    members: list[tuple[bytes, bytes]] = [
        (b"messages", b"[" + b",".join(slices.messages) + b"]"),
        (b"model", _SORTED.encode(slices.model)),
        (b"provider", _SORTED.encode(slices.provider)),
        (b"tools", b"[" + b",".join(slices.tools) + b"]"),
    ]
    if slices.options:
        names = sorted(slices.options)
        if not all(name.isascii() for name in names):
            return _parts(slices), False  # UTF-16 key order: leave it to the full canonical check
        body = b",".join(_SORTED.encode(name) + b":" + slices.options[name] for name in names)
        members.append((b"options", b"{" + body + b"}"))
    if slices.purpose is not None:
        members.append((b"purpose", _SORTED.encode(slices.purpose)))
    if len(slices.system):
        members.append((b"system", bytes(slices.system)))
    glue = b"{" + b",".join(b'"' + key + b'":' + value for key, value in sorted(members)) + b"}"
    return _parts(slices), glue == view


def _parts(slices: _Slices) -> RequestParts:
    return RequestParts(
        provider=slices.provider,
        model=slices.model,
        purpose=slices.purpose,
        options={name: digest_bytes(raw) for name, raw in sorted(slices.options.items())},
        system=digest_bytes(slices.system) if len(slices.system) else None,
        tools=[ToolDigest(_NAMED.decode(raw).name, digest_bytes(raw)) for raw in slices.tools],
        messages=[MessageDigest(_ROLE.decode(raw).role, digest_bytes(raw)) for raw in slices.messages],
    )


def _names(tools: list[ToolDigest]) -> list[str]:
    return [t.name for t in tools]


def compare(recorded: RequestParts, actual: RequestParts) -> list[str]:
    """Name every difference between two requests, structurally (never their text)."""
    out: list[str] = []
    if (recorded.provider, recorded.model) != (actual.provider, actual.model):
        out.append(f"route {actual.provider}/{actual.model} (recorded {recorded.provider}/{recorded.model})")
    if recorded.purpose != actual.purpose:
        out.append(f"purpose {actual.purpose or 'none'} (recorded {recorded.purpose or 'none'})")
    for name in sorted(set(recorded.options) | set(actual.options)):
        if name not in actual.options:
            out.append(f"option {name} missing")
        elif name not in recorded.options:
            out.append(f"option {name} added")
        elif recorded.options[name] != actual.options[name]:
            out.append(f"option {name} differs")
    if recorded.system != actual.system:
        out.append("system prompt differs" if recorded.system and actual.system else "system prompt added or missing")
    out += _tool_differences(recorded.tools, actual.tools)
    out += _message_differences(recorded.messages, actual.messages)
    return out


def _tool_differences(recorded: list[ToolDigest], actual: list[ToolDigest]) -> list[str]:
    out: list[str] = []
    before = {t.name: t.digest for t in recorded}
    after = {t.name: t.digest for t in actual}
    out += [f"tool {name} missing" for name in before if name not in after]
    out += [f"tool {name} added" for name in after if name not in before]
    out += [f"tool {name} definition differs" for name in after if name in before and before[name] != after[name]]
    if not out and _names(recorded) != _names(actual):
        out.append("tool order differs")
    return out


def _message_differences(recorded: list[MessageDigest], actual: list[MessageDigest]) -> list[str]:
    for index, (was, now) in enumerate(zip(recorded, actual, strict=False)):
        if was != now:
            role = now.role if now.role == was.role else f"{now.role}, recorded {was.role}"
            more = "" if len(recorded) == len(actual) else f"; {len(actual)} messages, recorded {len(recorded)}"
            return [f"message {index} ({role}) differs{more}"]
    if len(recorded) != len(actual):
        index = min(len(recorded), len(actual))
        return [f"{len(actual)} messages, recorded {len(recorded)} (first extra or missing at index {index})"]
    return []
