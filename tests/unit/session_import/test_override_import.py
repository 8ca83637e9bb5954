"""A dsh-llm-replay ``replay.override.json`` beside a fixture (docs/import.md, "A dsh-llm-replay fixture").

Read as dsh-llm-replay 0.0.1-rc.1 reads it (a ``ReplayEntry[]`` or ``{patches: [{at, entry}]}``),
and carried only where each entry is the log's own call: a real rc.8 log's calls, the entries
built from them, and each way an override departs from the log refused by its index.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.python_core.session_import import ImportUnfaithful, calls_of, check_override
from dsh_sidecar.python_core.session_log import read_session_log

CALLS = calls_of(read_session_log(Path(__file__).parent / "data" / "parallel.session.jsonl.zstd")).calls


def _entry(index: int) -> dict[str, Any]:
    return {"kind": "chunks", "chunks": CALLS[index].chunks}


def _doc(value: Any) -> bytes:
    return json.dumps(value).encode()


def test_entries_that_are_the_log_s_own_calls_are_carried() -> None:
    assert check_override(_doc({"patches": [{"at": 1, "entry": _entry(1)}]}), CALLS) == 1
    assert check_override(_doc([_entry(n) for n in range(len(CALLS))]), CALLS) == len(CALLS)
    assert check_override(_doc({"patches": []}), CALLS) == 0


def _other_text() -> dict[str, Any]:
    entry = json.loads(json.dumps(_entry(1)))
    for chunk in entry["chunks"]:
        if chunk["type"] == "text-delta":
            chunk["text"] = "something else"
    return entry


@pytest.mark.parametrize(("doc", "reason"), [
    (b"{not json", "not JSON"),
    ({}, "not a ReplayEntry[] or {patches: [...]} ($)"),
    ([{"kind": "later"}], "not a ReplayEntry[] or {patches: [...]} ($[0]"),
    ({"patches": [{"at": 0, "entry": {"kind": "chunks", "chunks": [], "extra": 1}}]}, "not a ReplayEntry[]"),
    ({"patches": [{"at": 0, "entry": _entry(0)}, {"at": 0, "entry": _entry(0)}]}, "patch 1: at 0 is out of range or "
                                                                                    "repeated"),
    ({"patches": [{"at": 9, "entry": _entry(0)}]}, "patch 0: at 9 is out of range"),
    ({"patches": [{"at": 1, "entry": _other_text()}]}, "patch 0 gives call 1 chunks the log does not hold"),
    ({"patches": [{"at": len(CALLS), "entry": _entry(0)}]}, "patch 0 appends a call the log does not hold"),
    ({"patches": [{"at": 0, "entry": {"kind": "throw", "chunks": [], "message": "401", "code": "AUTH"}}]},
     "patch 0 is a throw entry"),
    ({"patches": [{"at": 0, "entry": {"kind": "hang", "readyFile": "ready"}}]}, "patch 0 is a hang entry"),
    ([{"kind": "chunks", "chunks": [{"type": "text-delta", "index": 0, "text": "id {{fromRequest:goal-([0-9a-f]+)}}"}]},
      _entry(1)], "entry 0 holds a {{fromRequest:...}} placeholder"),
    ([_entry(0)], f"replaces the script of {len(CALLS)} call(s) with 1"),
])
def test_an_override_that_departs_from_the_log_is_refused_by_its_index(doc: Any, reason: str) -> None:
    with pytest.raises(ImportUnfaithful) as refused:
        check_override(doc if isinstance(doc, bytes) else _doc(doc), CALLS)
    assert refused.value.field == "override" and reason in str(refused.value), str(refused.value)
    assert str(refused.value).startswith("IMPORT_UNFAITHFUL: override: replay.override.json: ")
