"""Seeded, bounded fuzz of the session importer: a cassette that verifies, or a named refusal.

``DSH_FUZZ_SEED`` picks the seed (printed either way). 3,000 logs derived from the unit tests'
two-step weather turn (members replaced by values of other types, events dropped, duplicated or
moved, storage rows and surface ops bent, chunks of another step spliced in) go through
``refuse_other_profile`` (half of them), ``one_turn``, ``calls_of``, ``model_lines``,
``module_source`` (whose module must compile) and ``tool_lines``; 200 real-log byte mutations (of
the three rc.8 logs under ``tests/unit/session_import/data``: two headless, one `dsh web`) go through
``decode_session_log`` first. The contract: the lines pass ``verify``'s checks (``model_lines``
runs them) and the module compiles, or one of the import's named errors is raised
(``IMPORT_UNFAITHFUL``, ``IMPORT_PRIVATE``, ``MODEL_REQUEST_INVALID``, ``NON_CANONICAL_JSON``,
``SESSION_LOG_INVALID``); never another exception. 2,000 dsh-llm-replay override documents built
from a real log's calls and bent go through ``check_override``: an entry count, or
``IMPORT_UNFAITHFUL: override: ...``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import zstandard

from dsh_sidecar.python_core.errors import CanonicalJsonError
from dsh_sidecar.python_core.filters import parse_filters
from dsh_sidecar.python_core.model_request import ModelRequestInvalid
from dsh_sidecar.python_core.session_import import (
    ImportPrivate,
    ImportUnfaithful,
    calls_of,
    check_override,
    model_lines,
    module_source,
    one_turn,
    refuse_other_profile,
    tool_lines,
)
from dsh_sidecar.python_core.session_log import SessionLogInvalid, decode_session_log

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261205"))
LOGS = 3_000
BYTE_LOGS = 200
DATA = Path(__file__).resolve().parents[1] / "unit" / "session_import" / "data"
NAMED = (ImportUnfaithful, ImportPrivate, ModelRequestInvalid, CanonicalJsonError, SessionLogInvalid)
FILTERS = parse_filters(["credentials"])


def _base() -> list[dict[str, Any]]:
    # The unit tests' log, imported by path so the fuzz and the unit tests share one shape.
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_unit", DATA.parent / "test_session_import.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    events: list[dict[str, Any]] = module._log()
    return events


def _value(rand: random.Random) -> Any:
    return rand.choice([None, True, -1, 0, 2**60, 1.5, "", "x", "/srv/example/project", "\ud800", [], {}, [1, "a"],
                        {"op": "replace", "start": 0, "end": 0}, "append", {"type": "finish"}])


def _containers(value: Any, out: list[Any]) -> list[Any]:
    if isinstance(value, dict | list):
        out.append(value)
        for child in value.values() if isinstance(value, dict) else value:
            _containers(child, out)
    return out


def _mutate(rand: random.Random, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    events = copy.deepcopy(events)
    for _ in range(rand.randint(1, 3)):
        move = rand.random()
        if move < 0.55 and events:
            target = rand.choice(_containers(rand.choice(events), []))
            if isinstance(target, dict) and target:
                target[rand.choice(list(target))] = _value(rand)
            elif isinstance(target, list) and target:
                target[rand.randrange(len(target))] = _value(rand)
        elif move < 0.7 and events:
            del events[rand.randrange(len(events))]
        elif move < 0.85 and events:
            events.insert(rand.randrange(len(events) + 1), copy.deepcopy(rand.choice(events)))
        elif events:
            events.insert(rand.randrange(len(events) + 1), events.pop(rand.randrange(len(events))))
    return events


def _import(events: list[dict[str, Any]], rand: random.Random) -> None:
    try:
        if rand.random() < 0.5:  # as the CLI does; else past it, so a web log reaches the parsers below
            refuse_other_profile(events)
        events = one_turn(events, 1 if rand.random() < 0.5 else None)
        log = calls_of(events)
        model_lines(log, filters=FILTERS if rand.random() < 0.5 else (),
                    request_view="full" if rand.random() < 0.5 else "metadata")
        compile(module_source(events, session_id="s", cwd=log.cwd, module_stem="t", filters=[]), "t.py", "exec")
    except NAMED as error:
        assert str(error).split(":", 1)[0].isupper(), str(error)
    try:
        # The tool cassette of the same log: lines verify checks (tool_lines runs them) or a named refusal.
        tool_lines(events, ["*"] if rand.random() < 0.5 else ["weather_lookup"], cwd=str(events[0].get("cwd", "")),
                   filters=FILTERS if rand.random() < 0.5 else (), children=[events] if rand.random() < 0.1 else [])
    except NAMED as error:
        assert str(error).split(":", 1)[0].isupper(), str(error)


def test_fuzz_mutated_logs_import_or_are_refused_by_name() -> None:
    print(f"import fuzz seed: {SEED} (set DSH_FUZZ_SEED to change it)", file=sys.stderr)
    rand = random.Random(SEED)
    base = _base()
    for _ in range(LOGS):
        # Through bytes, as the CLI reads a log: what no log can hold (a lone surrogate) is refused there.
        data = b"".join(json.dumps(e).encode() + b"\n" for e in _mutate(rand, base))
        try:
            events = decode_session_log(data)
        except SessionLogInvalid:
            continue
        _import(events, rand)


def test_fuzz_mutated_real_log_bytes_import_or_are_refused_by_name() -> None:
    rand = random.Random(SEED + 1)
    logs = [zstandard.ZstdDecompressor().decompressobj().decompress(p.read_bytes())
            for p in sorted(DATA.glob("*.session.jsonl.zstd"))]
    for _ in range(BYTE_LOGS):
        data = bytearray(rand.choice(logs))
        for _ in range(rand.randint(1, 4)):
            at = rand.randrange(len(data))
            data[at:at + rand.randint(0, 8)] = rand.choice([b"", b"{", b"]", b'"', b"\n", b"null", b"9", b"\\u"])
        try:
            events = decode_session_log(bytes(data))
        except SessionLogInvalid:
            continue
        _import(events, rand)


OVERRIDES = 2_000


def test_fuzz_mutated_override_documents_are_carried_or_refused_by_name() -> None:
    """``check_override`` over dsh-llm-replay documents built from a real log's calls, bent: an
    entry count, or ``IMPORT_UNFAITHFUL: override: ...``; never another exception."""
    rand = random.Random(SEED + 2)
    calls = calls_of(decode_session_log(_real_log())).calls
    entries = [{"kind": "chunks", "chunks": call.chunks} for call in calls]
    placeholder = {"kind": "chunks", "chunks": [{"type": "text-delta", "index": 0, "text": "{{fromRequest:(x)}}"}]}
    for _ in range(OVERRIDES):
        doc: Any = copy.deepcopy(rand.choice([
            {"patches": [{"at": n, "entry": entry} for n, entry in enumerate(entries) if rand.random() < 0.5]},
            list(entries), [placeholder], {"patches": [{"at": 0, "entry": {"kind": "hang"}}]},
        ]))
        for _ in range(rand.randint(0, 3)):
            target = rand.choice(_containers(doc, []))
            if isinstance(target, dict) and target:
                key = rand.choice(list(target))
                if rand.random() < 0.3:
                    del target[key]
                else:
                    target[key] = _value(rand)
            elif isinstance(target, list):
                target.append(_value(rand)) if rand.random() < 0.5 or not target else target.pop()
        data = json.dumps(doc).encode(errors="surrogatepass") if rand.random() < 0.95 else bytes(
            rand.randrange(256) for _ in range(rand.randint(0, 40)))
        try:
            assert check_override(data, calls) >= 0
        except ImportUnfaithful as refused:
            assert refused.field == "override" and str(refused).startswith("IMPORT_UNFAITHFUL: override: ")


def _real_log() -> bytes:
    from dsh_sidecar.python_core.session_bytes import decompress_frames

    return decompress_frames((DATA / "parallel.session.jsonl.zstd").read_bytes())
