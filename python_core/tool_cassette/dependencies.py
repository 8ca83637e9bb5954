"""Unselected calls that depend on an outside effect of a selected one: named, never silent.

Rule: a replay serves a selected call without its body, so what the body did outside DSH's own
state (a file written by ``write``/``edit``/``str_replace_editor``, a background job started by
``bash`` with ``run_in_background``) does not happen. An unselected call that reads such a file
(``read``, ``edit``, ``write``, ``str_replace_editor`` on the same path) or a job
(``job_output``, ``job_kill``) after it depends on that effect. The tracker sees every call's
arguments at ``tools/execute`` in both modes; the bridge prints each dependency as a warning
when recording, and as an error when a dependent call fails on replay. The fix is always the
same: select both, or neither.
"""

from __future__ import annotations

import json
import os

from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["PATH_ARGUMENTS", "DependencyTracker", "ToolDependency"]

# The argument naming the file each built-in file tool touches (the headless profile's).
PATH_ARGUMENTS = {"read": "file_path", "write": "file_path", "edit": "file_path", "str_replace_editor": "path"}
_FILE_WRITERS = frozenset({"write", "edit", "str_replace_editor"})
_JOB_READERS = frozenset({"job_output", "job_kill"})


class ToolDependency(SidecarError):
    """An unselected call depends on an outside effect a replay of a selected call does not have."""

    code = "TOOL_DEPENDENCY"
    hint = "select both calls' tools in toolCassette.include, or neither (docs/builtin-tools.md)"

    def __init__(self, tool: str, path: str, effect: str, source: str, source_path: str) -> None:
        super().__init__(
            f"unselected {tool} at {path} {effect}, which the selected {source} at {source_path} "
            f"made outside DSH; a replay serves {source} without doing it"
        )


class DependencyTracker:
    """Remember the outside effects of selected calls; name the unselected calls that use them."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self._written: dict[str, tuple[str, str]] = {}
        self._job: tuple[str, str] | None = None

    def _file(self, tool: str, args: dict[str, object]) -> str | None:
        value = args.get(PATH_ARGUMENTS.get(tool, ""))
        return os.path.normpath(os.path.join(self.cwd, value)) if isinstance(value, str) and value else None

    def _shown(self, file: str) -> str:
        """The file relative to the cwd, or its base name (errors carry no absolute path)."""
        relative = os.path.relpath(file, self.cwd)
        return os.path.basename(file) if relative.startswith("..") else relative

    def call(self, tool: str, path: str, args_json: str, selected: bool) -> ToolDependency | None:
        """See a call entering ``tools/execute``; return the dependency an unselected one has."""
        if tool not in PATH_ARGUMENTS and tool != "bash" and tool not in _JOB_READERS:
            return None
        try:
            args = json.loads(args_json)
        except ValueError:
            return None
        if not isinstance(args, dict):
            return None
        file = self._file(tool, args)
        if selected:
            if file is not None and tool in _FILE_WRITERS:
                self._written.setdefault(file, (tool, path))
            if tool == "bash" and args.get("run_in_background") is True and self._job is None:
                self._job = (tool, path)
            return None
        if file is not None and file in self._written:
            source, source_path = self._written[file]
            return ToolDependency(tool, path, f"uses {self._shown(file)}", source, source_path)
        if tool in _JOB_READERS and self._job is not None:
            return ToolDependency(tool, path, "reads a background job", "bash", self._job[1])
        return None
