"""Import the Python a test author names (stubs, filter functions) in the sidecar process.

Rule (python_core/references.py checks the text): ``file.py:function``, and ``module:function``
when the module is a file in the run's cwd (``module.py``, ``pkg/module.py``, a package's
``__init__.py``), are executed from that file afresh under a private module name, with the cwd
first on ``sys.path`` while it runs; any other module is imported (an installed package). It happens once per
run, when its session opens (a warm host runs many); a reference that cannot
be imported or does not name a callable is the caller's named error, built from a value-free
reason (the exception's class name only, never its text or the path).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import itertools
import os
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.tool_cassette.config import ToolCassetteConfig
from dsh_sidecar.python_core.tool_cassette.errors import FilterUnresolved

__all__ = ["resolve", "with_filter_functions"]


# Names of the user modules executed from files (a counter: never one name twice in a process).
_USER_MODULES = itertools.count()


def _local_file(cwd: str, module_ref: str) -> str | None:
    """The file ``module_ref`` names in ``cwd`` (``x.py``, or ``a.b`` as ``a/b.py`` or ``a/b/__init__.py``)."""
    if module_ref.endswith(".py"):
        return os.path.join(cwd, module_ref)
    base = os.path.join(cwd, *module_ref.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def resolve(ref: str, cwd: str, unresolved: Callable[[str], SidecarError]) -> Callable[..., Any]:
    """Import the callable ``ref`` names.

    Raises:
        the ``unresolved(reason)`` error: the module cannot be imported, or the name is not callable.
    """
    module_ref, _, function = ref.rpartition(":")
    try:
        local = _local_file(cwd, module_ref)
        if local is not None:
            # Executed afresh from the run's own folder: in a warm host, sessions in other folders
            # may name a module of theirs the same, and a test may have edited it since.
            name = f"dsh_sidecar_user_{next(_USER_MODULES)}"
            spec = importlib.util.spec_from_file_location(name, local)
            if spec is None or spec.loader is None:
                raise unresolved("the file cannot be imported")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            # The module's own imports of its siblings, while it runs; a warm host's sys.path does
            # not grow by a folder per run.
            added = cwd not in sys.path
            if added:
                sys.path.insert(0, cwd)
            try:
                spec.loader.exec_module(module)
            finally:
                if added:
                    sys.path.remove(cwd)
        else:
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
