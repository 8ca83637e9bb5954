"""Import the Python a test author names (stubs, filter functions) in the sidecar process.

Rule (python_core/references.py checks the text): ``module:function`` is imported with the DSH
cwd first on ``sys.path``; ``file.py:function`` is loaded from that file, relative to the DSH
cwd, under a private module name. It happens once, at ``initialize``; a reference that cannot
be imported or does not name a callable is the caller's named error, built from a value-free
reason (the exception's class name only, never its text or the path).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig
from dsh_sidecar.python_core.tool_cassette.errors import FilterUnresolved

__all__ = ["resolve", "with_filter_functions"]


def resolve(ref: str, cwd: str, unresolved: Callable[[str], SidecarError]) -> Callable[..., Any]:
    """Import the callable ``ref`` names.

    Raises:
        the ``unresolved(reason)`` error: the module cannot be imported, or the name is not callable.
    """
    module_ref, _, function = ref.rpartition(":")
    try:
        if module_ref.endswith(".py"):
            path = os.path.join(cwd, module_ref)
            name = f"dsh_sidecar_user_{len(sys.modules)}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise unresolved("the file cannot be imported")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            if cwd not in sys.path:
                sys.path.insert(0, cwd)
            module = importlib.import_module(module_ref)
    except SidecarError:
        raise
    except Exception as exc:  # the user's module may raise anything while it imports
        raise unresolved(f"importing its module raised {type(exc).__name__}") from None
    target: Any = module
    for part in function.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise unresolved("the reference does not name a callable")
    return target  # type: ignore[no-any-return]


def with_filter_functions(config: ToolCassetteConfig, cwd: str) -> ToolCassetteConfig:
    """``config`` with the functions its ``call`` filters name imported (each reference once).

    Raises:
        FilterUnresolved: a reference cannot be imported or is not callable (names the entry).
    """
    functions: dict[str, Callable[..., Any]] = {}
    for index, rule in enumerate(config.filters):
        if rule.call is not None and rule.call not in functions:
            functions[rule.call] = resolve(rule.call, cwd, functools.partial(FilterUnresolved, index))
    return msgspec.structs.replace(config, functions=functions) if functions else config
