"""One policy for every CLI: a named one-line error, escaped names, regular files, no hang.

Exit codes (``python_core.cli_errors``): 0 ok, 1 a named error (invalid, unreadable), 2 usage;
``diff`` 2 different or not comparable; ``dsh-sidecar run`` 124 on its timeout.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import click
import msgspec
import pytest
from click.testing import CliRunner

from dsh_sidecar.bridge.api.cli import main as sidecar
from dsh_sidecar.python_core import cli_errors
from dsh_sidecar.python_core.cli_errors import NamedFailure
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.cli import mock
from dsh_sidecar.python_core.model_cassette import ModelCassetteConfig, ModelCassetteEngine
from dsh_sidecar.python_core.model_cassette.cli import cli as model
from dsh_sidecar.python_core.subagent_cassette.cli import cli as subagent
from dsh_sidecar.python_core.subagent_cassette.config import parse_fields as parse_subagent_config
from dsh_sidecar.python_core.subagent_cassette.engine import Forward, SettledRun, SubagentCassetteEngine, Upstream
from dsh_sidecar.python_core.subagent_cassette.format import Capabilities, ResultOutcome, Timing
from dsh_sidecar.python_core.subagent_cassette.identity import StartRequest
from dsh_sidecar.python_core.tool_cassette import (
    ExecuteEvent,
    HostToolResult,
    PostEvent,
    ResultEvent,
    ToolCassetteSession,
)
from dsh_sidecar.python_core.tool_cassette import parse_config as parse_tool_config
from dsh_sidecar.python_core.tool_cassette.cli import main as tool

HOST = "0.1.0-rc.8"

COMMANDS: list[tuple[str, click.Command, Sequence[str]]] = [
    ("tool verify", tool, ["verify"]),
    ("tool inspect", tool, ["inspect"]),
    ("mock validate", mock, ["validate"]),
    ("mock convert", mock, ["convert"]),
    ("subagent verify", subagent, ["verify"]),
    ("subagent inspect", subagent, ["inspect"]),
    ("model verify", model, ["verify"]),
    ("model inspect", model, ["inspect"]),
]
IDS = [name for name, _, _ in COMMANDS]


@pytest.fixture
def odd_files(tmp_path: Path) -> Path:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    os.symlink("loop", tmp_path / "loop")
    (tmp_path / "deep").write_bytes(b"[" * 3000 + b"]" * 3000 + b"\n")
    (tmp_path / "surrogate-key").write_bytes(b'{"\\ud800":1}\n')
    (tmp_path / "bad\x1bname\n").write_bytes(b"not json\n")
    return tmp_path


def _invoke(command: click.Command, args: Sequence[str]) -> tuple[int, str]:
    result = CliRunner().invoke(command, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize(("name", "command", "head"), COMMANDS, ids=IDS)
@pytest.mark.parametrize(("file", "reason"), [
    ("fifo", "is not a regular file (a FIFO, device or socket)"),
    ("dir", "is a directory"),
    ("loop", "is a symlink loop"),
])
def test_a_non_regular_file_is_one_named_line_and_exit_one(
    odd_files: Path, name: str, command: click.Command, head: Sequence[str], file: str, reason: str,
) -> None:
    code, output = _invoke(command, [*head, str(odd_files / file)])
    assert code == 1
    assert output.count("\n") == 1
    assert output.rstrip("\n").endswith(f"{file}: {reason}")
    assert str(odd_files) not in output


@pytest.mark.parametrize(("name", "command", "head"), COMMANDS, ids=IDS)
@pytest.mark.parametrize("file", ["deep", "surrogate-key", "bad\x1bname\n"])
def test_hostile_content_and_names_get_a_named_error_never_a_traceback(
    odd_files: Path, name: str, command: click.Command, head: Sequence[str], file: str,
) -> None:
    code, output = _invoke(command, [*head, str(odd_files / file)])
    assert code == 1
    assert "\x1b" not in output and "Traceback" not in output
    first = output.splitlines()[0]
    assert first.split(":")[0].isupper() or "integrity: " in output


def _mock_script(path: Path) -> None:
    path.write_text('{"type":"dsh-mock-script","version":1,"steps":[{"tool":"a","args":{}}]}')


def _tool_cassette(path: Path) -> None:
    config = parse_tool_config({"mode": "record", "file": path.name, "include": ["a"]}, cwd=str(path.parent))
    session = ToolCassetteSession.open(config)
    outcome = HostToolResult(isError=False, content=msgspec.Raw(b"[]"), value=msgspec.Raw(b"1"))
    session.on_execute(ExecuteEvent("h", "root/0", "a", b"{}"))
    session.on_post_execute(PostEvent("h", "root/0", "a", outcome))
    session.on_result(ResultEvent("h", "root/0", "a", outcome))
    assert session.close().published


def _model_cassette(path: Path) -> None:
    config = ModelCassetteConfig(mode="record", file=str(path))
    assert ModelCassetteEngine.open(config, cwd="/project", host_version=HOST).close().published


def _subagent_cassette(path: Path) -> None:
    # Record writes nothing before the first start, so one child run goes in.
    cassette = SubagentCassetteEngine.open(parse_subagent_config({"mode": "record", "file": str(path)}),
                                     host_version=HOST, clock=lambda: 1_800_000_000.0)
    cassette.on_upstream(Upstream(name="spawn", continuable=True, inherits_parent_context=False,
                                  capabilities=Capabilities(outputSchema=True, depthLimit=True, toolFilter=True,
                                                            persona=True)))
    start = msgspec.convert({"request": {"prompt": [{"type": "text", "text": "go"}]}, "parentSessionId": "s-1",
                             "parentEvents": []}, StartRequest)
    decision = cassette.on_start(start)
    assert isinstance(decision, Forward)
    cassette.on_outcome(decision.handle, SettledRun(
        published=True, local=True,
        timing=Timing(startedAt="2027-01-15T08:00:00.000Z", startLatencyMs=1.0, durationMs=2.0),
        outcome=ResultOutcome(result={"output": [], "stopReason": "completed"}, redactions=0),
    ))
    assert cassette.close().errors == ()


@pytest.mark.parametrize(("name", "command", "head", "write", "first"), [
    ("tool verify", tool, ["verify"], _tool_cassette, "valid: link: dsh-tool-cassette v5: 1 calls"),
    ("tool inspect", tool, ["inspect"], _tool_cassette, "protocol: dsh-tool-cassette v5\ncalls: 1"),
    ("mock validate", mock, ["validate"], _mock_script, "ok: link (canonical-json): 1 executable step(s)"),
    ("mock convert", mock, ["convert"], _mock_script, "{\"steps\":[{\"args\":{},\"tool\":\"a\"}]"),
    ("subagent verify", subagent, ["verify"], _subagent_cassette, "ok: link: 1 interaction(s), chain intact"),
    ("subagent inspect", subagent, ["inspect"], _subagent_cassette, "link: 1 interaction(s)\n"),
    ("model verify", model, ["verify"], _model_cassette, "valid: dsh-model-cassette v2: 0 calls (none)"),
    ("model inspect", model, ["inspect"], _model_cassette, "protocol: dsh-model-cassette v2"),
], ids=IDS)
def test_a_symlink_to_a_valid_file_is_followed(
    tmp_path: Path, name: str, command: click.Command, head: Sequence[str], write: Callable[[Path], None],
    first: str,
) -> None:
    write(tmp_path / "target")
    os.symlink("target", tmp_path / "link")
    code, output = _invoke(command, [*head, str(tmp_path / "link")])
    assert code == 0, output
    assert output.startswith(first), output
    assert str(tmp_path) not in output


@pytest.mark.parametrize(("command", "args"), [
    (tool, ["verify"]), (mock, ["validate"]), (subagent, ["diff", "only-one"]), (tool, ["nope"]),
    (model, ["diff", "only-one"]), (sidecar, ["run"]), (sidecar, ["nope"]),
])
def test_usage_errors_exit_two(command: click.Command, args: Sequence[str]) -> None:
    assert CliRunner().invoke(command, args).exit_code == 2


def test_one_table_for_every_console_script() -> None:
    assert (cli_errors.EXIT_OK, cli_errors.EXIT_FAILED, cli_errors.EXIT_USAGE, cli_errors.EXIT_DIFFERENT,
            cli_errors.EXIT_TIMEOUT) == (0, 1, 2, 2, 124)
    # Both 3s live in the one table (issue 28: they were two private constants).
    assert (cli_errors.EXIT_METADATA, cli_errors.EXIT_MOCK_REFUSED) == (3, 3)
    assert "EXIT_METADATA" in (cli_errors.__doc__ or "") and "EXIT_MOCK_REFUSED" in (cli_errors.__doc__ or "")


class _Broken(SidecarError):
    code = "BROKEN"


def test_a_named_failure_is_its_one_line_on_stderr_and_exit_one() -> None:
    @click.command()
    def broken() -> None:
        raise NamedFailure(_Broken("thing: fix it"), context="tool: ")

    result = CliRunner().invoke(broken, [])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "tool: BROKEN: thing: fix it\n")


def test_dsh_sidecar_exits_one_on_a_named_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # HOST_NOT_FOUND used to exit 2, as if the command line were wrong.
    monkeypatch.setenv("DSH_SIDECAR_HOST", str(tmp_path))
    result = CliRunner().invoke(sidecar, ["run", "--cwd", str(tmp_path), "hello"])
    assert result.exit_code == 1
    assert result.stderr.startswith("dsh-sidecar: HOST_NOT_FOUND: no DSH host at $DSH_SIDECAR_HOST;")
    assert result.stderr.count("\n") == 1 and result.stdout == ""


def test_dsh_sidecar_sessions_show_without_a_session_exits_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(sidecar, ["sessions", "show", "--cwd", str(tmp_path), "--dsh-home", str(tmp_path)])
    assert (result.exit_code, result.stderr) == (
        1, "dsh-sidecar: SESSION_NOT_FOUND: no session for this folder; list them with `dsh-sidecar sessions list`\n",
    )



def test_run_help_names_the_variables_that_choose_the_host_and_the_dsh_home() -> None:
    code, output = _invoke(sidecar, ["run", "--help"])
    assert code == 0
    text = " ".join(output.split())
    assert "$DSH_SIDECAR_HOST (a host prefix), else the .host found from --cwd or this folder upwards" in text
    assert "The DSH home: $DSH_HOME, else the host's dsh-home." in text
