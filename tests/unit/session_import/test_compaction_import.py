"""A compaction's summarization call imported from a real rc.8 log (docs/import.md, "Compaction").

``data/compaction.session.jsonl.zstd`` is a headless rc.8 session against the loopback provider
(``tests/e2e/test_import.py`` makes one the same way, then replays it offline): a ``read`` whose
result the tool-result pruner shrank, then a compaction of the task and the runtime context,
then the answer. Paths were rewritten to ``/srv/example/project``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dsh_sidecar.python_core.model_cassette.store import verify_file
from dsh_sidecar.python_core.model_request import normalize, parts_of
from dsh_sidecar.python_core.session_import import ImportUnfaithful, calls_of, model_lines, write_lines
from dsh_sidecar.python_core.session_import.compaction import COMPACTION_INSTRUCTION
from dsh_sidecar.python_core.session_log import read_session_log

LOG = Path(__file__).parent / "data" / "compaction.session.jsonl.zstd"


def _events() -> list[dict[str, Any]]:
    return read_session_log(LOG)


def test_the_summarization_call_is_rebuilt_between_the_steps_in_its_own_lane() -> None:
    log = calls_of(_events())

    assert [(c.lane, c.position) for c in log.calls] == [("model", 0), ("compaction", 0), ("model", 1)]
    compaction = log.calls[1].request
    assert (compaction["purpose"], compaction["maxTokens"], "reasoningEffort" in compaction) == (
        "compaction", 8192, False)
    assert [m["role"] for m in compaction["messages"]] == ["user", "user", "user"]
    assert compaction["messages"][0]["content"][0]["text"] == "Read big.txt and say what it is."
    assert compaction["messages"][-1] == {"role": "user", "content": [{"type": "text", "text": COMPACTION_INSTRUCTION}],
                                          "source": {"kind": "plugin", "plugin": "dsh-compaction-basic"}}
    first = log.calls[0].request
    assert (compaction["system"], compaction["tools"]) == (first["system"], first["tools"])
    assert [c["type"] for c in log.calls[1].chunks] == ["block-start", "text-delta", "block-end", "usage", "finish"]
    # The next step's request starts with the checkpoint that took the compacted messages' place.
    after = log.calls[2].request["messages"]
    assert after[0]["source"]["plugin"] == "compact" and "<compacted-summary>" in after[0]["content"][0]["text"]


def test_the_imported_file_verifies_and_names_the_lane(tmp_path: Path) -> None:
    path = tmp_path / "m.ndjson"
    write_lines(str(path), model_lines(calls_of(_events())))
    report = verify_file(str(path))

    assert report.error is None and report.lanes == {"compaction": 1, "model": 2}


def test_a_checkpoint_s_compaction_id_is_not_part_of_the_fingerprint() -> None:
    request = calls_of(_events()).calls[2].request
    other = copy.deepcopy(request)
    other["messages"][0]["source"]["compactionId"] = "another-uuid-each-run"

    fingerprints = {parts_of(normalize(r, cwd="/srv/example/project")).fingerprint() for r in (request, other)}
    assert len(fingerprints) == 1


def _changed(kind: str, **data: Any) -> list[dict[str, Any]]:
    events = _events()
    for event in events:
        if event["type"] == kind:
            event["data"] = {**event["data"], **data}
    return events


@pytest.mark.parametrize(("events", "field", "reason"), [
    (_changed("compaction/end", error="summary is not smaller"), "compaction", "ends a compaction that failed"),
    (_changed("compaction/summary", rawOutput=[{"type": "image"}]), "compaction", "no text answer"),
    (_changed("compaction/summary", shadowedSeqs=[1, 2]), "surface", "compacts messages that are not on the surface"),
    ([e for e in _events() if e["type"] != "compaction/summary"], "compaction", "with no compaction summary"),
])
def test_what_a_compaction_in_the_log_cannot_give_is_refused(events: list[dict[str, Any]], field: str,
                                                             reason: str) -> None:
    with pytest.raises(ImportUnfaithful) as refused:
        calls_of(events)
    assert refused.value.field == field and reason in str(refused.value)
