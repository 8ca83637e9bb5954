"""A Python function as the sidecar takes it: the ``file.py:function`` it imports in its own process."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["filter_entry", "function_reference"]


def function_reference(label: str, function: Callable[..., Any] | str) -> str:
    """``file.py:function`` for a module-level function: the sidecar imports it from its file."""
    if isinstance(function, str):
        return function
    qualname = getattr(function, "__qualname__", "")
    try:
        file = inspect.getsourcefile(function)
    except TypeError:
        file = None
    if file is None or not qualname or "<" in qualname or getattr(function, "__module__", "") == "__main__":
        # The sidecar imports the function's file: a script's own functions would rerun the script.
        raise ValueError(f"{label} must be a module-level function of an importable module, not of "
                         "__main__ (it runs in the sidecar process)")
    return f"{file}:{qualname}"


def filter_entry(index: int, entry: Any) -> Any:
    """A ``filters`` entry as the row takes it: a function becomes ``{"call": "file.py:function"}``."""
    if callable(entry):
        return {"call": function_reference(f"filters[{index}]", entry)}
    if isinstance(entry, Mapping) and callable(entry.get("call")):
        return {**entry, "call": function_reference(f"filters[{index}]", entry["call"])}
    return entry

