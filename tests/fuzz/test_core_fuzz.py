"""Fuzz: canonical JSON, /mock commands and the row config (the wire: tests/fuzz/test_bridge_fuzz.py).

Each test feeds at least 10,000 seeded inputs and accepts only success or a named
``SidecarError`` (never a traceback); the seed is printed by the ``fuzz`` fixture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh_sidecar.python_core.canonical import canonical_bytes, decode_canonical, loads_strict
from dsh_sidecar.python_core.config import parse_sidecar_config
from dsh_sidecar.python_core.errors import SidecarError
from dsh_sidecar.python_core.mock.command import parse_command
from dsh_sidecar.python_core.subagent_cassette.config import parse_fields as parse_subagent_config

N = 10_000
SEED_TEXTS = [
    b'{"a":[1,2.5,{"b":"c"}],"d":null,"e":true}',
    b'[{"\\u00e9":"\\ud83d\\ude00"},-1,0.000001,1e+21]',
    b'{"jsonrpc":"2.0","id":7,"method":"tools/execute","params":{"handle":"h1","args":"{}"}}',
]


def _named(call: Any, *args: Any, **kwargs: Any) -> None:
    try:
        call(*args, **kwargs)
    except SidecarError as error:
        assert error.code and str(error).startswith(error.code + ": ")
        str(error).encode("utf-8")  # always printable


def test_fuzz_canonical_json_text_and_values(fuzz: Any) -> None:
    for i in range(N):
        text = fuzz.mutate(SEED_TEXTS[i % len(SEED_TEXTS)])
        _named(loads_strict, text)
        decode_canonical(text)  # returns NOT_CANONICAL for anything off-profile, never raises
        _named(canonical_bytes, fuzz.value())
        fuzz.count += 2
    assert fuzz.count >= 2 * N


def test_fuzz_mock_commands(fuzz: Any) -> None:
    heads = ["/mock run ", "/mock replay ", "/mock run [", "/mock ", "/mock replay --overwrite-wait-time-ms "]
    for i in range(N):
        body = fuzz.mutate(b'echo({"text": "a", "n": [1, {"k": null}]}) x.json 5')
        text = heads[i % len(heads)] + body.decode("utf-8", "surrogateescape") + fuzz.string()
        _named(parse_command, text)
        fuzz.count += 1
    assert fuzz.count >= N


def test_fuzz_the_row_config(fuzz: Any, tmp_path: Path) -> None:
    keys = ["python", "toolCassette", "mock", "subagentCassette", "trace", fuzz.string()]
    sub_keys = ["mode", "file", "include", "enabled", "defaultGapMs", "nestedTools", "provider",
                "writeMode", "speed", "redactionPatterns", "transparent"]
    for _ in range(N):
        raw: dict[str, Any] = {}
        for key in fuzz.rng.sample(keys, fuzz.rng.randint(0, 3)):
            if fuzz.rng.random() < 0.6:
                raw[key] = {k: fuzz.value() for k in fuzz.rng.sample(sub_keys, fuzz.rng.randint(0, 4))}
            else:
                raw[key] = fuzz.value()
        _named(parse_sidecar_config, raw, cwd=str(tmp_path))
        section = raw.get("subagentCassette")
        if isinstance(section, dict):
            _named(parse_subagent_config, section)
        fuzz.count += 1
    assert fuzz.count >= N
