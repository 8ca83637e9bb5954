"""The run API's decisions that need no host: record modes, publishing, homes, explanations."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from dsh_sidecar.bridge.api.compose import patch_text, private_home, unused_rows
from dsh_sidecar.bridge.api.plan import plan_cassette, publish
from dsh_sidecar.bridge.api.run import (
    CONFIG_HINT,
    CassetteMissing,
    CassetteSummary,
    Diagnostic,
    HostNotFound,
    Row,
    RunFailed,
    RunResult,
    ToolResult,
    _config_fix,
    find_host,
)
from dsh_sidecar.bridge.host.staging import settle_home
from dsh_sidecar.bridge.host.toolchain import host_env
from dsh_sidecar.bridge.transport.report import (
    CallPath,
    CassetteCounts,
    ReportedError,
    RunReport,
    read_report,
    write_report,
)


def test_none_replays_an_existing_cassette_and_refuses_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / "c.ndjson").write_text("x")
    plan = plan_cassette("tool", "c.ndjson", tmp_path, "none", "hint")
    assert (plan.mode, plan.write_to) == ("replay", tmp_path / "c.ndjson")
    with pytest.raises(CassetteMissing, match=r"^CASSETTE_MISSING: subagentCassette.file: s.jsonl does not exist"):
        plan_cassette("subagent", "s.jsonl", tmp_path, "none", "hint")


def test_once_records_only_a_missing_cassette_to_a_private_file(tmp_path: Path) -> None:
    plan = plan_cassette("tool", "sub/c.ndjson", tmp_path, "once", "hint")
    assert plan.mode == "record" and plan.write_to.parent == tmp_path / "sub"
    assert plan.write_to.name.startswith(".c.ndjson.") and plan.write_to.name.endswith(".recording")
    (tmp_path / "sub" / "c.ndjson").write_text("x")
    assert plan_cassette("tool", "sub/c.ndjson", tmp_path, "once", "hint").mode == "replay"
    assert plan_cassette("tool", "sub/c.ndjson", tmp_path, "all", "hint").mode == "record"


def test_a_directory_is_not_a_cassette(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(Exception, match=r"^CASSETTE_IO: toolCassette.file: d is not a regular file"):
        plan_cassette("tool", "d", tmp_path, "once", "hint")


def test_publish_is_create_only_for_once_and_a_replace_for_all(tmp_path: Path) -> None:
    target = tmp_path / "c.ndjson"
    plan = plan_cassette("tool", "c.ndjson", tmp_path, "once", "hint")
    plan.write_to.write_text("new")
    target.write_text("appeared meanwhile")
    assert not publish(plan, complete=True)
    assert target.read_text() == "appeared meanwhile" and not plan.write_to.exists()
    plan = plan_cassette("tool", "c.ndjson", tmp_path, "all", "hint")
    plan.write_to.write_text("new")
    assert publish(plan, complete=True)
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["c.ndjson"]


def test_an_incomplete_recording_leaves_the_old_cassette_and_only_the_partial_its_error_names(
    tmp_path: Path,
) -> None:
    target = tmp_path / "c.ndjson"
    target.write_text("old")
    plan = plan_cassette("tool", "c.ndjson", tmp_path, "all", "hint")
    partial = Path(f"{plan.write_to}.partial")
    partial.write_text("half")
    (tmp_path / f"{plan.write_to.name}.writer.lock").mkdir()
    assert not publish(plan, complete=False, named=True)
    assert target.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == sorted(["c.ndjson", partial.name])
    # Without a report (DSH killed, timed out) no message names the partial: it goes.
    assert not publish(plan, complete=False)
    assert os.listdir(tmp_path) == ["c.ndjson"]


def test_a_private_home_links_everything_but_the_profile_root(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    profile = shared / "profiles" / "headless"
    (profile / "node_modules" / "dsh-sidecar-shim").mkdir(parents=True)
    (profile / "cordis.yml").write_text("[]")
    (profile / "cordis.patch.yml").write_text("[]")
    (shared / "profiles" / "node_modules").mkdir()
    (shared / "cordis.patch.yml").write_text("[]")
    (shared / ".run-sessions" / "other").mkdir(parents=True)
    staging = tmp_path / "staging"
    staging.mkdir()
    home = private_home(shared, "headless", tmp_path / "private", staging)
    # The run's sessions root is its own (bridge/host/staging.py); no other run's staging is linked.
    assert sorted(os.listdir(home)) == ["cordis.patch.yml", "profiles", "sessions"]
    assert (home / "sessions").resolve() == staging.resolve()
    assert (shared / "sessions").is_dir()
    assert sorted(os.listdir(home / "profiles" / "headless")) == ["cordis.patch.yml", "node_modules"]
    assert (home / "profiles" / "node_modules").is_symlink()
    with pytest.raises(HostNotFound, match="run `dsh-sidecar install --profile web`"):
        private_home(shared, "web", tmp_path / "private2", staging)


def test_find_host_honours_the_variable_and_says_how_to_install(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_SIDECAR_HOST", str(tmp_path / "nowhere"))
    with pytest.raises(HostNotFound, match=r"^HOST_NOT_FOUND: no DSH host at \$DSH_SIDECAR_HOST; install one"):
        find_host(tmp_path)
    (tmp_path / "h" / "bin").mkdir(parents=True)
    (tmp_path / "h" / "bin" / "dsh").write_text("")
    monkeypatch.setenv("DSH_SIDECAR_HOST", str(tmp_path / "h"))
    monkeypatch.delenv("DSH_HOME", raising=False)
    env = find_host(tmp_path)
    assert (env.prefix, env.dsh_home) == ((tmp_path / "h").resolve(), (tmp_path / "h" / "dsh-home").resolve())


def _result(**kw: object) -> RunResult:
    base: dict[str, object] = dict(
        exit_code=1, timed_out=False, duration_ms=5, task="/mock run echo({})", stdout="", stderr="",
        final_text="", tool_calls=[], tool_results=[], mock=[], tool_cassette=None, subagent_cassette=None,
        errors=[], session_id=None, session_path=None, child_session_ids=[], events=[],
    )
    base.update(kw)
    return RunResult(**base)  # type: ignore[arg-type]


def test_explain_shows_named_errors_once_and_drops_stacks_and_repeats() -> None:
    stderr = "\n".join([
        "dsh-sidecar: CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:1 differ",
        "dsh-sidecar: TOOL_FAILED: echo failed", "dsh: TOOL_FAILED: echo failed",
        "Error: boom", "    at foo (file.js:1:1)", "Node.js v24.19.0",
        "dsh-sidecar: tool cassette replay: 1 selected calls",
        'dsh-sidecar: fix: if the new calls are intended, re-record: delete c.ndjson and run the same task',
    ])
    summary = CassetteSummary(kind="tool", file="c.ndjson", record_mode="none", mode="replay", selected=1,
                              poisoned=True)
    result = _result(stderr=stderr, tool_cassette=summary,
                     errors=[Diagnostic("CASSETTE_MISMATCH", "echo at root/0, ordinal 0: args sha256:1 differ")])
    assert result.explain("pytest x --dsh-record-mode all").splitlines() == [
        "dsh run exited 1: /mock run echo({})",
        "  CASSETTE_MISMATCH: echo at root/0, ordinal 0: args sha256:1 differ",
        "  tool cassette c.ndjson (replay, record mode none): 1 selected, 0 consumed, 0 unconsumed, poisoned: yes",
        "  stderr (last lines):",
        "    TOOL_FAILED: echo failed",
        "    Error: boom",
        "  to re-record: pytest x --dsh-record-mode all",
    ]
    with pytest.raises(RunFailed):
        result.check()
    assert _result(exit_code=0).check().ok
    assert not _result(exit_code=0, timed_out=True).ok


def test_a_report_round_trips(tmp_path: Path) -> None:
    report = RunReport(cwd="/w", sessions=["s"], calls=[CallPath("c", "echo", "root/0", msgspec.Raw(b'{"a":1}'))],
                       cassettes=[CassetteCounts(kind="tool", mode="record", published=True)],
                       errors=[ReportedError("X", "y")], notes=["n"], exitCode=1)
    write_report(str(tmp_path / "r.json"), report)
    back = read_report(str(tmp_path / "r.json"))
    assert back is not None and back.calls[0].value == msgspec.Raw(b'{"a":1}') and back.exitCode == 1
    assert os.listdir(tmp_path) == ["r.json"]
    assert read_report(str(tmp_path / "missing.json")) is None


def test_the_stderr_tail_of_an_uncaught_node_error_keeps_only_its_message() -> None:
    stderr = "\n".join([
        "file:///x/lib/index.js:1187", "\t\tthrow new Error(`${binName}: ${stage}`, { cause });", "\t\t      ^", "",
        "Error: dsh: plugin tree failed to load: dsh: 1 entry did not activate",
        "cordis:include: ConfigFileError: failed to validate config file cordis.yml",
        "    at Include.read (file:///x/lib/index.js:192:35)", "  [cause]: Error: dsh: 1 entry did not activate",
        "}", "", "Node.js v24.19.0",
    ])
    assert _result(stderr=stderr).explain().splitlines()[1:] == [
        "  stderr (last lines):",
        "    Error: dsh: plugin tree failed to load: dsh: 1 entry did not activate",
        "    cordis:include: ConfigFileError: failed to validate config file cordis.yml",
    ]


_SESSION = "session-c5fe91d0-dc94-4e91-9fbc-bd3096383298"


def _failed_run(home: Path, *, filtered: bool = False, **kw: object) -> RunResult:
    """A run whose ``broken`` call failed, as the session log of ``home`` holds it."""
    cwd = "/tmp/pytest-of-u/pytest-1/test_x0/dsh-work"
    hint = f"; its full message is in the session log: dsh-sidecar sessions show {_SESSION}"
    summary = CassetteSummary(kind="tool", file="t.tools.ndjson", record_mode="none", mode="replay", selected=1,
                              consumed=1, filtered=filtered)
    base: dict[str, object] = dict(
        stderr=f"dsh: TOOL_FAILED: broken (mock-1-1-0) failed at step 1; 0 later step(s) stopped{hint}",
        tool_cassette=summary, session_id=_SESSION,
        session_path=str(home / "sessions" / "--tmp-pytest-of-u-pytest-1-test_x0-dsh-work--" / _SESSION
                         / "session.jsonl.zstd"),
        events=[{"type": "session", "id": _SESSION, "cwd": cwd}],
        tool_results=[ToolResult(call_id="mock-1-1-0", tool="broken", path="root/0", is_error=True,
                                 output="Error: broken on purpose:\n  disk on fire")],
    )
    base.update(kw)
    return _result(**base)


def test_a_failed_runs_account_shows_the_tools_own_message_and_a_show_command_that_works_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sidecar's pointer named only the id, cut at 200 characters; run where pytest's
    # temporary folder is not the user's, it answered SESSION_NOT_FOUND.
    monkeypatch.setenv("DSH_HOME", str(tmp_path))

    lines = _failed_run(tmp_path).explain("pytest x --dsh-record-mode all").splitlines()

    assert lines == [
        "dsh run exited 1: /mock run echo({})",
        "  tool cassette t.tools.ndjson (replay, record mode none): 1 selected, 1 consumed, 0 unconsumed, poisoned: no",
        "  broken at root/0 failed: Error: broken on purpose: disk on fire",
        "  stderr (last lines):",
        "    TOOL_FAILED: broken (mock-1-1-0) failed at step 1; 0 later step(s) stopped",
        f"  session log: dsh-sidecar sessions show {_SESSION}",
        "  to re-record: pytest x --dsh-record-mode all",
    ]


def test_the_show_command_names_the_dsh_home_relative_to_here_when_the_cli_would_not_find_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "other"))
    monkeypatch.chdir(tmp_path / "other")

    assert _failed_run(tmp_path / "my home").show_command() == (
        f"dsh-sidecar sessions show {_SESSION} --dsh-home '../my home'"
    )
    assert _failed_run(tmp_path, session_id=None, session_path=None).show_command() is None


def test_the_account_repeats_no_named_error_and_prints_no_message_under_result_filters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path))
    refused = ToolResult(call_id="c2", tool="echo", path="root/1", is_error=True, error_code="CASSETTE_MISMATCH",
                         output="Error: CASSETTE_MISMATCH: echo at root/1, ordinal 1: args differ")
    run = _failed_run(tmp_path, filtered=True, errors=[Diagnostic("CASSETTE_MISMATCH", "echo at root/1, ordinal 1: "
                                                                                      "args differ")])
    run = msgspec.structs.replace(run, tool_results=[*run.tool_results, refused])

    lines = run.explain().splitlines()

    assert "  broken at root/0 failed; its message is not shown (the tool cassette filters results)" in lines
    assert not any("disk on fire" in line or line.startswith("  echo at root/1 failed") for line in lines)


def test_the_plugin_warns_with_the_recorded_failure_lines_of_a_recording_only() -> None:
    from dsh_sidecar.bridge.api.pytest_plugin import _recorded_failures

    stderr = ("dsh-sidecar: subagent cassette record: 1 starts\n"
              "dsh-sidecar: SUBAGENT_CHILD_FAILED: 1 of 1 recorded child run(s) ended in an error (...)\n")
    recording = CassetteSummary(kind="subagent", file="s.jsonl", record_mode="once", mode="record", failed=1)
    replaying = CassetteSummary(kind="subagent", file="s.jsonl", record_mode="none", mode="replay")

    assert _recorded_failures(_result(stderr=stderr, subagent_cassette=recording)) == [
        "SUBAGENT_CHILD_FAILED: 1 of 1 recorded child run(s) ended in an error (...)"
    ]
    assert _recorded_failures(_result(stderr=stderr, subagent_cassette=replaying)) == []
def test_the_dormant_provider_row_is_skipped_only_while_nothing_can_give_it_a_route(tmp_path: Path) -> None:
    host = host_env(tmp_path / "prefix", tmp_path / "home")
    (tmp_path / "home" / "profiles" / "headless").mkdir(parents=True)
    assert unused_rows(host, "headless", [], []) == ["llm-pi-ai"]
    text = patch_text({}, [], False, False, unused_rows(host, "headless", [], []))
    assert text.splitlines()[0] == '- {"id": "llm-pi-ai", "disabled": true}'
    # Each source that can name a pi-ai route (or move the settings document) keeps the row.
    assert unused_rows(host, "headless", [Row("llm-pi-ai", "@deepseek-ai/dsh-llm-pi-ai")], []) == []
    assert unused_rows(host, "headless", [Row("settings", "@deepseek-ai/dsh-settings-file")], []) == []
    patch = tmp_path / "p.yml"
    for layer in ("- id: llm-pi-ai\n  config: {}\n", '- {"id": "settings", "config": {"path": "s.yaml"}}\n'):
        patch.write_text(layer)
        assert unused_rows(host, "headless", [], [patch]) == [], layer
    patch.write_text("- id: session-title\n  disabled: true\n")
    assert unused_rows(host, "headless", [], [patch]) == ["llm-pi-ai"]
    profile_layer = tmp_path / "home" / "profiles" / "headless" / "cordis.patch.yml"
    profile_layer.write_text("- id: llm-pi-ai\n  config: {providers: {openai: {}}}\n")
    assert unused_rows(host, "headless", [], []) == []
    profile_layer.unlink()
    (tmp_path / "home" / "settings.yaml").write_text("llm-pi-ai:\n  providers: {openai: {apiKeyEnv: K}}\n")
    assert unused_rows(host, "headless", [], []) == []
    (tmp_path / "home" / "settings.yaml").write_text("llm-deepseek: {}\n")
    assert unused_rows(host, "headless", [], []) == ["llm-pi-ai"]


def test_the_warm_pool_is_a_context_manager_and_its_boot_failure_is_a_named_sidecar_error() -> None:
    from dsh_sidecar.bridge.api.warm_pool import HostBootFailed, WarmPool
    from dsh_sidecar.python_core.errors import SidecarError

    with WarmPool() as pool:
        assert pool.pids() == []
    pool.close()  # idempotent after the block
    assert issubclass(HostBootFailed, SidecarError) and HostBootFailed.code == "WARM_HOST_BOOT_FAILED"


def test_settling_a_private_home_moves_what_the_run_made_and_keeps_its_own_cordis_yml(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "profiles" / "headless" / "node_modules" / "dsh-sidecar-shim").mkdir(parents=True)
    (shared / "profiles" / "headless" / "cordis.yml").write_text("shared")
    (shared / "storages" / "old").mkdir(parents=True)
    staging = tmp_path / "staging"
    staging.mkdir()
    home = private_home(shared, "headless", tmp_path / "private", staging)
    (home / "profiles" / "headless" / "cordis.yml").write_text("the run's own")
    (home / "vault").mkdir()
    (home / "vault" / "entries.json").write_text("[1]")
    (home / "profiles" / "headless" / "plugin.db").write_text("db")
    (home / "storages" / "new.json").write_text("{}")  # through a link: already shared
    (shared / "vault").mkdir()  # another run settled its own vault meanwhile
    (shared / "vault" / "theirs.json").write_text("[2]")
    (shared / "made-by-another").write_text("x")
    moved = settle_home(home, shared, "headless", keep_links=True)
    assert sorted(moved) == ["profiles/headless/plugin.db", "vault"]
    assert sorted(os.listdir(shared / "vault")) == ["entries.json", "theirs.json"]
    assert (shared / "profiles" / "headless" / "cordis.yml").read_text() == "shared"
    assert (shared / "storages" / "new.json").exists()
    # A warm host keeps finding its state, and sees what others settled.
    assert (home / "vault").is_symlink() and (home / "vault" / "entries.json").read_text() == "[1]"
    assert (home / "made-by-another").is_symlink()
    assert settle_home(home, shared, "headless", keep_links=False) == []


def test_a_warm_homes_link_to_a_store_removed_from_the_shared_home_goes_too(tmp_path: Path) -> None:
    # Seen with a test that deleted a plugin's store folder between two warm runs: the private
    # home kept a dangling link and the plugin's next `mkdir -p` failed with ENOENT.
    shared = tmp_path / "shared"
    (shared / "profiles" / "headless" / "node_modules" / "dsh-sidecar-shim").mkdir(parents=True)
    staging = tmp_path / "staging"
    staging.mkdir()
    home = private_home(shared, "headless", tmp_path / "private", staging)
    (home / "store").mkdir()
    settle_home(home, shared, "headless", keep_links=True)
    assert (home / "store").is_symlink()
    (shared / "store").rmdir()  # the test removes the plugin's state
    settle_home(home, shared, "headless", keep_links=True)
    assert not (home / "store").is_symlink() and not (home / "store").exists()
    (home / "store").mkdir()  # the plugin makes it anew, as under a plain `dsh`
    assert settle_home(home, shared, "headless", keep_links=True) == ["store"]
    assert (shared / "store").is_dir()


def test_a_refused_test_logic_key_gets_the_fix_of_the_interface_it_came_from() -> None:
    row_fix = ("dsh-sidecar: fix: correct that key in the `sidecar` row's config (your profile's cordis.patch.yml "
               "or the --patch file)")
    refused = ("dsh-sidecar: INVALID_CONFIG: toolCassette.match.echo.ignore[0]: must be a JSON pointer below the "
               f"root, as /a/0\n{row_fix}\n")
    assert _config_fix(refused, CONFIG_HINT).splitlines()[1] == (
        "dsh-sidecar: fix: correct the `ignore` argument (ToolCassette(...) or run(...))")
    assert _config_fix(refused, "correct the `{key}` key of the --config file").splitlines()[1] == (
        "dsh-sidecar: fix: correct the `ignore` key of the --config file")
    other = f"dsh-sidecar: INVALID_CONFIG: mock.defaultGapMs: expected `int` <= 3600000\n{row_fix}\n"
    assert _config_fix(other, CONFIG_HINT) == other  # not a test-logic key: the row's fix stands


def test_every_cassette_of_a_test_is_ndjson_and_an_earlier_subagents_jsonl_is_still_found(tmp_path: Path) -> None:
    from dsh_sidecar.bridge.api.pytest_plugin import DshRunner

    runner = object.__new__(DshRunner)  # only ``base`` and ``runs`` matter to cassette paths
    runner.base, runner.runs = tmp_path / "test_a", []
    assert [runner.cassette(kind).name for kind in ("tools", "subagents", "model")] == [
        "test_a.tools.ndjson", "test_a.subagents.ndjson", "test_a.model.ndjson",
    ]
    assert runner.cassette("subagents", 2).name == "test_a-2.subagents.ndjson"
    (tmp_path / "test_a.subagents.jsonl").write_text("")
    assert runner.cassette("subagents").name == "test_a.subagents.jsonl"
    (tmp_path / "test_a.subagents.ndjson").write_text("")
    assert runner.cassette("subagents").name == "test_a.subagents.ndjson"


def test_a_refusal_at_session_start_is_read_from_stderr_once_each_without_fix_lines() -> None:
    from dsh_sidecar.bridge.api.result import refusals

    stderr = ("dsh-sidecar: INVALID_CONFIG: toolCassette.include: must not be empty\n"
              "dsh-sidecar: fix: correct that key\n"
              "dsh-sidecar: INVALID_CONFIG: toolCassette.include: must not be empty\n"
              "  at Object.<anonymous> (/x.js:1:1)\n"
              "dsh: MISSING_CREDENTIAL: llm-deepseek: no API key\n"
              "dsh-sidecar: note without a code\n")
    assert refusals(stderr) == [
        Diagnostic("INVALID_CONFIG", "toolCassette.include: must not be empty"),
        Diagnostic("MISSING_CREDENTIAL", "llm-deepseek: no API key"),
    ]
    assert refusals("") == []
