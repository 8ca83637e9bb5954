"""Fuzz: ``RpcConnection.cancels_first`` on random reads agrees with decoding every line (moved from
``tests/bridge/test_connection.py``). ``DSH_FUZZ_SEED`` picks the seed; each assertion names it."""

from __future__ import annotations

import os
import random

import msgspec

from dsh_sidecar.bridge.transport.connection import RpcConnection

SEED = int(os.environ.get("DSH_FUZZ_SEED", "20261202"))


def _cancels_first_by_decoding_every_line(lines: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """The rule decoded in full for every line (what ``cancels_first`` did before its byte filter)."""
    first: list[bytes] = []
    rest: list[bytes] = []
    ids: set[tuple[type, int | str]] = set()
    for raw in lines:
        try:
            message = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            message = None
        if not isinstance(message, dict):
            rest.append(raw)
            continue
        id_ = message.get("id")
        if message.get("method") == "$/cancelRequest":
            params = message.get("params")
            target = params.get("id") if isinstance(params, dict) else None
            if type(target) in (int, str) and (type(target), target) not in ids:
                first.append(raw)
                continue
        if type(id_) in (int, str):
            ids.add((type(id_), id_))
        rest.append(raw)
    return first, rest


def test_cancels_first_decodes_only_lines_that_can_hold_the_id_and_agrees_with_decoding_all() -> None:
    rng = random.Random(SEED)
    ids: list[int | str] = [0, 1, 7, 12, 123, -1, "a", "ab", "é", "1", "c\n"]

    def spelled(value: int | str) -> bytes:
        if isinstance(value, str) and rng.random() < 0.5:  # the same string, escaped
            return b'"' + "".join(f"\\u{ord(ch):04x}" for ch in value).encode() + b'"'
        if value == 0 and rng.random() < 0.5:
            return b"-0"
        return msgspec.json.encode(value)

    def random_line() -> bytes:
        kind = rng.random()
        cancel, target = b'"method":"$/cancelRequest"', b'"params":{"id":' + spelled(rng.choice(ids)) + b"}"
        if kind < 0.35:
            return b'{"jsonrpc":"2.0",' + cancel + b"," + target + b"}"
        if kind < 0.45:  # a cancel sent as a request: its own id may be another cancel's target
            return b'{"jsonrpc":"2.0",' + target + b"," + cancel + b',"id":' + spelled(rng.choice(ids)) + b"}"
        if kind < 0.55:
            return rng.choice([b"", b"{not json", b'{"method":"$/cancelRequest","params":{"id":[1]}}',
                               b'"$/cancelRequest"'])
        text = msgspec.json.encode(rng.choice(["x", "say \"12\"", "$/cancelRequest", "a\\b"]))
        execute = b'"method":"tools/execute","params":{"t":' + text + b"}"
        return b'{"jsonrpc":"2.0","id":' + spelled(rng.choice(ids)) + b"," + execute + b"}"

    for _ in range(3_000):
        lines = [random_line() for _ in range(rng.randrange(1, 12))]
        assert RpcConnection.cancels_first(lines) == _cancels_first_by_decoding_every_line(lines), (SEED, lines)
