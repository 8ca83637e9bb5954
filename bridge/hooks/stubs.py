"""The wire side of stubs: import the referenced functions, call them, answer ``serve``.

Rule (python_core/stubs.py): the import happens once at ``initialize`` (bridge/hooks/references.py);
a call decodes the arguments, calls the function on the reader (a stub must be quick and must
not block), and answers with the value or the named failure as a served result. Nothing of the function's
exception but its class name reaches a message.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from dsh_sidecar.bridge.hooks.references import resolve
from dsh_sidecar.python_core.canonical import canonical_bytes
from dsh_sidecar.python_core.errors import CanonicalJsonError, SidecarError
from dsh_sidecar.python_core.stubs import StubFailure, StubRaised, StubUnresolved

__all__ = ["Stubs"]

Stub = Callable[[Any], Any]


class Stubs:
    """The imported stubs of one sidecar, and the calls they served."""

    def __init__(self, functions: Mapping[str, Stub]) -> None:
        self.functions = dict(functions)
        self.served: dict[str, int] = {}
        self.errors: list[SidecarError] = []

    @classmethod
    def load(cls, refs: Mapping[str, str], cwd: str) -> Stubs:
        """Import every reference.

        Raises:
            StubUnresolved: a reference cannot be imported or is not callable.
        """
        return cls({tool: resolve(ref, cwd, functools.partial(StubUnresolved, tool)) for tool, ref in refs.items()})

    def __contains__(self, tool: str) -> bool:
        return tool in self.functions

    def call(self, tool: str, path: str, args_json: str) -> tuple[bytes | None, SidecarError | None]:
        """Run the stub: the served result's JSON, or the error that refuses the call."""
        self.served[tool] = self.served.get(tool, 0) + 1
        try:
            value = self.functions[tool](msgspec.json.decode(args_json))
            return canonical_bytes({"content": [], "isError": False, "value": value}), None
        except StubFailure as failure:
            body = {"content": [{"text": f"Error: {failure.message}", "type": "text"}], "isError": True,
                    "error": {"info": {"code": failure.code, "name": "HarnessError"}, "message": failure.message}}
            return canonical_bytes(body), None
        except CanonicalJsonError:
            error: SidecarError = StubRaised(tool, path, "returned a value with no JSON form")
        except Exception as exc:  # the user's function may raise anything
            error = StubRaised(tool, path, f"raised {type(exc).__name__}")
        self.errors.append(error)
        return None, error

    def note(self) -> str:
        """The close note: how many calls each stub served."""
        counts = ", ".join(f"{tool}: {count}" for tool, count in sorted(self.served.items()))
        return f"stubs: {sum(self.served.values())} calls served" + (f" ({counts})" if counts else "")
