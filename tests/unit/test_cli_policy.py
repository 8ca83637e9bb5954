"""One policy for every CLI: a named one-line error, escaped names, regular files, no hang.

Exit codes (``python_core.cli_errors``): 0 ok, 1 a named error (invalid, unreadable), 2 usage;
``diff`` 2 different or not comparable; ``dsh-sidecar run`` 124 on its timeout.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bridge.cli import main as sidecar
from python_core import cli_errors
from python_core.cli_errors import NamedFailure
from python_core.errors import SidecarError
from python_core.mock.cli import mock
from python_core.model_cassette.cli import cli as model
from python_core.subagent_cassette.cli import cli as subagent
from python_core.tool_cassette.cli import main as tool

COMMANDS: list[tuple[str, click.Command, Sequence[str]]] = [
    ("tool verify", tool, ["verify"]),
    ("tool inspect", tool, ["inspect"]),
    ("mock validate", mock, ["validate"]),
    ("mock convert", mock, ["convert"]),
    ("subagent verify", subagent, ["verify"]),
    ("subagent inspect", subagent, ["inspect"]),
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


def test_a_symlink_to_a_valid_script_is_followed(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"type":"dsh-mock-script","version":1,"steps":[{"tool":"a","args":{}}]}')
    os.symlink("s.json", tmp_path / "link.json")
    code, output = _invoke(mock, ["validate", str(tmp_path / "link.json")])
    assert code == 0
    assert output.startswith("ok: link.json (canonical-json): 1 executable step(s)")


@pytest.mark.parametrize(("command", "args"), [
    (tool, ["verify"]), (mock, ["validate"]), (subagent, ["diff", "only-one"]), (tool, ["nope"]),
    (model, ["diff", "only-one"]), (sidecar, ["run"]), (sidecar, ["nope"]),
])
def test_usage_errors_exit_two(command: click.Command, args: Sequence[str]) -> None:
    assert CliRunner().invoke(command, args).exit_code == 2


def test_one_table_for_every_console_script() -> None:
    assert (cli_errors.EXIT_OK, cli_errors.EXIT_FAILED, cli_errors.EXIT_USAGE, cli_errors.EXIT_DIFFERENT,
            cli_errors.EXIT_TIMEOUT) == (0, 1, 2, 2, 124)


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

