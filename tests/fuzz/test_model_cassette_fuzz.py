"""Seeded, bounded fuzz of every input the model cassette reads: files, hook params, the lifecycle.

``DSH_FUZZ_SEED`` picks the seed (printed either way). The contract checked: files are
refused with ``MODEL_CASSETTE_INVALID`` (or ``MODEL_CASSETTE_IO``) and never a traceback, the
CLI exits 0-3, the engine raises only named ``SidecarError``s, and the real sidecar answers
``model/request`` on bad params, after ``shutdown`` and over a deep file by name, never ``INTERNAL``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
from click.testing import CliRunner

from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.model_cassette import ModelCassetteConfig, ModelCassetteEngine, load, verify_file
from dsh_sidecar.python_core.model_cassette.cli import cli
from dsh_sidecar.python_core.model_cassette.errors import ModelCassetteInvalid, ModelCassetteIOError

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261202"))
FILES = 200
REQUESTS = 3_000
# Header versions of every JSON type (an object one crashed the tool cassette's probe).
HEADER_VERSIONS = [b"1", b"true", b"9", b"{}", b"[]", b'{"v":2}', b"[2]", b"null", b'"2"', b"2.0"]
WORDS = ["", "a", "session-title", "deepseek-official", "é", "\u2028", "\x00", "💥", "#", "{", "\\"]


def _text(rand: random.Random) -> str:
    return "".join(rand.choice(WORDS) for _ in range(rand.randrange(4)))


def _value(rand: random.Random, depth: int = 0) -> Any:
    kind = rand.randrange(8 if depth < 4 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rand.choice([True, False, 0, -1, 2**53, 1.5, 1e308])
    if kind in (2, 3, 4):
        return _text(rand)
    if kind in (5, 6):
        return {_text(rand): _value(rand, depth + 1) for _ in range(rand.randrange(4))}
    return [_value(rand, depth + 1) for _ in range(rand.randrange(4))]


def _request(rand: random.Random) -> dict[str, Any]:
    base: dict[str, Any] = {"provider": "deepseek-official", "model": "m", "messages": [], "tools": []}
    for key in rand.sample(["provider", "model", "purpose", "system", "messages", "tools", "maxTokens"],
                           rand.randrange(4)):
        base[key] = _value(rand)
    if rand.random() < 0.3:
        base["messages"] = [{"role": _text(rand), "content": _value(rand)} for _ in range(rand.randrange(3))]
    return base


def _chunks(rand: random.Random) -> bytes:
    if rand.random() < 0.5:
        return json.dumps([{"type": "text-delta", "index": 0, "text": _text(rand)},
                           {"type": "finish", "reason": {"kind": rand.choice(["stop", "error", "length"])}}]).encode()
    return json.dumps(_value(rand)).encode()


def _seed_file(folder: Path) -> Path:
    path = folder / "seed.ndjson"
    cassette = ModelCassetteEngine.open(ModelCassetteConfig(mode="record", file=str(path)), cwd="/w", host_version="x")
    for purpose in (None, "session-title", None):
        request = {"provider": "deepseek-official", "model": "m", "messages": [], "tools": [], "purpose": purpose}
        decision = cassette.admit(request)
        chunks = b'[{"type":"text-delta","index":0,"text":"hi"},{"type":"finish","reason":{"kind":"stop"}}]'
        cassette.recorded(msgspec.structs.asdict(decision)["handle"], msgspec.Raw(chunks), [0.0, 1.0], complete=True)
    assert cassette.close().published
    return path


def _mutate(rand: random.Random, data: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    kind = rand.randrange(7)
    if kind == 0:
        at = rand.randrange(len(data))
        return data[:at] + bytes([rand.randrange(256)]) + data[at + 1:]
    if kind == 1:
        del lines[rand.randrange(len(lines))]
    elif kind == 2:
        lines.insert(rand.randrange(len(lines) + 1), json.dumps(_value(rand)).encode() + b"\n")
    elif kind == 3:
        levels = rand.choice([255, 257, 1000, 20_000])
        opener = rand.choice([b'{"a":', b"["])
        lines.insert(rand.randrange(len(lines) + 1), opener * levels + b"\n")
    elif kind == 4:
        rand.shuffle(lines)
    elif kind == 5:
        return data[: rand.randrange(len(data))]
    else:
        at = rand.randrange(len(lines))
        lines[at] = lines[at].replace(b'"version":2', b'"version":' + rand.choice(HEADER_VERSIONS))
    return b"".join(lines)


def test_generated_files_are_refused_by_name_in_verify_load_and_the_cli(tmp_path: Path) -> None:
    print(f"model cassette file fuzz seed {SEED} (set DSH_FUZZ_SEED to replay)")
    rand = random.Random(SEED)
    good = _seed_file(tmp_path)
    data = good.read_bytes()
    runner = CliRunner()
    for n in range(FILES):
        path = tmp_path / f"f{n}.ndjson"
        path.write_bytes(_mutate(rand, data))
        report = verify_file(str(path))
        try:
            load(str(path))
        except (ModelCassetteInvalid, ModelCassetteIOError) as error:
            assert not report.valid and str(error) == str(report.error), f"seed {SEED}, file {n}"
        for args in (["verify", str(path)], ["inspect", str(path)], ["diff", str(good), str(path)]):
            result = runner.invoke(cli, args)
            assert result.exit_code in (0, 1, 2, 3), f"seed {SEED}, file {n}, {args[0]}: {result.output}"
            assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
                f"seed {SEED}, file {n}, {args[0]}: {result.exception!r}"
            )


def test_generated_hook_params_and_lifecycle_raise_only_named_errors(tmp_path: Path) -> None:
    print(f"model cassette engine fuzz seed {SEED} (set DSH_FUZZ_SEED to replay)")
    rand = random.Random(SEED)
    good = _seed_file(tmp_path)
    named = 0
    for mode in ("record", "replay"):
        file = tmp_path / f"{mode}.ndjson" if mode == "record" else good
        cassette = ModelCassetteEngine.open(ModelCassetteConfig(mode=mode, file=str(file)), cwd="/w", host_version="x")
        for n in range(REQUESTS):
            try:
                if rand.random() < 0.7:
                    cassette.admit(_request(rand))
                else:
                    cassette.recorded(rand.randrange(-1, 50), msgspec.Raw(_chunks(rand)),
                                      [rand.random() * 9 for _ in range(rand.randrange(4))],
                                      complete=rand.random() < 0.8)
                if n == REQUESTS - 50:
                    cassette.close()
            except SidecarError:
                named += 1
    print(f"model cassette engine fuzz: {2 * REQUESTS} inputs, {named} named refusals")
    assert named > 0


def _rpc(lines: list[dict[str, Any]], cwd: Path) -> list[dict[str, Any]]:
    """Send each request once the previous one was answered (``shutdown`` first settles)."""
    process = subprocess.Popen([sys.executable, "-m", "dsh_sidecar.bridge"], cwd=cwd, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    answers = []
    try:
        for line in lines:
            process.stdin.write(msgspec.json.encode(line) + b"\n")
            process.stdin.flush()
            answers.append(msgspec.json.decode(process.stdout.readline()))
    finally:
        _, stderr = process.communicate(timeout=60)
    assert b"Traceback" not in stderr, stderr.decode()
    return answers


def _initialize(cwd: Path, section: dict[str, Any]) -> dict[str, Any]:
    params = {"protocolVersion": 1, "host": {}, "config": {"modelCassette": section}, "cwd": str(cwd), "pid": 1}
    return {"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": params}


def _request_line(id_: int, request: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": "model/request", "params": {"request": request}}


def test_the_sidecar_names_bad_requests_calls_after_shutdown_and_deep_files(tmp_path: Path) -> None:
    ok = {"provider": "deepseek-official", "model": "m", "messages": [], "tools": []}
    answers = _rpc([
        _initialize(tmp_path, {"mode": "record", "file": "m.ndjson"}),
        _request_line(1, {**ok, "messages": 1}),
        _request_line(2, {**ok, "tools": {"a": 1}}),
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": {}},
        _request_line(4, ok),
    ], tmp_path)
    by_id = {a["id"]: a for a in answers}
    assert by_id[1]["error"]["data"]["code"] == "MODEL_REQUEST_INVALID"
    assert "request.messages is not a list" in by_id[1]["error"]["message"]
    assert by_id[2]["error"]["data"]["code"] == "MODEL_REQUEST_INVALID"
    assert by_id[4]["error"]["data"]["code"] == "MODEL_CASSETTE_CLOSED"

    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "m.ndjson").write_bytes(b'{"a":' * 1000 + b"\n")
    [init] = _rpc([_initialize(deep, {"mode": "replay", "file": "m.ndjson"})], deep)
    assert init["error"]["data"]["code"] == "MODEL_CASSETTE_INVALID", init
    assert "nested deeper than 256 levels" in init["error"]["message"]
