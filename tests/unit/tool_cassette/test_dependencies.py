"""The dependency tracker: unselected calls using a selected call's outside effect are named."""

from __future__ import annotations

from dsh_sidecar.python_core.tool_cassette.dependencies import DependencyTracker


def test_a_read_of_a_file_a_selected_write_made_is_named_with_the_relative_path() -> None:
    deps = DependencyTracker("/w")
    assert deps.call("write", "root/0", '{"file_path": "a/b.txt", "content": "x"}', selected=True) is None
    named = deps.call("read", "root/1", '{"file_path": "/w/a/./b.txt"}', selected=False)
    assert named is not None and str(named) == (
        "TOOL_DEPENDENCY: unselected read at root/1 uses a/b.txt, which the selected write at root/0 made "
        "outside DSH; a replay serves write without doing it"
    )
    assert deps.call("read", "root/2", '{"file_path": "other.txt"}', selected=False) is None


def test_a_job_reader_after_a_selected_background_bash_is_named_and_a_foreground_one_is_not() -> None:
    deps = DependencyTracker("/w")
    deps.call("bash", "root/0", '{"command": "ls"}', selected=True)
    assert deps.call("job_output", "root/1", '{"job_id": "bash-1"}', selected=False) is None
    deps.call("bash", "root/2", '{"command": "sleep 9", "run_in_background": true}', selected=True)
    named = deps.call("job_kill", "root/3", '{"job_id": "bash-1"}', selected=False)
    assert named is not None and "selected bash at root/2" in str(named)


def test_unselected_effects_selected_readers_and_unreadable_arguments_name_nothing() -> None:
    deps = DependencyTracker("/w")
    deps.call("write", "root/0", '{"file_path": "a.txt"}', selected=False)
    assert deps.call("read", "root/1", '{"file_path": "a.txt"}', selected=False) is None
    deps.call("write", "root/2", '{"file_path": "b.txt"}', selected=True)
    assert deps.call("read", "root/3", '{"file_path": "b.txt"}', selected=True) is None
    assert deps.call("read", "root/4", "not json", selected=False) is None
    assert deps.call("read", "root/5", "[1]", selected=False) is None
    outside = deps.call("write", "root/6", '{"file_path": "/etc/x"}', selected=True)
    assert outside is None
    named = deps.call("edit", "root/7", '{"file_path": "/etc/x"}', selected=False)
    assert named is not None and "uses x," in str(named)  # never an absolute path
