"""The pytest plugin (entry point ``pytest11``): the ``dsh`` fixture runs headless DSH turns.

    def test_weather(dsh):
        result = dsh.run('/mock run weather_lookup({"city": "Paris"})', tools=["weather_lookup"])
        assert result.result("weather_lookup").output == "Paris: sunny, 21C"

Cassettes live next to the test file, ``cassettes/<module>/<test>.tools.ndjson`` (and
``.subagents.ndjson``, ``.model.ndjson``; a test's second run adds ``-2``), or where ``@pytest.mark.dsh(cassette=...)``
says. ``--dsh-record-mode`` is ``none`` by default, as in pytest-recording, so CI never records
by accident; a marker's ``record_mode`` applies when the option is not given. A failed run fails
the test with the run's named errors, cassette counts, stderr tail and the command to re-record.
Each test runs in its own ``tmp_path`` and finds its sessions by id, so ``pytest-xdist`` workers
share one host install without cross-talk.

Test logic (docs/test-logic.md) comes from the ``dsh_config`` fixture, as pytest-recording's
``vcr_config``: override it in a conftest or test module, and per test with
``@pytest.mark.dsh(config={...})`` (merged over the fixture). Its keys: ``filters``,
``allow_redacted_replay``, ``ignore`` and ``faults`` (applied to the ``tools=`` cassette) and
``stubs`` (passed to every run).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import warnings
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.bridge.api.run import FAULTS_LEFT_OUT, run
from dsh_sidecar.bridge.api.session_index import SESSION_INDEX, IndexedRun, append_run
from dsh_sidecar.bridge.api.trace.collect import TraceLater
from dsh_sidecar.bridge.api.types import (
    LOGIC_KEYS,
    RECORD_MODES,
    CassetteMissing,
    FaultsLeftOut,
    HostNotFound,
    ModelCassette,
    RecordedFailure,
    RecordMode,
    ReplayDivergence,
    Row,
    RunResult,
    SubagentCassette,
    ToolCassette,
)
from dsh_sidecar.bridge.api.verdict import PROPERTY, counts, table
from dsh_sidecar.bridge.api.warm_pool import WarmPool
from dsh_sidecar.bridge.host.discovery import find_host
from dsh_sidecar.bridge.host.install import PACKAGE, install_plugin
from dsh_sidecar.bridge.host.toolchain import HostEnv, ensure_host, host_env
from dsh_sidecar.python_core.files import reason_of

__all__ = ["DshRunner"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_RUNS = pytest.StashKey[list[RunResult]]()
_RUNNER = pytest.StashKey["DshRunner"]()
TRACE_MODES = ("retain-on-failure", "on", "off")
TRACES = Path(".dsh-sidecar") / "traces"
TRACE_PROPERTY = "dsh_trace"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh", "dsh-sidecar: headless DSH runs with cassettes")
    group.addoption(
        "--dsh-record-mode", choices=RECORD_MODES, default=None,
        help="none (default): replay only; once: record missing cassettes; all: re-record every cassette.",
    )
    group.addoption(
        "--dsh-host", default=None,
        help="DSH host prefix; write it --dsh-host=DIR (with a space, pytest may take DIR as its rootdir). "
        "Default: $DSH_SIDECAR_HOST, else the .host found from the rootdir up. DSH_HOME: $DSH_HOME, else "
        "DIR/dsh-home.",
    )
    group.addoption(
        "--dsh-setup", action="store_true",
        help="Install the DSH host and the plugin if missing (once, under a lock shared by xdist workers).",
    )
    group.addoption(
        "--dsh-allow-live-tools", action="store_true",
        help="In record mode none, let tools that no cassette serves run live (default: such a call fails "
        "the test with LIVE_TOOL_BLOCKED).",
    )
    group.addoption(
        "--dsh-cold", action="store_true",
        help="Boot one DSH process per run (default: runs of one composition share a warm host; "
        "docs/warm-host.md).",
    )
    group.addoption(
        "--dsh-strict-replay", action="store_true",
        help="A replay that diverged from its recording (REPLAY_DIVERGED) fails the test (default: a warning).",
    )
    group.addoption(
        "--dsh-all-rows", action="store_true",
        help="Compose every profile row, also those a run cannot use (default: skipped; docs/cold-boot.md).",
    )
    group.addoption(
        "--dsh-no-verdict", action="store_true",
        help="Leave out the verdict table (per dsh test: calls served, recorded, live, missed) at the end of the run.",
    )
    group.addoption(
        "--dsh-trace", choices=TRACE_MODES, default=None,
        help="Write each dsh test's trace page (docs/trace.md) to .dsh-sidecar/traces/: retain-on-failure "
        "(default) for failed tests only, on for every test, off for none.",
    )
    parser.addini("dsh_trace", "when to write a dsh test's trace page: retain-on-failure (default), on, off",
                  default="retain-on-failure")
    parser.addini("dsh_verdict", "print the verdict table of the dsh tests at the end of the run (default: true)",
                  type="bool", default=True)
    parser.addini("dsh_all_rows", "compose every profile row in dsh runs (default: false, rows a run cannot "
                  "use are skipped; docs/cold-boot.md)", type="bool", default=False)
    parser.addini("dsh_cold", "boot one DSH process per dsh run (default: false, a warm host per xdist "
                  "worker and composition; docs/warm-host.md)", type="bool", default=False)
    parser.addini("dsh_strict_replay", "a replay that diverged from its recording (REPLAY_DIVERGED) fails "
                  "the test (default: false, a warning)", type="bool", default=False)
    parser.addini("dsh_allow_live_tools", "tools that may run live in record mode none (`*`: all); "
                  "default: none", type="linelist", default=[])
    parser.addini("dsh_patches", "extra --patch layers for every dsh run (paths relative to the rootdir)",
                  type="linelist", default=[])
    parser.addini("dsh_rows", "profile rows for every dsh run (MCP servers, tool plugins every test uses): "
                  "each line a JSON row {\"id\", \"name\", \"config\", \"insert\"} or a JSON file of a list "
                  "of them (relative to the rootdir); a test's own rows= come after them", type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dsh(cassette=None, record_mode=None, config=None, allow_live_tools=None, cold=False, "
        "strict=False, trace=None): cassette base path (relative to the test file), record mode, test logic (merged "
        "over the dsh_config fixture), the tools allowed to run live (True: all), a DSH process per run (cold), a "
        "replay that diverged from its recording failing the test (strict) and when its trace is written "
        "(retain-on-failure, on, off) for the dsh fixture",
    )
    if _rootdir_from_host_option(config):
        config.issue_config_time_warning(pytest.PytestConfigWarning(
            "DSH_HOST_ROOTDIR: pytest took the value of `--dsh-host DIR` (written with a space) as a test path and "
            "chose its rootdir from it, so this project's pytest.ini (dsh_patches, ...) was not read; write "
            "--dsh-host=DIR"), stacklevel=2)


def _rootdir_from_host_option(config: pytest.Config) -> bool:
    """Whether pytest took the value of ``--dsh-host DIR`` (written with a space) for a test path
    and chose its rootdir (and so its ini file) from it: the rootdir is DIR or one of its parents
    and not the invocation folder or one of its parents."""
    args = list(config.invocation_params.args)
    values = [args[i + 1] for i, arg in enumerate(args[:-1]) if arg == "--dsh-host"]
    if not values:
        return False
    invoked = Path(config.invocation_params.dir).resolve()
    root = config.rootpath.resolve()
    if root == invoked or root in invoked.parents:
        return False
    for value in values:
        host = (invoked / value).resolve()
        if root == host or root in host.parents:
            return True
    return False


def _setup_host(prefix: Path) -> HostEnv:
    """Install the host and the plugin under ``prefix`` once, whichever worker gets there first."""
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix / ".setup.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        env = ensure_host(prefix)
        if not (env.dsh_home / "profiles" / "headless" / "node_modules" / PACKAGE).is_dir():
            install_plugin(env, "headless")
        return env


@pytest.fixture(scope="session")
def dsh_host(pytestconfig: pytest.Config) -> HostEnv:
    """The DSH host every ``dsh`` run of the session uses."""
    explicit = pytestconfig.getoption("--dsh-host")
    if pytestconfig.getoption("--dsh-setup"):
        return _setup_host(Path(explicit) if explicit else pytestconfig.rootpath / ".host")
    if explicit:
        # As $DSH_SIDECAR_HOST=DIR does (find_host): the prefix from here, the home from $DSH_HOME.
        home = os.environ.get("DSH_HOME", "").strip()
        return host_env(Path(explicit), Path(home) if home else None)
    try:
        return find_host(pytestconfig.rootpath)
    except HostNotFound as exc:
        missing = str(exc)
    # Outside the handler: pytest would print the error twice ("During handling of ...").
    pytest.fail(f"{missing} (or run pytest with --dsh-setup)", pytrace=False)


_INI_ROWS = pytest.StashKey[list[Row]]()
_ROW_DECODER = msgspec.json.Decoder(Row)
_ROWS_DECODER = msgspec.json.Decoder(list[Row])


def _ini_rows(config: pytest.Config) -> list[Row]:
    """The ini's ``dsh_rows``, read once per session: each line a JSON row or a JSON file of rows.

    Raises:
        pytest.UsageError: a line is neither (one line: which, why and the fix).
    """
    if _INI_ROWS in config.stash:
        return config.stash[_INI_ROWS]
    rows: list[Row] = []
    for n, line in enumerate(config.getini("dsh_rows"), start=1):
        try:
            if line.lstrip().startswith("{"):
                rows.append(_ROW_DECODER.decode(line))
            else:
                rows += _ROWS_DECODER.decode((config.rootpath / line).read_bytes())
        except (msgspec.DecodeError, msgspec.ValidationError, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise pytest.UsageError(
                f"INVALID_CONFIG: ini dsh_rows line {n} ({line[:60]!r}): {why}; fix: write a JSON row "
                '{"id": "mcp-notes", "name": "@deepseek-ai/dsh-mcp-client", "config": {...}, "insert": true} '
                "on one line, or the path (relative to the rootdir) of a JSON file holding a list of them"
            ) from None
    config.stash[_INI_ROWS] = rows
    return rows


class DshRunner:
    """Runs headless DSH turns for one test, with per-test cassette paths."""

    def __init__(self, request: pytest.FixtureRequest, host: HostEnv, cwd: Path,
                 logic: Mapping[str, Any] | None = None, pool: WarmPool | None = None) -> None:
        self.host = host
        self.cwd = cwd
        config = request.config
        marker = request.node.get_closest_marker("dsh")
        marked: Mapping[str, Any] = marker.kwargs if marker is not None else {}
        _check_marker(marker)
        self.logic = {**(logic or {}), **(marked.get("config") or {})}
        unknown = sorted(set(self.logic) - set(LOGIC_KEYS))
        if unknown:
            raise pytest.UsageError(f"dsh_config / @pytest.mark.dsh(config=...): unknown key {unknown[0]!r} "
                                    f"(known: {', '.join(LOGIC_KEYS)})")
        option = config.getoption("--dsh-record-mode")
        self.record_mode: RecordMode = option or marked.get("record_mode") or "none"
        allowed = marked.get("allow_live_tools")
        ini = config.getini("dsh_allow_live_tools")
        self.allow_live_tools: bool | list[str] = (
            True if config.getoption("--dsh-allow-live-tools") or allowed is True or "*" in ini
            else list(allowed) if allowed not in (None, False) else list(ini)
        )
        folder = request.path.parent
        base = marked.get("cassette")
        self.base = folder / base if base else folder / "cassettes" / request.path.stem / _UNSAFE.sub(
            "_", request.node.name
        )
        self.patches = [config.rootpath / p for p in config.getini("dsh_patches")]
        self.rows = _ini_rows(config)
        self.skip_unused_rows = not (config.getoption("--dsh-all-rows") or config.getini("dsh_all_rows"))
        cold = config.getoption("--dsh-cold") or config.getini("dsh_cold") or marked.get("cold") is True
        self.warm: bool | WarmPool = False if cold or pool is None else pool
        self.strict_replay = bool(config.getoption("--dsh-strict-replay") or config.getini("dsh_strict_replay")
                                  or marked.get("strict") is True)
        self.nodeid = request.node.nodeid
        self.runs: list[RunResult] = []
        ini = config.getini("dsh_trace")
        if ini not in TRACE_MODES:
            raise pytest.UsageError(f"ini dsh_trace = {str(ini)[:40]!r}: not a trace mode; allowed: "
                                    f"{', '.join(TRACE_MODES)}")
        self.trace_mode: str = config.getoption("--dsh-trace") or marked.get("trace") or ini
        self.trace = None if self.trace_mode == "off" else TraceLater()
        self.index = config.rootpath / SESSION_INDEX

    def cassette(self, kind: str, index: int | None = None) -> Path:
        """The cassette path of this test's run ``index`` (1-based; default: the next run)."""
        n = len(self.runs) + 1 if index is None else index
        stem = self.base.name + ("" if n == 1 else f"-{n}")
        path = self.base.with_name(stem + f".{kind}.ndjson")
        if kind == "subagents":
            # Earlier releases named it ``.subagents.jsonl``: a committed one is still used.
            legacy = self.base.with_name(stem + ".subagents.jsonl")
            if legacy.exists() and not path.exists():
                return legacy
        return path

    def run(
        self,
        task: str | None = None,
        *,
        script: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        tools: Sequence[str] | None = None,
        subagents: bool | SubagentCassette = False,
        tool_cassette: ToolCassette | None = None,
        subagent_cassette: SubagentCassette | None = None,
        record_mode: RecordMode | None = None,
        model: bool | ModelCassette = False,
        rows: Sequence[Row] = (),
        patches: Sequence[str | os.PathLike[str]] = (),
        check: bool = True,
        **options: Any,
    ) -> RunResult:
        """Run one turn; ``tools`` selects a tool cassette, ``subagents`` a subagent cassette,
        ``model`` a model cassette (``True``, or a ``ModelCassette`` whose ``options`` are kept).

        ``tool_cassette`` / ``subagent_cassette`` name a cassette explicitly instead (relative files
        resolve against the run's cwd), e.g. to record and replay one file within a test;
        ``record_mode`` overrides the session's for this call. With ``check`` (the default) a
        failed run fails the test with its explanation; other keyword arguments go to
        ``bridge.api.run.run``.
        """
        logic = self.logic
        if tool_cassette is None and tools:
            tool_cassette = ToolCassette(file=str(self.cassette("tools")), include=list(tools)).with_logic(logic)
        if logic.get("stubs"):
            options.setdefault("stubs", logic["stubs"])
        if subagent_cassette is None and subagents:
            file = str(self.cassette("subagents"))
            subagent_cassette = (
                SubagentCassette(file=file) if subagents is True
                else SubagentCassette(file=file, provider=subagents.provider, options=subagents.options,
                                      one_shot=subagents.one_shot)
            )
        model_cassette = None
        if model:
            model_cassette = ModelCassette(
                file=str(self.cassette("model")), options={} if model is True else dict(model.options),
            )
        options.setdefault("cwd", self.cwd)
        options.setdefault("allow_live_tools", self.allow_live_tools)
        options.setdefault("skip_unused_rows", self.skip_unused_rows)
        options.setdefault("warm", self.warm)
        options.setdefault("strict_replay", self.strict_replay)
        if self.trace is not None:
            options.setdefault("trace", self.trace)
        missing: str | None = None
        try:
            result = run(
                task, script=script, tool_cassette=tool_cassette, subagent_cassette=subagent_cassette,
                model_cassette=model_cassette, record_mode=record_mode or self.record_mode, rows=[*self.rows, *rows],
                patches=[*self.patches, *patches], host=self.host,
                record_hint=f"record it: pytest {self.nodeid} --dsh-record-mode once",
                config_hint="correct the `{key}` key of the dsh_config fixture or @pytest.mark.dsh(config={{...}})",
                **options,
            )
        except CassetteMissing as exc:
            missing = str(exc)
        except ValueError as exc:  # a bad option: one line naming it, no traceback
            missing = f"dsh.run: {exc}"
        if missing is not None:  # outside the handler: pytest would print the error twice
            pytest.fail(missing, pytrace=False)
        self.runs.append(result)
        append_run(self.index, IndexedRun(self.nodeid, result.session_id, str(self.cwd), result.exit_code))
        if check and not result.ok:
            pytest.fail(result.explain(f"pytest {self.nodeid} --dsh-record-mode all"), pytrace=False)
        for line in _recorded_failures(result):
            # A passing test's stderr is never shown: the line the run printed becomes a warning.
            warnings.warn(RecordedFailure(line), stacklevel=2)
        for line in result.stderr.splitlines():
            if line.startswith(_DIVERGED_LINE):
                warnings.warn(ReplayDivergence(line.removeprefix("dsh-sidecar: warning: ")), stacklevel=2)
            if line.startswith(_LEFT_OUT):
                warnings.warn(FaultsLeftOut(line.removeprefix("dsh-sidecar: ")), stacklevel=2)
        return result


