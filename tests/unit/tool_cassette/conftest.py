"""Factories for tool cassette tests: configs, host results and recorded cassettes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import msgspec
import pytest

from dsh_sidecar.python_core.tool_cassette import (
    ExecuteEvent,
    HostToolResult,
    PostEvent,
    ResultEvent,
    ToolCassetteConfig,
    ToolCassetteSession,
    parse_config,
)
from dsh_sidecar.python_core.tool_cassette.engine import RecordSession, ToolContract
from dsh_sidecar.python_core.tool_cassette.format import ToolErrorInfo, ToolFailure

# Appears in arguments and values of every factory cassette; privacy tests grep for it.
SECRET = "hunter2-s3cret"


class Outcomes:
    """Host ``ToolExecutionResult`` builders."""

    @staticmethod
    def ok(value: bytes = b'{"temp":21.5}', contexts: Sequence[object] = ()) -> HostToolResult:
        return HostToolResult(
            isError=False,
            content=msgspec.Raw(b'[{"type":"text","text":"rendered"}]'),
            value=msgspec.Raw(value),
            additionalContexts=msgspec.Raw(msgspec.json.encode(list(contexts))) if contexts else msgspec.UNSET,
        )

    @staticmethod
    def fail(message: str = "disk on fire", code: str | None = "E_FIRE") -> HostToolResult:
        info = msgspec.UNSET if code is None else ToolErrorInfo(name="HarnessError", code=code)
        return HostToolResult(
            isError=True,
            content=msgspec.Raw(msgspec.json.encode([{"type": "text", "text": f"Error: {message}"}])),
            error=ToolFailure(message=message, info=info),
        )

    @staticmethod
    def abort(code: str = "ABORTED") -> HostToolResult:
        message = "tool call aborted" if code == "ABORTED" else "tool call aborted before dispatch"
        return HostToolResult(
            isError=True,
            content=msgspec.Raw(msgspec.json.encode([{"type": "text", "text": f"Error: {message}"}])),
            error=ToolFailure(message=message, info=ToolErrorInfo(name="AbortError", code=code)),
        )


class Call(msgspec.Struct, frozen=True):
    """One call for ``make_cassette``: identity plus the outcome the host produced."""

    tool: str = "weather_lookup"
    path: str = "root/0"
    args: bytes = b'{"city":"' + SECRET.encode() + b'","unit":"c"}'
    outcome: HostToolResult = Outcomes.ok(b'{"note":"' + SECRET.encode() + b'","temp":21.5}')


DEFAULT_CALLS = (
    Call(),
    Call(path="root/1", args=b'{"city":"Wuhan"}', outcome=Outcomes.fail()),
    Call(
        tool="mcp_fs_read",
        path="root/2",
        args=b'["a",1]',
        outcome=Outcomes.ok(b'"text"', contexts=[{"id": "m1", "role": "user", "content": []}]),
    ),
)


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., ToolCassetteConfig]:
    def make(
        mode: str = "record",
        file: str = "w.tool-cassette.jsonl",
        include: Sequence[str] = ("weather_*", "mcp_*_read"),
    ) -> ToolCassetteConfig:
        raw = {"mode": mode, "file": file, "include": list(include)}
        return parse_config(raw, cwd=str(tmp_path))

    return make


def drive(session: ToolCassetteSession, calls: Sequence[Call]) -> None:
    """Run ``calls`` one after another through execute, post-execute and result."""
    for index, call in enumerate(calls):
        handle = f"h{index}"
        session.on_execute(ExecuteEvent(handle, call.path, call.tool, call.args))
        session.on_post_execute(PostEvent(handle, call.path, call.tool, call.outcome))
        session.on_result(ResultEvent(handle, call.path, call.tool, call.outcome))


@pytest.fixture
def make_cassette(make_config: Callable[..., ToolCassetteConfig]) -> Callable[..., Path]:
    def make(
        calls: Sequence[Call] = DEFAULT_CALLS, file: str = "w.tool-cassette.jsonl",
        include: Sequence[str] = ("weather_*", "mcp_*_read"), contracts: Mapping[str, ToolContract] | None = None,
    ) -> Path:
        session = ToolCassetteSession.open(make_config("record", file, include))
        assert isinstance(session, RecordSession)
        for tool, contract in (contracts or {}).items():
            session.define(tool, contract)
        drive(session, calls)
        report = session.close()
        assert report.errors == ()
        return Path(session.config.file)

    return make


WEATHER_CONTRACT = ToolContract(
    description="Look up the weather.",
    parameters=msgspec.Raw(b'{"properties":{"city":{"type":"string"}},"type":"object"}'),
    output=msgspec.Raw(b'{"properties":{"temp":{"type":"number"}},"type":"object"}'),
    presentationMeta=True, timeoutMs=9000,
)


class Kit:
    """What test modules need from here (importlib mode cannot import conftest)."""

    WEATHER_CONTRACT = WEATHER_CONTRACT
    SECRET = SECRET
    Call = Call
    DEFAULT_CALLS = DEFAULT_CALLS
    ok = staticmethod(Outcomes.ok)
    fail = staticmethod(Outcomes.fail)
    abort = staticmethod(Outcomes.abort)
    drive = staticmethod(drive)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
