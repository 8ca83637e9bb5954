"""The pytest module ``dsh-sidecar import --test PATH`` writes: the session's task replayed offline.

Rule: the module runs the session's task through the ``dsh`` fixture with the imported model
cassette where the fixture looks for it (``cassettes/<module>/<test>.model.ndjson`` beside the
module) and asserts the session's final text and each tool result's text, in order. The tools the
import selected (``include``) are served from its tool cassette beside it with no tool body; the
others run for real at replay (``allow_live_tools`` names them), with the plugins the project's
pytest config composes. Every value is
written as a Python literal (``repr``). A task, final text or result that names the session's
absolute working directory is refused (``IMPORT_PRIVATE``), as a cassette refuses it (a tool
result naming it is asserted with ``<cwd>`` there, the replay's folder compared as it); so is a
result the credentials filter would change (a JSON object with a ``token``/``key``/... member):
written filtered, its assertion would fail against the live tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from dsh_sidecar.python_core.errors import SidecarError, printable
from dsh_sidecar.python_core.filters import Filters, parse_filters
from dsh_sidecar.python_core.session_import.log_calls import ImportUnfaithful
from dsh_sidecar.python_core.session_import.model import ImportPrivate
from dsh_sidecar.python_core.session_import.tools import CWD_MARK
from dsh_sidecar.python_core.session_log import final_text, tool_calls, tool_results
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig

__all__ = ["ImportIOError", "ImportTestExists", "cassette_path", "function_name", "module_source"]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9_]+")
_CREDENTIALS: Final = Filters(parse_filters(["credentials"], "import --test"))


class ImportTestExists(SidecarError):
    """``--test PATH`` names a file that exists: an import never overwrites a test."""

    code = "IMPORT_TEST_EXISTS"
    hint = "pass another --test path, or remove the file and import again"

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} already exists; nothing was written; fix: {self.hint}")


class ImportIOError(SidecarError):
    """A file of the import cannot be written: names its base name and the OS reason, never a path."""

    code = "IMPORT_IO"

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"cannot write {name}: {reason}")


def function_name(session_id: str) -> str:
    """The test function's name: ``test_session_`` and the id's first 8 safe characters."""
    return "test_session_" + (_UNSAFE.sub("_", session_id.removeprefix("session-"))[:8] or "imported")


def cassette_path(module_stem: str, name: str, kind: str = "model") -> str:
    """Where the ``dsh`` fixture looks for the test's ``kind`` cassette, relative to the module's folder."""
    return f"cassettes/{module_stem}/{name}.{kind}.ndjson"


def _task(events: Sequence[Mapping[str, Any]]) -> str:
    tasks = [e.get("data") for e in events if e.get("type") == "user/message"]
    texts = [d for d in tasks if isinstance(d, Mapping) and isinstance(d.get("source"), Mapping)
             and d["source"].get("kind") == "user"]
    if len(texts) != 1:
        raise ImportUnfaithful("test", f"the session has {len(texts)} user messages; a generated test runs one task "
                                       "(several turns: not built yet)")
    content = texts[0].get("content")
    parts = content if isinstance(content, list) else []
    text = "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping) and p.get("type") == "text")
    if len(parts) != 1 or not text:
        raise ImportUnfaithful("test", "the task is not one text part (images or attachments are not replayable)")
    return text


def _checked(value: str, where: str, cwd: str) -> str:
    if len(cwd) > 1 and cwd in value:
        raise ImportPrivate(f"test: {where}", "it names the session's absolute working directory")
    return value


def _credential_free(output: str, where: str) -> str:
    try:
        decoded = json.loads(output)
    except ValueError:
        return output
    if _CREDENTIALS.apply(decoded, tool="", where="result") != decoded:
        raise ImportPrivate(f"test: {where}", "it holds a member the credentials filter hides")
    return output


def module_source(events: Sequence[Mapping[str, Any]], *, session_id: str, cwd: str, module_stem: str,
                filters: Sequence[object], delegated: bool = False, include: Sequence[str] = ()) -> str:
    """The module's source; ``delegated``: the session ran subagents, whose hooks a warm host does
    not route to the run (their sessions are not its), so the test runs in a DSH process of its own;
    ``include``: the tools served from the imported tool cassette (the others run live).

    Raises:
        ImportUnfaithful: the session is not one text task (``field`` ``test``).
        ImportPrivate: a value to assert names the absolute cwd or holds a credential.
    """
    name = function_name(session_id)
    ends = [d.get("reason") for d in (e.get("data") for e in events if e.get("type") == "turn/end")
            if isinstance(d, Mapping)]
    kinds = [str(r.get("kind"))[:40] if isinstance(r, Mapping) else "?" for r in ends]
    if len(kinds) != 1:
        raise ImportUnfaithful("test", f"the session has {len(kinds)} finished turns; a generated test runs one task "
                                       "(several turns: not built yet)")
    if kinds[0] != "completed":
        raise ImportUnfaithful("test", f"the session's turn ended {printable(kinds[0])}; a generated test asserts "
                                       "a completed turn", "import with --model-cassette alone and assert the failure")
    task = _checked(_task(events), "the task", cwd)
    final = _checked(final_text(events), "the final text", cwd)
    names = {c.call_id: c.tool for c in tool_calls(events)}
    # A result naming the session's folder (a file tool's path) is asserted with the folder as
    # <cwd>, and the replay's own folder is put back to <cwd> before the comparison.
    outputs = [r.output.replace(cwd, CWD_MARK) if len(cwd) > 1 else r.output for r in tool_results(events)]
    located = any(CWD_MARK in o for o in outputs)
    results = [(names.get(r.call_id, ""), _credential_free(output, f"tool result {n}"))
               for n, (r, output) in enumerate(zip(tool_results(events), outputs, strict=True))]
    rows = "".join(f"\n    ({tool!r}, {output!r})," for tool, output in results)
    shown = f"r.output.replace(str(dsh.cwd), {CWD_MARK!r})" if located else "r.output"
    selection = ToolCassetteConfig(mode="replay", file="", include=tuple(include))
    live = sorted({tool for tool, _ in results if tool and not (include and selection.selects(tool))})
    served = ""
    if include:
        served = (f",\n                     tool_cassette=ToolCassette(file=str(dsh.cassette('tools')), "
                  f"include={list(include)!r},\n                                               "
                  f"filters={list(filters)!r})")
    # A subagent's session is not the run's: a warm host refuses its hooks (docs/warm-host.md).
    cold = ",\n                     warm=False" if delegated else ""
    if not include:
        tools_doc = ("The tools the session called run for real (allow_live_tools: a session log holds no tool\n"
                     "values), with the plugins this project's pytest config composes; a different tool set or\n"
                     "tool result is a MODEL_CASSETTE_MISMATCH naming the tool or the message.")
    else:
        tools_doc = (f"The calls of {', '.join(include)} come from {cassette_path(module_stem, name, 'tools')}:\n"
                     "no tool body runs, stand-ins show the model what the session showed it"
                     + (" (the other tools run for real: allow_live_tools)" if live else "") + ".\n"
                     "A different tool set, argument or result is a MODEL_CASSETTE_MISMATCH or CASSETTE_MISMATCH.")
    return f'''"""Session {session_id} replayed offline (written by `dsh-sidecar import --test`; docs/import.md).

The model's answers come from {cassette_path(module_stem, name)}: no provider, no key.
{tools_doc}
"""

from dsh_sidecar import ModelCassette{', ToolCassette' if include else ''}

TASK = {task!r}
FINAL_TEXT = {final!r}
TOOL_RESULTS = [{rows}
]


def {name}(dsh):
    result = dsh.run(TASK, model=ModelCassette(file={cassette_path(module_stem, name)!r},
                                               options={{"filters": {list(filters)!r}}}),
                     allow_live_tools={live!r}{served}{cold})
    assert result.final_text == FINAL_TEXT
    assert [(r.tool, {shown}) for r in result.tool_results] == TOOL_RESULTS
'''