_DIVERGED_LINE = "dsh-sidecar: warning: REPLAY_DIVERGED: "
_LEFT_OUT = f"dsh-sidecar: {FAULTS_LEFT_OUT}: "
_FAILURE_LINES = ("dsh-sidecar: TOOL_FAILURE_RECORDED: ", "dsh-sidecar: SUBAGENT_CHILD_FAILED: ")


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller (or the only process)
        (session.config.rootpath / SESSION_INDEX).unlink(missing_ok=True)
        # A trace folder holds this run's traces only, as Playwright's test-results.
        shutil.rmtree(session.config.rootpath / TRACES, ignore_errors=True)


def _recorded_failures(result: RunResult) -> list[str]:
    """The run's recorded-failure lines (without the prefix) when one of its recordings holds failures."""
    summaries = (result.tool_cassette, result.subagent_cassette)
    if not any(s is not None and s.mode == "record" and s.failed for s in summaries):
        return []
    lines = result.stderr.splitlines()
    return [line.removeprefix("dsh-sidecar: ") for line in lines if line.startswith(_FAILURE_LINES)]


_MARKER_KEYS = ("cassette", "record_mode", "config", "allow_live_tools", "cold", "strict", "trace")


def _check_marker(marker: pytest.Mark | None) -> None:
    """Fail the test on a ``dsh`` marker key or value it would otherwise ignore."""
    if marker is None:
        return
    where = "@pytest.mark.dsh"
    if marker.args:
        pytest.fail(f"{where}: takes keywords only ({', '.join(_MARKER_KEYS)})", pytrace=False)
    for key, value in marker.kwargs.items():
        if key not in _MARKER_KEYS:
            pytest.fail(f"{where}({key}=...): unknown key; allowed: {', '.join(_MARKER_KEYS)}", pytrace=False)
        shown = repr(value)[:40]
        if key == "record_mode" and value not in RECORD_MODES:
            pytest.fail(f"{where}(record_mode={shown}): not a record mode; allowed: {', '.join(RECORD_MODES)}",
                        pytrace=False)
        if key == "config" and not isinstance(value, dict):
            pytest.fail(f"{where}(config={shown}): not a mapping; give a dict of test logic", pytrace=False)
        if key == "cassette" and (not isinstance(value, str) or not value):
            pytest.fail(f"{where}(cassette={shown}): not a path; give a non-empty string", pytrace=False)
        if key == "trace" and value not in TRACE_MODES:
            pytest.fail(f"{where}(trace={shown}): not a trace mode; allowed: {', '.join(TRACE_MODES)}", pytrace=False)
        if key in ("cold", "strict") and not isinstance(value, bool):
            pytest.fail(f"{where}({key}={shown}): allowed: True or False", pytrace=False)
        if key == "allow_live_tools" and not (
            isinstance(value, bool)
            or (isinstance(value, (list, tuple)) and all(isinstance(t, str) and t for t in value))
        ):
            pytest.fail(f"{where}(allow_live_tools={shown}): allowed: True, False or a list of tool names",
                        pytrace=False)


