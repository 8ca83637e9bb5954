"""``dsh-sidecar import``: an ordinary session, run with no sidecar at all, replays offline.

The session is what a user has: plain ``dsh --profile headless TASK`` (no sidecar row, no
cassette) against the stock ``deepseek-official`` route, pointed at the loopback
``deepseek_server``, with the example tools enabled by a patch: a stream cut and retried, two
parallel tool calls, the answer. The CLI imports the folder's newest session into a model
cassette and a tool cassette (``--tools``), and into a pytest module (``--test``); the provider
and the weather service are then stopped and the same task replays from other folders through
real DSH with no provider request and no tool body: by the run API (cold), and by the generated
module under pytest (warm).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deepseek_server import WEATHER_TASK, dead_url, deepseek_server
from dshrun import DSH, DSH_HOME, ROOT, Dsh
from weather_service import weather_service

from dsh_sidecar.bridge.api.run import ModelCassette, Row, ToolCassette, run
from dsh_sidecar.python_core.session_import import calls_of
from dsh_sidecar.python_core.session_log import project_key, read_session_log

SIDECAR_CLI = str(ROOT / ".venv" / "bin" / "dsh-sidecar")
CANARY = "sk-canary-import-5d1e"
ANSWER = "Sunny in Paris and Rome, 21C."
# The shapes a real session has: a stream cut mid-answer and retried by the host, then parallel
# tool calls whose argument deltas interleave (a plugin's tool twice and DSH's built-in read of a
# file the replay's folder does not have), then the answer.
SCRIPT = {"title": "Two cities", "conversations": [{"match": "weather in", "replies": [
    {"attempts": [{"text": "Let me", "cut": True},
                  {"tool_calls": [{"name": "weather_lookup", "arguments": {"city": "Paris"}},
                                  {"name": "weather_lookup", "arguments": {"city": "Rome"}},
                                  {"name": "read", "arguments": {"file_path": "notes.txt"}}], "interleave": True}]},
    {"text": ANSWER},
]}]}


def _patch(folder: Path, weather_url: str) -> Path:
    row = {"id": "example-tools", "name": "dsh-example-tools", "disabled": False, "config": {"weatherUrl": weather_url}}
    (folder / "tools.patch.yml").write_text(f"- {json.dumps(row)}\n")
    return folder / "tools.patch.yml"


def _import(lived: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SIDECAR_CLI, "import", "--last", "--cwd", str(lived), "--dsh-home", str(DSH_HOME), *args],
                          capture_output=True, text=True, timeout=60)


def test_a_plain_dsh_session_with_a_retry_and_parallel_calls_replays_offline_with_no_body_or_request(
        tmp_path: Path) -> None:
    lived, replayed, project = tmp_path / "lived", tmp_path / "replayed", tmp_path / "project"
    for folder in (lived, replayed, project):
        folder.mkdir()
    (lived / "notes.txt").write_text("alpha\n")
    with deepseek_server(tmp_path, SCRIPT) as provider, weather_service(tmp_path) as weather:
        # Dsh's environment: a private home whose sessions root is the project home's (rc.8
        # rewrites the profile's cordis.yml at boot; two plain boots in one home race on it).
        live = subprocess.run([str(DSH), "--profile", "headless", "--patch", str(_patch(tmp_path, weather.url)),
                               WEATHER_TASK], cwd=lived, capture_output=True, text=True, timeout=120,
                              env={**Dsh(cwd=lived).environ(), **provider.env(CANARY)})
    assert live.returncode == 0, live.stderr[-2000:]
    assert live.stdout.strip() == ANSWER
    live_requests = len(provider.requests())
    assert live_requests == 4  # the cut stream, its retry, the answer and the session title

    cassette = replayed / "model.ndjson"
    imported = _import(lived, "--model-cassette", str(cassette), "--tools", "weather_lookup", "--tools", "read",
                       "--tool-cassette", str(replayed / "tools.ndjson"))
    assert imported.returncode == 0, imported.stderr
    assert "3 calls (model 3); left out session-title#0" in imported.stdout
    assert "valid: dsh-model-cassette v2: 3 calls (model 3), 5 frames, complete tail" in imported.stdout
    assert ("valid: dsh-tool-cassette v5: 3 calls, 2 tools, 10 frames, complete tail, imported from a session log"
            in imported.stdout)
    data = cassette.read_text() + (replayed / "tools.ndjson").read_text()
    assert CANARY not in data and str(tmp_path) not in data and provider.url not in data and "127.0.0.1" not in data
    generated = _import(lived, "--test", str(project / "test_paris.py"), "--tools", "weather_*", "--tools", "read")
    assert generated.returncode == 0, generated.stderr
    assert "3 calls (read 1, weather_lookup 2), served by stand-ins with no tool body" in generated.stdout
    assert "imported from a session log" in generated.stdout.splitlines()[-2]
    assert len(list((project / "cassettes" / "test_paris").glob("test_session_*.model.ndjson"))) == 1
    tools = next((project / "cassettes" / "test_paris").glob("test_session_*.tools.ndjson")).read_text()
    assert str(tmp_path) not in tools and '"source":"session-log"' in tools
    # The log as a dsh-llm-replay fixture: a replay.override.json beside it whose patch is the
    # log's own call imports the same; one that throws where the log streamed is refused whole.
    folder = next(p.parent for p in (DSH_HOME / "sessions" / project_key(str(lived))).glob("*/session.jsonl*"))
    call = calls_of(read_session_log(next(folder.glob("session.jsonl*")))).calls[2]
    (folder / "replay.override.json").write_text(json.dumps({"patches": [
        {"at": 2, "entry": {"kind": "chunks", "chunks": call.chunks}}]}))
    fixture = _import(lived, "--model-cassette", str(tmp_path / "fixture.ndjson"))
    assert "replay.override.json: 1 entry, each the log's own call" in fixture.stdout, fixture.stderr
    assert (tmp_path / "fixture.ndjson").read_bytes() == cassette.read_bytes()
    (folder / "replay.override.json").write_text(json.dumps({"patches": [
        {"at": 0, "entry": {"kind": "throw", "chunks": [], "message": "unauthorized", "code": "AUTH"}}]}))
    thrown = _import(lived, "--model-cassette", str(tmp_path / "thrown.ndjson"))
    assert "IMPORT_UNFAITHFUL: override: replay.override.json: patch 0 is a throw entry" in thrown.stderr
    assert not (tmp_path / "thrown.ndjson").exists()
    (folder / "replay.override.json").unlink()

    # The provider is stopped (a dead URL and no key), and so is the weather service: the plugin is
    # composed, and a body that ran would fail and show the model another result. Cold here (the
    # shim stands weather_lookup in on the run's agent), warm in the generated test.
    offline = {"DEEPSEEK_BASE_URL": dead_url()}
    replay = run(WEATHER_TASK, cwd=replayed, rows=[Row("example-tools", "dsh-example-tools",
                                                       {"weatherUrl": dead_url()})], record_mode="none",
                 model_cassette=ModelCassette(file="model.ndjson", options={"filters": ["credentials"]}),
                 tool_cassette=ToolCassette(file="tools.ndjson", include=["weather_lookup", "read"],
                                            filters=["credentials"]),
                 env=offline)
    _patch(project, dead_url())
    (project / "pytest.ini").write_text("[pytest]\ndsh_patches = tools.patch.yml\n")
    tested = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             f"--dsh-host={ROOT / '.host'}"], cwd=project, capture_output=True, text=True,
                            timeout=300, env={**os.environ, **offline})
    assert replay.ok, replay.explain()
    assert replay.model_cassette is not None
    assert (replay.model_cassette.mode, replay.model_cassette.consumed, replay.model_cassette.unconsumed) == (
        "replay", 3, 0)
    assert replay.final_text == ANSWER
    outputs = [r.output for r in replay.tool_results]
    assert outputs[:2] == ["Paris: sunny, 21C", "Rome: sunny, 21C"] and "alpha" in outputs[2]
    assert not (replayed / "notes.txt").exists()  # read was served: the file was never there
    assert replay.tool_cassette is not None and (replay.tool_cassette.consumed, replay.tool_cassette.stood_up) == (
        3, ["read", "weather_lookup"])
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout[-3000:]
    assert len(provider.requests()) == live_requests  # the stopped provider got nothing more


DELEGATION_TASK = "Delegate: ask a helper for the capital of France."
DELEGATION_SCRIPT = {"title": "Delegation", "conversations": [
    {"match": "Delegate:", "replies": [
        {"tool_calls": [{"name": "read", "arguments": {"file_path": "brief.txt"}}]},
        {"tool_calls": [{"name": "subagent", "arguments": {
            "description": "capital of France", "prompt": "CHILD: what is the capital of France?",
            "run_in_background": False}}]},
        {"text": "The helper says: Paris."}]},
    {"match": "CHILD:", "replies": [
        {"tool_calls": [{"name": "read", "arguments": {"file_path": "atlas.txt"}}]},
        {"text": "Paris."}]},
]}


def test_a_session_that_delegated_imports_its_subagent_s_calls_from_the_child_log(tmp_path: Path) -> None:
    lived, replayed, project = tmp_path / "lived", tmp_path / "replayed", tmp_path / "project"
    for folder in (lived, replayed, project):
        folder.mkdir()
    (lived / "brief.txt").write_text("Ask a helper.\n")
    (lived / "atlas.txt").write_text("France: Paris\n")
    with deepseek_server(tmp_path, DELEGATION_SCRIPT) as provider:
        live = subprocess.run([str(DSH), "--profile", "headless", DELEGATION_TASK], cwd=lived, capture_output=True,
                              text=True, timeout=120, env={**Dsh(cwd=lived).environ(), **provider.env(CANARY)})
    assert live.returncode == 0, live.stderr[-2000:]
    assert live.stdout.strip() == "The helper says: Paris."
    assert len(provider.requests()) == 6  # the parent's three steps, the child's two, the title

    imported = _import(lived, "--model-cassette", str(replayed / "model.ndjson"), "--tools", "read",
                       "--tool-cassette", str(replayed / "tools.ndjson"))
    assert imported.returncode == 0, imported.stderr
    assert "5 calls (model 5); left out session-title#0" in imported.stdout
    assert "2 calls (read 2), served by stand-ins" in imported.stdout
    refused = _import(lived, "--model-cassette", str(tmp_path / "x.ndjson"), "--tools", "*",
                      "--tool-cassette", str(tmp_path / "x.tools"))
    assert "IMPORT_UNFAITHFUL: tools: call 1 (turn 1, step 2) of subagent delegated to a subagent" in refused.stderr
    # Replayed with the provider stopped and neither file there: the subagent runs for real, its
    # model calls and its read served too (the child's read at its own root/0, after the parent's).
    replay = run(DELEGATION_TASK, cwd=replayed, record_mode="none", env={"DEEPSEEK_BASE_URL": dead_url()},
                 model_cassette=ModelCassette(file="model.ndjson", options={"filters": ["credentials"]}),
                 tool_cassette=ToolCassette(file="tools.ndjson", include=["read"], filters=["credentials"]))
    assert replay.ok, replay.explain()
    assert replay.model_cassette is not None and (replay.model_cassette.consumed, replay.model_cassette.unconsumed) \
        == (5, 0)
    assert replay.tool_cassette is not None and (replay.tool_cassette.consumed, replay.tool_cassette.unconsumed) \
        == (2, 0)
    assert replay.final_text == "The helper says: Paris." and len(replay.child_session_ids) == 1
    # The generated test runs it in a DSH process of its own (a warm host refuses a child's hooks).
    assert _import(lived, "--test", str(project / "test_delegated.py"), "--tools", "read").returncode == 0
    assert "warm=False" in (project / "test_delegated.py").read_text()
    tested = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--dsh-host={ROOT / '.host'}"],
                            cwd=project, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "DEEPSEEK_BASE_URL": dead_url()})
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout[-3000:]
    assert "0 provider requests" in tested.stdout


COMPACTION_TASK = "Read big.txt and say what it is."
COMPACTION_SCRIPT = {"title": "Big file", "conversations": [
    # rc.8's summarization call: its instruction is the last user message.
    {"match_last": "compaction engine", "replies": [
        {"text": "<compacted-summary>The user asked what big.txt is.</compacted-summary>"}]},
    {"match": "", "replies": [
        # The usage a step reports is the pressure: above 80% of the 2,000-token window below.
        {"tool_calls": [{"name": "read", "arguments": {"file_path": "big.txt"}}], "prompt_tokens": 4100},
        {"text": "The file is long.", "prompt_tokens": 300}]},
]}
# A small context window, and one compaction attempt (rc.8 measures the pressure from the last
# reported usage, which a compaction does not change, so a second attempt would follow and fail).
COMPACTION_PATCH = """\
- id: compaction-basic
  config: {compactionRetries: 0}
