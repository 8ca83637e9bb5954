"""Replay preflight for nested/subagent tools (docs/mock.md, ``UNSUPPORTED_NESTED_TOOL``).

Rule: DSH rc.8's public ``ToolSchema`` (``name``, ``description``, ``parameters``) carries no
nested/subagent marker, so classification is by name. ``DEFAULT_NESTED_TOOLS`` lists the rc.8
tools that run child agents or dispatch nested calls under their shipped names; the bridge adds
renamed rows and plugin tools from configuration. A tool not named there is not classified, and
the replay makes no determinism claim about what it does inside.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from dsh_sidecar.python_core.canonical import pointer
from dsh_sidecar.python_core.mock.errors import UnsupportedNestedTool
from dsh_sidecar.python_core.mock.script import ParallelStep, Script, ToolStep

__all__ = ["DEFAULT_NESTED_TOOLS", "reject_nested_tools"]

# subagent: dsh-tool-subagent (child agent loop); workflow: dsh-tool-workflow (worker agents);
# ralph: dsh-tool-ralph (fresh child per round); run_code: Code Mode's nested dispatch transport.
DEFAULT_NESTED_TOOLS: Final = frozenset({"subagent", "workflow", "ralph", "run_code"})


def reject_nested_tools(
    script: Script, *, nested_tools: Collection[str] = DEFAULT_NESTED_TOOLS
) -> None:
    """Refuse a replay that would call a tool classified as nested/subagent.

    Args:
        script: the validated script about to be planned.
        nested_tools: names classified as nested/subagent (defaults plus configured ones).

    Raises:
        UnsupportedNestedTool: the first such call, with its JSON-pointer location.
    """
    for index, step in enumerate(script.steps):
        if isinstance(step, ToolStep) and step.tool in nested_tools:
            raise UnsupportedNestedTool(step.tool, pointer(["steps", index]))
        if isinstance(step, ParallelStep):
            for member_index, member in enumerate(step.parallel):
                if member.tool in nested_tools:
                    raise UnsupportedNestedTool(
                        member.tool, pointer(["steps", index, "parallel", member_index])
                    )