@pytest.fixture
def dsh_config() -> dict[str, Any]:
    """Test logic for every ``dsh`` run of a test (override it; keys: ``bridge.api.run.LOGIC_KEYS``)."""
    return {}


@pytest.fixture(scope="session")
def dsh_warm_pool() -> Iterator[WarmPool]:
    """The warm hosts of this pytest process (of this xdist worker): ended with the session."""
    with WarmPool() as pool:
        yield pool


@pytest.fixture
def dsh(request: pytest.FixtureRequest, dsh_host: HostEnv, tmp_path: Path,
        dsh_config: dict[str, Any], dsh_warm_pool: WarmPool) -> Iterator[DshRunner]:
    """A ``DshRunner`` for this test: its own working directory, per-test cassette paths."""
    work = tmp_path / "dsh-work"
    work.mkdir()
    runner = DshRunner(request, dsh_host, work, dsh_config, dsh_warm_pool)
    request.node.stash[_RUNS] = runner.runs
    request.node.stash[_RUNNER] = runner
    yield runner


def _run_line(result: RunResult) -> str:
    cassettes = ", ".join(
        f"{s.kind} {s.mode} {s.file}"
        for s in (result.tool_cassette, result.subagent_cassette, result.model_cassette) if s is not None
    )
    return f"exit {result.exit_code} in {result.duration_ms} ms: {result.task[:70]}" + (
        f" [{cassettes}]" if cassettes else ""
    ) + f"\n  session log: {result.session_path or '(none)'}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    runs = item.stash.get(_RUNS, None)
    page = _trace(item, report) if runs and report.when == "call" else None
    if runs and report.when == "call" and report.failed:
        report.sections.append(("dsh runs", "\n".join(_run_line(r) for r in runs)
                                + ("" if page is None else f"\n  trace: {page}")))
    if runs and report.when == "call":
        report.user_properties.append((PROPERTY, counts(runs)))
        if page is not None:
            report.user_properties.append((TRACE_PROPERTY, page))
    return report


