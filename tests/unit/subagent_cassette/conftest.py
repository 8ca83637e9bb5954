"""Factories for subagent cassette tests: start requests, outcomes, recorded files, documents."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec
import pytest

from dsh_sidecar.python_core.canonical import canonical_bytes, digest
from dsh_sidecar.python_core.subagent_cassette.config import parse_fields
from dsh_sidecar.python_core.subagent_cassette.engine import (
    Forward,
    SettledRun,
    SubagentCassetteEngine,
    Upstream,
)
from dsh_sidecar.python_core.subagent_cassette.format import (
    Capabilities,
    Outcome,
    RecordedError,
    ResultErrorOutcome,
    ResultOutcome,
    StartErrorOutcome,
    Timing,
)
from dsh_sidecar.python_core.subagent_cassette.identity import StartRequest

HOST = "0.1.0-rc.8"
SECRET = "sk-live0123456789abcdefghijkl"
PROMPT = "Audit the payment module, password hunter2 is private prose"
BODY = "child says the ledger is balanced"


class Clock:
    """A manual clock: ``now`` seconds since the epoch."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ids() -> Callable[[], str]:
    counter = iter(range(1, 1_000_000))
    return lambda: f"00000000-0000-4000-8000-{next(counter):012d}"


def start_request(
    label: str | None = "audit",
    text: str = PROMPT,
    parent: str = "session-1",
    events: Sequence[dict[str, Any]] | None = None,
    **extra: Any,
) -> StartRequest:
    request: dict[str, Any] = {"prompt": [{"type": "text", "text": text}], "maxDepth": 3, **extra}
    if label is not None:
        request["label"] = label
    return msgspec.convert(
        {
            "request": request,
            "parentSessionId": parent,
            "parentEvents": list(events)
            if events is not None
            else [
                {
                    "type": "user/message",
                    "data": {
                        "content": [{"type": "text", "text": "go"}],
                        "source": {"kind": "user"},
                    },
                }
            ],
        },
        StartRequest,
    )


def run_outcome(
    text: str = BODY,
    stop: str = "completed",
    kind: str = "result",
    published: bool = True,
    local: bool = True,
    duration: float = 40.0,
    **result_extra: Any,
) -> SettledRun:
    outcome: Outcome
    error = RecordedError(name="Error", message=text, code="OFFLINE")
    if kind == "result":
        result = {"output": [{"type": "text", "text": text}], "stopReason": stop, **result_extra}
        outcome = ResultOutcome(result=result, redactions=0)
    elif kind == "start-error":
        outcome = StartErrorOutcome(error=error)
    else:
        outcome = ResultErrorOutcome(error=error)
    return SettledRun(
        published=published,
        local=local,
        timing=Timing(startedAt="2027-01-15T08:00:00.000Z", startLatencyMs=4.0, durationMs=duration),
        outcome=outcome,
    )


UPSTREAM = Upstream(
    name="spawn",
    capabilities=Capabilities(outputSchema=True, depthLimit=True, toolFilter=True, persona=True),
    inherits_parent_context=False,
    continuable=True,
)


@pytest.fixture
def make_start() -> Callable[..., StartRequest]:
    return start_request


@pytest.fixture
def make_outcome() -> Callable[..., SettledRun]:
    return run_outcome


@pytest.fixture
def open_cassette(
    clock: Clock, ids: Callable[[], str]
) -> Iterator[Callable[..., SubagentCassetteEngine]]:
    opened: list[SubagentCassetteEngine] = []

    def factory(path: Path, mode: str = "record", **config: Any) -> SubagentCassetteEngine:
        cassette = SubagentCassetteEngine.open(
            parse_fields({"mode": mode, "file": str(path), **config}),
            host_version=HOST,
            clock=clock,
            make_id=ids,
        )
        if mode == "record":
            cassette.on_upstream(UPSTREAM)
        opened.append(cassette)
        return cassette

    yield factory


@pytest.fixture
def record_file(
    open_cassette: Callable[..., SubagentCassetteEngine], tmp_path: Path
) -> Callable[..., Path]:
    """Record ``calls`` (start, outcome) pairs sequentially into a new cassette."""

    def factory(
        calls: Sequence[tuple[StartRequest, SettledRun]] | None = None,
        name: str = "rec.cassette.jsonl",
        **config: Any,
    ) -> Path:
        path = tmp_path / name
        cassette = open_cassette(path, **config)
        for start, outcome in calls if calls is not None else [(start_request(), run_outcome())]:
            decision = cassette.on_start(start)
            assert isinstance(decision, Forward)
            cassette.on_outcome(decision.handle, outcome)
        report = cassette.close()
        assert report.errors == ()
        return path

    return factory


def seal(records: Sequence[dict[str, Any]]) -> bytes:
    """Re-hash and re-chain ``records`` (header first) into a document's bytes."""
    out: list[bytes] = []
    previous = ""
    for index, record in enumerate(records):
        body = {k: v for k, v in record.items() if k != "hash"}
        if index > 0:
            body["previousHash"] = previous
        previous = digest(body)
        out.append(canonical_bytes({**body, "hash": previous}) + b"\n")
    return b"".join(out)


def read_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def records_of() -> Callable[[Path], list[dict[str, Any]]]:
    return read_records


@pytest.fixture
def sealed() -> Callable[[Sequence[dict[str, Any]]], bytes]:
    return seal


@pytest.fixture
def recorded(record_file: Any, make_start: Any, make_outcome: Any) -> Path:
    """A cassette of two recorded delegations (labels ``a`` and ``b``)."""
    path: Path = record_file([(make_start(label="a"), make_outcome()), (make_start(label="b"), make_outcome())])
    return path
