"""``dsh-sidecar model-cassette``: exit codes, first lines, and no prompt or answer text."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dsh_sidecar.python_core.model_cassette.cli import cli


def _run(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


def test_verify_accepts_a_recording_and_names_its_lanes(make_cassette: Callable[..., Path]) -> None:
    result = _run("verify", str(make_cassette()))

    assert result.exit_code == 0
    expected = "valid: dsh-model-cassette v2: 3 calls (model 2, session-title 1), 5 frames, complete tail\n"
    assert result.output == expected


def test_verify_rejects_a_truncated_file_with_exit_1(make_cassette: Callable[..., Path]) -> None:
    path = make_cassette()
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:3]))
    result = _run("verify", str(path))

    assert result.exit_code == 1
    assert result.output.startswith("MODEL_CASSETTE_INVALID: missing complete tail frame after line 3")


def test_verify_of_a_missing_file_is_an_io_error(tmp_path: Path) -> None:
    result = _run("verify", str(tmp_path / "nope.ndjson"))

    assert result.exit_code == 1
    assert "MODEL_CASSETTE_IO: cannot read nope.ndjson: no such file" in result.output
    assert str(tmp_path) not in result.output


def test_inspect_lists_each_call_without_text(kit: Any, make_cassette: Callable[..., Path]) -> None:
    path = make_cassette(requestView="full")
    result = _run("inspect", str(path))

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "calls: 3"
    assert lines[2].startswith("  model#0 (call 0): deepseek-official/deepseek-v4-flash request sha256:")
    assert lines[2].endswith("(1 messages, 2 tools), 3 chunks, 1 tool calls, finish tool-calls, 2 ms")
    assert kit.SECRET not in result.output and "sunny" not in result.output and "Paris" not in result.output
    data = json.loads(_run("inspect", "--json", str(path)).output)
    assert [(c["lane"], c["position"], c["finish"], c["toolCalls"]) for c in data["calls"]] == [
        ("model", 0, "tool-calls", 1), ("model", 1, "stop", 0), ("session-title", 0, "stop", 0),
    ]


def test_diff_of_two_equal_recordings_is_equivalent(make_cassette: Callable[..., Path]) -> None:
    result = _run("diff", str(make_cassette()), str(make_cassette()))

    assert result.exit_code == 0
    assert result.output == "equivalent: 3 calls, same requests and answers\n"


def test_diff_names_requests_and_answers_that_differ(kit: Any, make_cassette: Callable[..., Path]) -> None:
    a = make_cassette([(kit.request(), kit.text_chunks())])
    b = make_cassette([(kit.request(maxTokens=9), kit.text_chunks("other")), (kit.request(), kit.text_chunks())])
    result = _run("diff", str(a), str(b))

    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert lines[0] == "different: 3 difference(s)"
    assert "model#0: request" in lines[1] and lines[1].endswith("option maxTokens differs")
    assert lines[2].startswith("  model#0: answer differs (4 vs 4 answer chunks, 0 vs 0 tool calls, finish stop")
    assert lines[3] == "  model#1: only in B"
    assert kit.SECRET not in result.output and "other" not in result.output


def _usage_chunks(cache_read: int, order: str = "normal") -> bytes:
    usage = {"inputTokens": 100, "outputTokens": 10, "cacheReadTokens": cache_read}
    text = [{"type": "text-delta", "index": 0, "text": "same"}, {"type": "usage", "usage": usage},
            {"type": "finish", "reason": {"kind": "stop"}}]
    if order == "reversed":
        text = [dict(reversed(list(c.items()))) for c in text]
    return json.dumps(text).encode()


def test_diff_tells_a_cache_counter_change_from_a_changed_answer(kit: Any, make_cassette: Callable[..., Path]) -> None:
    a = make_cassette([(kit.request(), _usage_chunks(0))])
    b = make_cassette([(kit.request(), _usage_chunks(40, "reversed"))])

    result = _run("diff", str(a), str(b))
    assert result.exit_code == 3
    assert result.output.splitlines() == [
        "metadata only: 1 difference(s), same requests and answers",
        "  model#0: metadata differs: usage or failure details (cacheReadTokens)",
    ]
    ignored = _run("diff", "--ignore-metadata", str(a), str(b))
    assert (ignored.exit_code, ignored.output) == (0, "equivalent: 1 calls, same requests and answers\n")
    changed = make_cassette([(kit.request(), _usage_chunks(40).replace(b'"same"', b'"new"'))])
    assert _run("diff", "--ignore-metadata", str(a), str(changed)).exit_code == 2


def test_diff_of_an_unreadable_file_exits_1(make_cassette: Callable[..., Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.ndjson"
    bad.write_text("{}\n")
    result = _run("diff", str(make_cassette()), str(bad))

    assert result.exit_code == 1
    assert result.output.startswith("B: MODEL_CASSETTE_INVALID: line 1: first frame is not a header")