def _trace(item: pytest.Item, report: pytest.TestReport) -> str | None:
    """Write the test's trace page when its mode asks (``on``, or ``retain-on-failure`` and it
    failed); returns its path relative to the rootdir."""
    runner = item.stash.get(_RUNNER, None)
    if runner is None or runner.trace is None or (runner.trace_mode != "on" and not report.failed):
        return None
    root = item.config.rootpath
    digest = hashlib.sha256(item.nodeid.encode()).hexdigest()[:8]
    path = root / TRACES / f"{_UNSAFE.sub('_', item.nodeid)[:120]}-{digest}.html"
    try:
        written = runner.trace.write(path, title=item.nodeid, test=item.nodeid, outcome=report.outcome)
    except OSError as exc:  # a full disk or a read-only rootdir: the test's own outcome stands
        report.sections.append(("dsh trace", f"TRACE_NOT_WRITTEN: {TRACES}: {reason_of(exc)}"))
        return None
    return None if written is None else str(written.relative_to(root))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if config.getoption("--dsh-no-verdict") or not config.getini("dsh_verdict"):
        return
    rows = []
    for outcome in ("passed", "failed", "error", "xfailed", "xpassed"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "when", None) != "call":
                continue
            properties = dict(getattr(report, "user_properties", ()))
            value = properties.get(PROPERTY)
            if isinstance(value, dict):
                page = properties.get(TRACE_PROPERTY)
                rows.append((report.nodeid, outcome, value, page if isinstance(page, str) else None))
    lines = table(sorted(rows))
    if lines:
        terminalreporter.write_sep("=", "dsh-sidecar verdict")
        for line in lines:
            terminalreporter.write_line(line)
