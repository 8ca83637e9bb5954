"""A session log's calls of the selected tools as a tool cassette whose stand-ins show what the log shows.

Rule: a session log holds each call's name, id and argument text (``tool/call``) and what its
result showed the model (``tool/result``: the content blocks, the error flag, ``meta``, an error's
``name``/``code``), never the value the tool returned. A registered tool renders a served value
itself, so the shown content cannot be served to it as a value. The imported cassette therefore
says ``source: session-log`` in its header, and a replay stands every selected tool in from its
``tool`` frame even where a plugin registers it (rc.8's agent scope shadows the plugin's tool in
its place in the tool list): the stand-in's value is the content blocks and its rendering is
that value (rc.8's ``defineContentToolFixture`` contract), so the model is shown the logged
content and no tool body runs. The contracts are the model-facing ones the log's request header
holds (name, description, parameters), so the model cassette's fingerprints still match.

What the log cannot give is named, not invented: a call a policy refused before dispatch (it has
no structural path of its own) still takes a number here, so the calls after it replay as a path
mismatch (fail closed); an error's message is its content's text (rc.8 logs only its name and
code); ``additionalContexts`` a body deferred are not in the log (the next request's history
then differs: a model cassette mismatch). A subagent's calls come from its own log and number
their paths in its session, ordered among the parent's by time as its model calls are; the call
that delegated is not served (the subagent would never run) and selecting it is refused by name.

Privacy, as recording: the filters run over the arguments and the outcome; the session's
absolute working directory becomes ``<cwd>/`` in the outcome (``host.cwd`` is ``<cwd>``, so
``relocated`` serves the replay's own folder there), and one left anywhere else is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, UnsetType

from dsh_sidecar.python_core.canonical import digest_bytes
from dsh_sidecar.python_core.cassette_io import GENESIS, Chain
from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.filters import FilterRule, Filters, rules_digest
from dsh_sidecar.python_core.session_import.log_calls import ImportUnfaithful
from dsh_sidecar.python_core.session_import.model import ImportPrivate, write_lines
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig
from dsh_sidecar.python_core.tool_cassette.engine import redact_args, redact_outcome
from dsh_sidecar.python_core.tool_cassette.errors import CassetteInvalid
from dsh_sidecar.python_core.tool_cassette.format import (
    IMPORTED_OUTPUT,
    PROTOCOL,
    VERSION,
    CompleteFrame,
    DefinitionFrame,
    HeaderFrame,
    HostState,
    ResultFrame,
    StartFrame,
    ToolErrorInfo,
    ToolFailure,
    canonical_payload,
    canonical_text,
    verbatim_text,
)
from dsh_sidecar.python_core.tool_cassette.store import Recorder, check_lines

__all__ = ["CWD_MARK", "tool_lines", "write_tool_lines"]

CWD_MARK: Final = "<cwd>"
"""``host.cwd`` of an imported result: the session's folder, written as ``<cwd>/`` in its payloads."""
_BEFORE_DISPATCH: Final = frozenset({"ABORTED_BEFORE_DISPATCH"})  # never reached tools/execute: no path


class _Call(msgspec.Struct, frozen=True):
    """One top-level call of a session's log, its path there, and the result event that settled it.

    ``at``/``until``: the call's and its result's event times (ms); ``path``: ``root/N``, N
    counting the session's calls that reached ``tools/execute`` (``""`` for one that did not).
    """

    tool: str
    where: str
    arguments: str
    result: Mapping[str, Any] | None
    path: str
    at: int
    until: int


def _member(value: object, key: str) -> Mapping[str, Any]:
    """``value[key]`` when both are objects, else an empty one (a log rc.8 did not write)."""
    inner = value.get(key) if isinstance(value, Mapping) else None
    return inner if isinstance(inner, Mapping) else {}


def _data(event: Mapping[str, Any]) -> Mapping[str, Any]:
    return _member(event, "data")


def _time(event: Mapping[str, Any]) -> int:
    time = event.get("time")
    return time if isinstance(time, int) and not isinstance(time, bool) else 0


def _calls(events: Sequence[Mapping[str, Any]], session: str, under: str = "root") -> list[_Call]:
    """The model's calls in log order, each with its ``tool/result`` (``None`` if it never settled)."""
    results: dict[str, tuple[Mapping[str, Any], int]] = {}
    for event in events:
        if event.get("type") == "tool/result":
            call_id = _member(_member(_data(event), "message"), "source").get("callId")
            if isinstance(call_id, str):
                results[call_id] = (_data(event), _time(event))
    calls: list[_Call] = []
    number = 0
    for event in events:
        if event.get("type") != "tool/call":
            continue
        data = _data(event)
        tool, arguments, call_id = data.get("name"), data.get("arguments"), data.get("callId")
        where = f"{session}call {len(calls)} (turn {data.get('turn')}, step {data.get('step')})"
        if not isinstance(tool, str) or not tool or not isinstance(arguments, str) or not isinstance(call_id, str):
            raise ImportUnfaithful("tools", f"{where} has no tool name, argument text or call id")
        result, until = results.get(call_id, (None, 2**63))
        path = ""
        if result is None or _code(result) not in _BEFORE_DISPATCH:  # else it never reached tools/execute
            # As node_shim/tools.js numbers them: a session's own calls under ``root``, a
            # subagent's under the call that delegated to it (they run in its async context).
            path = f"{under}/{number}"
            number += 1
        calls.append(_Call(tool, where, arguments, result, path, _time(event), until))
    return calls