- id: llm-deepseek
  config:
    models:
      - {id: deepseek-v4-flash, name: DeepSeek-V4-Flash, contextWindow: 2000}
"""


def test_a_session_that_compacted_replays_its_summarization_call_offline(tmp_path: Path) -> None:
    lived, replayed, recorded = tmp_path / "lived", tmp_path / "replayed", tmp_path / "recorded"
    for folder in (lived, replayed, recorded):
        folder.mkdir()
    for folder in (lived, recorded):
        (folder / "big.txt").write_text("".join(f"alpha beta gamma delta {n}\n" for n in range(300)))
    patch = tmp_path / "compaction.patch.yml"
    patch.write_text(COMPACTION_PATCH)
    cassette = ModelCassette(file="model.ndjson", options={"filters": ["credentials"]})
    with deepseek_server(tmp_path, COMPACTION_SCRIPT) as provider:
        live = subprocess.run([str(DSH), "--profile", "headless", "--patch", str(patch), COMPACTION_TASK], cwd=lived,
                              capture_output=True, text=True, timeout=120,
                              env={**Dsh(cwd=lived).environ(), **provider.env(CANARY)})
        # The same task recorded through the sidecar: its compaction lane is recorded too.
        recording = run(COMPACTION_TASK, cwd=recorded, record_mode="once", patches=[patch], model_cassette=cassette,
                        env=provider.env(CANARY))
    assert live.returncode == 0, live.stderr[-2000:]
    assert live.stdout.strip() == "The file is long."
    assert len(provider.requests()) == 8  # each run: two loop steps, the summarization call and the title
    assert recording.ok, recording.explain()
    # Replayed offline: the checkpoint's compactionId is fresh in the replay, and the request after
    # it still matches (it did not before the request view dropped it).
    again = run(COMPACTION_TASK, cwd=recorded, record_mode="none", patches=[patch], model_cassette=cassette,
                env={"DEEPSEEK_BASE_URL": dead_url()})
    assert again.ok, again.explain()
    assert again.model_cassette is not None and again.model_cassette.consumed == 4  # the title too

    imported = _import(lived, "--model-cassette", str(replayed / "model.ndjson"), "--tools", "read",
                       "--tool-cassette", str(replayed / "tools.ndjson"))
    assert imported.returncode == 0, imported.stderr
    assert "3 calls (compaction 1, model 2); left out session-title#0" in imported.stdout
    # Offline, from a folder without big.txt, with the same composition: the replayed usage makes
    # rc.8 compact at the same point, and its summarization call is served.
    replay = run(COMPACTION_TASK, cwd=replayed, record_mode="none", patches=[patch],
                 env={"DEEPSEEK_BASE_URL": dead_url()},
                 model_cassette=ModelCassette(file="model.ndjson", options={"filters": ["credentials"]}),
                 tool_cassette=ToolCassette(file="tools.ndjson", include=["read"], filters=["credentials"]))
    assert replay.ok, replay.explain()
    assert replay.model_cassette is not None and (replay.model_cassette.consumed, replay.model_cassette.unconsumed) \
        == (3, 0)
    assert replay.final_text == "The file is long."
    summaries = [e["data"]["summary"][0]["text"] for e in replay.events if e.get("type") == "compaction/summary"]
    assert summaries == ["<compacted-summary>The user asked what big.txt is.</compacted-summary>"]
    assert len(provider.requests()) == 8  # nothing more while offline
