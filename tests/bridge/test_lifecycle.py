"""The connection lifecycle from the method table: initialize once, then the hooks it enabled."""

from __future__ import annotations

import pytest

from dsh_sidecar.bridge.transport.protocol import (
    AlreadyInitialized,
    HookNotEnabled,
    InitializeResult,
    Lifecycle,
    NotInitialized,
)


def ready(*hooks: str) -> Lifecycle:
    lifecycle = Lifecycle()
    lifecycle.admit("initialize")
    lifecycle.initialized(InitializeResult(protocolVersion=1, hooks=list(hooks), sidecarVersion="t"))  # type: ignore[arg-type]
    return lifecycle


def test_a_new_connection_admits_initialize_and_shutdown_only() -> None:
    lifecycle = Lifecycle()
    lifecycle.admit("shutdown")
    with pytest.raises(NotInitialized, match=r"^NOT_INITIALIZED: tools/execute arrived before initialize succeeded"):
        lifecycle.admit("tools/execute")
    lifecycle.admit("initialize")
    assert lifecycle.state == "initializing"


def test_while_initializing_hooks_and_a_second_initialize_are_refused() -> None:
    lifecycle = Lifecycle()
    lifecycle.admit("initialize")
    with pytest.raises(AlreadyInitialized):
        lifecycle.admit("initialize")
    with pytest.raises(NotInitialized):
        lifecycle.admit("llm/stream")
    lifecycle.admit("shutdown")
    assert lifecycle.state == "initializing"


def test_ready_admits_exactly_the_enabled_groups() -> None:
    lifecycle = ready("tools", "llm")
    for method in ("tools/execute", "tools/result", "llm/stream", "mock/route", "shutdown", "no/such"):
        lifecycle.admit(method)
    with pytest.raises(HookNotEnabled) as caught:
        lifecycle.admit("subagent/start")
    assert str(caught.value) == (
        "HOOK_NOT_ENABLED: subagent/start belongs to the subagent hooks, which initialize did not enable "
        "(enabled: tools, llm); install only the hooks the initialize reply names"
    )
    with pytest.raises(AlreadyInitialized):
        lifecycle.admit("initialize")


def test_a_failed_initialize_leaves_hooks_refused_for_good() -> None:
    lifecycle = Lifecycle()
    lifecycle.admit("initialize")
    lifecycle.initialized(None)
    assert lifecycle.state == "failed"
    with pytest.raises(NotInitialized):
        lifecycle.admit("tools/execute")
    with pytest.raises(AlreadyInitialized):
        lifecycle.admit("initialize")
    lifecycle.admit("shutdown")
