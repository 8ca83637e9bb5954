"""Factories for model cassette tests: requests, chunk arrays and recorded cassettes."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.model_cassette import ModelCassetteConfig, ModelCassetteEngine

# Appears in every factory prompt and answer; privacy tests grep CLI output for it.
SECRET = "hunter2-s3cret"
CWD = "/srv/example/project"
Factory = Callable[..., Path]


def request(*, text: str = f"weather in Paris {SECRET}", tools: Sequence[str] = ("weather_lookup", "echo"),
            purpose: str | None = None, extra: Sequence[dict[str, Any]] = (), **options: Any) -> dict[str, Any]:
    """A ``GenerateOptions`` as the shim sends it (``signal`` already dropped)."""
    out: dict[str, Any] = {
        "provider": "deepseek-official", "model": "deepseek-v4-flash", "sessionId": "session-1234",
        "system": f"You work in {CWD}.",
        "messages": [
            {"id": "m-1", "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": text}]},
            *extra,
        ],
        "tools": [{"name": t, "description": f"the {t} tool", "parameters": {"type": "object"}} for t in tools],
        "maxTokens": 256000,
        **options,
    }
    if purpose is not None:
        out["purpose"] = purpose
    return out


def text_chunks(text: str = f"It is sunny {SECRET}") -> bytes:
    """A complete text answer."""
    return json.dumps([
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]).encode()


def tool_chunks(name: str = "weather_lookup") -> bytes:
    """One complete tool call."""
    block = {"type": "tool-call", "id": "call_1", "name": name, "arguments": '{"city":"Paris"}'}
    return json.dumps([
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "block-end", "index": 0, "block": block},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]).encode()


def config(path: Path, mode: str = "record", **kw: Any) -> ModelCassetteConfig:
    return ModelCassetteConfig(mode=mode, file=str(path), **kw)  # type: ignore[arg-type]


def record(path: Path, calls: Sequence[tuple[dict[str, Any], bytes]], **kw: Any) -> Path:
    """Record ``calls`` (request, chunks) in order and publish."""
    cassette = ModelCassetteEngine.open(config(path, **kw), cwd=CWD, host_version="0.1.0-rc.8")
    for req, chunks in calls:
        decision = cassette.admit(req)
        handle = msgspec.structs.asdict(decision)["handle"]
        n = len(json.loads(chunks))
        cassette.recorded(handle, msgspec.Raw(chunks), [float(i) for i in range(n)], complete=True)
    report = cassette.close()
    assert report.published and not report.errors
    return path


class Kit:
    """The factories above, for tests (importlib mode: tests cannot import conftest)."""

    SECRET = SECRET
    CWD = CWD
    request = staticmethod(request)
    text_chunks = staticmethod(text_chunks)
    tool_chunks = staticmethod(tool_chunks)
    config = staticmethod(config)
    record = staticmethod(record)


@pytest.fixture
def kit() -> type[Kit]:
    """The factory namespace."""
    return Kit


@pytest.fixture
def make_cassette(tmp_path: Path) -> Factory:
    """Factory: a published cassette of a tool call, then a text answer, plus a title call."""
    counter = iter(range(1000))

    def make(calls: Sequence[tuple[dict[str, Any], bytes]] | None = None, **kw: Any) -> Path:
        default = [
            (request(), tool_chunks()),
            (request(purpose="session-title", tools=()), text_chunks("Paris weather")),
            (request(extra=[{"id": "m-2", "role": "assistant", "source": {"kind": "model"}, "content": []}]),
             text_chunks()),
        ]
        return record(tmp_path / f"c{next(counter)}.ndjson", default if calls is None else calls, **kw)

    return make