def _block(result: Mapping[str, Any]) -> Mapping[str, Any] | None:
    message = result.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool-result"] \
        if isinstance(content, list) else []
    return blocks[0] if len(blocks) == 1 else None


def _code(result: Mapping[str, Any]) -> str | None:
    code = _member(result, "error").get("code")
    return code if isinstance(code, str) else None


def _contracts(events: Sequence[Mapping[str, Any]], tools: set[str]) -> dict[str, Mapping[str, Any]]:
    """Each selected tool's model-facing schema, from the last request header that offered it."""
    found: dict[str, Mapping[str, Any]] = {}
    for event in events:
        if event.get("type") != "request/header":
            continue
        offered = _member(_data(event), "header").get("tools")
        for tool in offered if isinstance(offered, list) else []:
            name = tool.get("name") if isinstance(tool, Mapping) else None
            if isinstance(name, str) and name in tools:
                found[name] = tool
    return found


def _json(value: object, where: str) -> Raw:
    # msgspec keeps the decoded key order: the host's serialization, as a recording keeps it.
    try:
        return verbatim_text(msgspec.json.encode(value))
    except (CanonicalJsonError, TypeError):
        raise ImportUnfaithful("tools", f"{where} holds a value with no strict JSON form") from None


def _located(raw: Raw, cwd: str, where: str) -> Raw:
    """``raw`` with the session's folder as ``<cwd>/``; the folder left anywhere else is refused."""
    if len(cwd) < 2:
        return raw
    folder = json.dumps(cwd.rstrip("/") + "/", ensure_ascii=False)[1:-1].encode()
    data = bytes(raw).replace(folder, (CWD_MARK + "/").encode())
    if cwd.rstrip("/").encode() in data:
        raise ImportPrivate(f"tools: {where}", "its result names the session's absolute working directory")
    return Raw(data)


