"""The replay path policy (docs/mock.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_sidecar.python_core.errors import ConfigError
from dsh_sidecar.python_core.mock.errors import PathRefused
from dsh_sidecar.python_core.mock.paths import resolve_replay_path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "work"
    (cwd / "logs").mkdir(parents=True)
    (cwd / "logs" / "s.jsonl").write_bytes(b"{}")
    (tmp_path / "outside.jsonl").write_bytes(b"{}")
    return cwd


def refused(arg: str, cwd: Path | str, **kwargs: object) -> PathRefused:
    with pytest.raises(PathRefused) as caught:
        resolve_replay_path(arg, session_cwd=str(cwd), **kwargs)  # type: ignore[arg-type]
    return caught.value


def test_relative_paths_resolve_against_the_session_cwd(workspace: Path) -> None:
    assert resolve_replay_path("logs/s.jsonl", session_cwd=str(workspace)) == str(
        workspace / "logs" / "s.jsonl"
    )


def test_absolute_paths_inside_the_cwd_are_allowed(workspace: Path) -> None:
    path = str(workspace / "logs" / "s.jsonl")
    assert resolve_replay_path(path, session_cwd=str(workspace)) == path


def test_absolute_paths_inside_an_allowed_root_are_allowed(workspace: Path) -> None:
    root = workspace.parent
    path = str(root / "outside.jsonl")
    assert resolve_replay_path(path, session_cwd=str(workspace), allowed_roots=[str(root)]) == path


@pytest.mark.parametrize(
    ("arg", "rule"),
    [
        ("", "invalid-path"),
        ("a\x00b", "invalid-path"),
        ("~/s.jsonl", "home-expansion"),
        ("../outside.jsonl", "parent-segment"),
        ("logs/../logs/s.jsonl", "parent-segment"),
        ("logs/missing.jsonl", "not-a-regular-file"),
        ("logs", "not-a-regular-file"),
    ],
)
def test_lexical_rules_refuse_by_name(workspace: Path, arg: str, rule: str) -> None:
    assert refused(arg, workspace).rule == rule


def test_absolute_paths_outside_every_root_are_refused(workspace: Path) -> None:
    error = refused(str(workspace.parent / "outside.jsonl"), workspace)
    assert str(error) == (
        "PATH_REFUSED: replay path refused by rule outside-allowed-roots: the path is outside "
        "the session working directory and the allowed roots"
    )
    assert str(workspace) not in str(error)


def test_a_symlink_leading_outside_is_refused(workspace: Path) -> None:
    os.symlink(workspace.parent / "outside.jsonl", workspace / "logs" / "link.jsonl")
    error = refused("logs/link.jsonl", workspace)
    assert error.rule == "symlink-escape"
    assert str(workspace.parent) not in str(error)


def test_a_symlink_staying_inside_resolves_to_its_target(workspace: Path) -> None:
    os.symlink(workspace / "logs" / "s.jsonl", workspace / "alias.jsonl")
    assert resolve_replay_path("alias.jsonl", session_cwd=str(workspace)) == str(
        workspace / "logs" / "s.jsonl"
    )


def test_a_symlinked_session_cwd_is_compared_by_its_real_path(workspace: Path) -> None:
    linked = workspace.parent / "linked-work"
    os.symlink(workspace, linked)
    assert resolve_replay_path("logs/s.jsonl", session_cwd=str(linked)) == str(
        workspace / "logs" / "s.jsonl"
    )


def test_a_relative_path_without_a_session_cwd_is_refused(workspace: Path) -> None:
    assert refused("logs/s.jsonl", "").rule == "no-session-cwd"
    assert refused("logs/s.jsonl", "relative/cwd").rule == "no-session-cwd"


def test_a_fifo_is_not_a_regular_file(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe.jsonl")
    assert refused("pipe.jsonl", workspace).rule == "not-a-regular-file"


def test_a_relative_allowed_root_is_a_config_error(workspace: Path) -> None:
    with pytest.raises(ConfigError):
        resolve_replay_path("logs/s.jsonl", session_cwd=str(workspace), allowed_roots=["rel"])


def test_injected_realpath_and_is_file_replace_the_file_system() -> None:
    assert (
        resolve_replay_path(
            "s.jsonl", session_cwd="/w", realpath=lambda path: path, is_file=lambda path: True
        )
        == "/w/s.jsonl"
    )
