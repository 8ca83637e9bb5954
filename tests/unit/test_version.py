"""`--version` on every command and group, and one version for the package (issue 22)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

import dsh_sidecar
from dsh_sidecar.bridge.api.cli import main as sidecar_cli
from dsh_sidecar.python_core import __version__
from dsh_sidecar.python_core.mock.cli import mock as mock_cli
from dsh_sidecar.python_core.model_cassette.cli import cli as model_cassette_cli
from dsh_sidecar.python_core.subagent_cassette.cli import cli as subagent_cassette_cli
from dsh_sidecar.python_core.tool_cassette.cli import main as tool_cassette_cli


@pytest.mark.parametrize(
    ("command", "name"),
    [(sidecar_cli, "dsh-sidecar"), (tool_cassette_cli, "dsh-tool-cassette"),
     (subagent_cassette_cli, "dsh-subagent-cassette"), (mock_cli, "mock"), (model_cassette_cli, "model-cassette")],
)
def test_every_command_prints_its_version(command: click.Group, name: str) -> None:
    result = CliRunner().invoke(command, ["--version"], prog_name=name)
    assert (result.exit_code, result.output) == (0, f"{name} {__version__}\n")


def test_the_package_version_is_the_one_version() -> None:
    assert dsh_sidecar.__version__ == __version__
    assert __version__.count(".") == 2