def _outcome(call: _Call, ordinal: int, cwd: str) -> ResultFrame:
    """The ``call/result`` of a settled call: its shown content as value and content."""
    assert call.result is not None
    block = _block(call.result)
    content = block.get("content") if block is not None else None
    if block is None or not isinstance(content, list):
        raise ImportUnfaithful("tools", f"{call.where} of {call.tool}: its result holds no tool-result content")
    raw = _json(content, call.where)
    shown = _located(raw, cwd, call.where)
    meta: Raw | UnsetType = UNSET
    located = shown != raw
    if "meta" in call.result:
        raw_meta = _json(call.result["meta"], call.where)
        meta = _located(raw_meta, cwd, call.where)
        located = located or meta != raw_meta
    host: HostState | UnsetType = HostState(cwd=CWD_MARK) if located else UNSET
    contexts = Raw(b"[]")
    if block.get("isError") is True:
        error = _member(call.result, "error")
        name, code = error.get("name"), error.get("code")
        blocks = msgspec.json.decode(shown)  # the folder already written as <cwd>/
        text = "".join(str(b.get("text", "")) for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")
        # rc.8 logs a failure's name and code, not its message: the shown text stands for it.
        info = ToolErrorInfo(name=name, code=code) if isinstance(name, str) and isinstance(code, str) else UNSET
        failure = ToolFailure(message=text.removeprefix("Error: "), info=info)
        return ResultFrame(seq=0, prev=GENESIS, ordinal=ordinal, isError=True, error=failure, content=shown, meta=meta,
                           additionalContexts=contexts, host=host)
    return ResultFrame(seq=0, prev=GENESIS, ordinal=ordinal, isError=False, value=shown, content=shown, meta=meta,
                       additionalContexts=contexts, host=host)


def _id(header: Mapping[str, Any], key: str) -> str | None:
    value = header.get(key)
    return value if isinstance(value, str) else None


def _ordered(events: Sequence[Mapping[str, Any]], children: Sequence[Sequence[Mapping[str, Any]]],
             selects: Callable[[str], bool]) -> list[_Call]:
    """The selected calls of the session and its subagents' in the order they entered
    ``tools/execute``: by time, as the model calls are merged (a subagent that ran beside its
    parent is refused there). The call of the parent's during which a subagent's session was
    created delegated to it; served, that session would never run, so selecting it is refused.
    ``children`` come parents first (``_descendants``)."""
    calls: dict[str | None, list[_Call]] = {_id(events[0] if events else {}, "id"): _calls(events, "")}
    delegating: list[_Call] = []
    for index, log in enumerate(children, start=1):
        header = log[0] if log else {}
        created = header.get("createdAt")
        parent = next((c for c in calls.get(_id(header, "parentSession"), [])
                       if c.path and isinstance(created, int) and c.at <= created <= c.until), None)
        if parent is None:
            raise ImportUnfaithful("tools", f"subagent session {index}: no call of its parent's was running when it "
                                            "began", "import without --tools")
        delegating.append(parent)
        calls[_id(header, "id")] = _calls(log, f"subagent session {index}: ", parent.path)
    found: list[tuple[int, int, _Call]] = []
    for index, session in enumerate(calls.values()):
        for call in session:
            if not selects(call.tool) or not call.path:
                continue
            if call in delegating:
                raise ImportUnfaithful("tools", f"{call.where} of {call.tool} delegated to a subagent whose calls the "
                                                "cassettes hold: served, it would never run",
                                       f"leave {call.tool} out of --tools")
            found.append((call.at, index, call))
    return [call for _, _, call in sorted(found, key=lambda entry: (entry[0], entry[1]))]


def tool_lines(events: Sequence[Mapping[str, Any]], include: Sequence[str], *, cwd: str,
               filters: Sequence[FilterRule] = (), children: Sequence[Sequence[Mapping[str, Any]]] = ()) -> list[bytes]:
    """The cassette lines (each with its newline) of the selected tools' calls in ``events`` and in
    its subagents' logs (``children``, each log's first event its session header).

    Raises:
        ImportUnfaithful: no call of a selected tool; a selected call with no result, that
            delegated, or of a shape rc.8 never logs; lines ``verify`` would refuse.
        ImportPrivate: a result names the absolute working directory outside the ``<cwd>/`` mark.
        FilterRaised: a filter function raised.
    """
    selection = ToolCassetteConfig(mode="replay", file="", include=tuple(include), filters=tuple(filters))
    selected = _ordered(events, children, selection.selects)
    if not selected:
        raise ImportUnfaithful("tools", f"no call of a tool matching {', '.join(include)} is in the log",
                               "name the tools `dsh-sidecar sessions show SESSION` lists")
    compiled = Filters(filters)
    chain = Chain()
    lines = [chain.link(HeaderFrame(seq=0, prev=GENESIS, protocol=PROTOCOL, version=VERSION,
                                    include=tuple(include), filters=rules_digest(filters) if filters else UNSET,
                                    source="session-log"))[1]]
    contracts = _contracts([e for log in (events, *children) for e in log], {c.tool for c in selected})
    with_meta = {c.tool for c in selected if c.result is not None and "meta" in c.result}
    for tool in dict.fromkeys(c.tool for c in selected):
        contract = contracts.get(tool)
        if contract is None:
            raise ImportUnfaithful("tools", f"{tool} is called but no request header offered it")
        lines.append(chain.link(DefinitionFrame(
            seq=0, prev="", tool=tool, description=str(contract.get("description", "")),
            parameters=_json(contract.get("parameters", {}), f"the {tool} contract"), output=Raw(IMPORTED_OUTPUT),
            presentationMeta=True if tool in with_meta else UNSET))[1])
    frames: list[StartFrame | ResultFrame] = []
    for ordinal, call in enumerate(selected):
        if call.result is None:
            raise ImportUnfaithful("tools", f"{call.where} of {call.tool} has no result in the log (the turn ended "
                                            "inside it)")
        try:
            # As the live call is matched: the canonical form of the arguments' JSON text.
            args = canonical_text(call.arguments.encode())
        except CanonicalJsonError:
            # rc.8 hands a tool the raw text when the model's arguments are not JSON.
            args = canonical_payload(call.arguments)
        args = redact_args(compiled, call.tool, args)
        frames.append(StartFrame(seq=0, prev="", ordinal=ordinal, path=call.path, tool=call.tool, args=args,
                                 argsDigest=digest_bytes(args)))
        outcome = _outcome(call, ordinal, cwd)
        if redact_outcome(compiled, call.tool, outcome) != outcome:
            # Served filtered, the model would be shown another text than the log's.
            raise ImportUnfaithful("tools", f"the filters hide a part of the result of {call.where} of {call.tool}, "
                                            "which the model was shown",
                                   "leave the tool out of --tools (it runs live at replay)")
        frames.append(outcome)
    lines += [chain.link(frame)[1] for frame in frames]
    lines.append(chain.link(CompleteFrame(seq=0, prev="", calls=len(selected)))[1])
    try:
        check_lines(lines)
    except CassetteInvalid as error:
        raise ImportUnfaithful("tools", f"the imported calls fail verify ({error.message})") from None
    return lines


def write_tool_lines(path: str, lines: Sequence[bytes]) -> None:
    """Publish ``lines`` at ``path`` create-only, as a recording is published.

    Raises:
        CassetteExists: the file or its partial exists (an import never overwrites).
        CassetteIOError: the file cannot be written.
    """
    write_lines(path, lines, Recorder)
