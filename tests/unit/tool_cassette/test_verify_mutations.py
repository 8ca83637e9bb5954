"""Every corruption of a cassette is rejected by verify with a structural reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from dsh_sidecar.python_core.cassette_io import Chain
from dsh_sidecar.python_core.tool_cassette.cli import main
from dsh_sidecar.python_core.tool_cassette.format import (
    DefinitionFrame,
    HeaderFrame,
    HostState,
    ResultFrame,
    canonical_outcome,
    decode_frame,
    seal,
)
from dsh_sidecar.python_core.tool_cassette.store import verify_file


@pytest.fixture
def lines(make_cassette: Any) -> list[bytes]:
    return make_cassette().read_bytes().splitlines(keepends=True)


def mutations(lines: list[bytes]) -> Iterator[tuple[str, bytes]]:
    count = len(lines)
    for cut in range(count):
        yield f"truncated after {cut} frames", b"".join(lines[:cut])
    for index, line in enumerate(lines):
        yield f"line {index + 1} cut mid-line", b"".join(lines[:index]) + line[: len(line) // 2]
        yield f"line {index + 1} without newline", b"".join(lines[: index + 1])[:-1]
        yield f"line {index + 1} duplicated", b"".join(lines[: index + 1] + lines[index:])
        yield f"line {index + 1} dropped", b"".join(lines[:index] + lines[index + 1 :])
    for index in range(count - 1):
        swapped = [*lines[:index], lines[index + 1], lines[index], *lines[index + 2:]]
        yield f"lines {index + 1} and {index + 2} swapped", b"".join(swapped)


def with_header_version(lines: list[bytes], version: int) -> bytes:
    frame = decode_frame(lines[0][:-1])
    _, line = seal(msgspec.structs.replace(frame, version=version, hash=msgspec.UNSET))
    return line + b"".join(lines[1:])


def verify_bytes(tmp_path: Path, data: bytes) -> Any:
    path = tmp_path / "mutant.jsonl"
    path.write_bytes(data)
    return verify_file(str(path))


def test_every_structural_mutation_is_rejected_in_the_cli(
    lines: list[bytes], tmp_path: Path, kit: Any
) -> None:
    runner = CliRunner()
    path = tmp_path / "mutant.jsonl"
    seen = 0
    for name, data in mutations(lines):
        path.write_bytes(data)
        result = runner.invoke(main, ["verify", str(path)])
        assert result.exit_code == 1, name
        assert result.output.startswith("CASSETTE_INVALID: "), name
        assert kit.SECRET not in result.output and str(tmp_path) not in result.output, name
        seen += 1
    assert seen == 6 * len(lines) - 1


def test_a_flipped_bit_anywhere_is_rejected(lines: list[bytes], tmp_path: Path, kit: Any) -> None:
    data = b"".join(lines)
    path = tmp_path / "mutant.jsonl"
    for position in range(len(data)):
        flipped = bytearray(data)
        flipped[position] ^= 0x01
        path.write_bytes(flipped)
        report = verify_file(str(path))
        assert not report.valid, position
        assert kit.SECRET not in str(report.error), position


def test_a_flipped_byte_in_a_value_is_a_hash_mismatch(lines: list[bytes], tmp_path: Path) -> None:
    data = b"".join(lines).replace(b'"temp":21.5', b'"temp":21.6', 1)
    assert str(verify_bytes(tmp_path, data).error) == (
        "CASSETTE_INVALID: line 3 call/result ordinal 0: hash does not match the frame"
    )


def test_wrong_protocol_version_is_named(lines: list[bytes], tmp_path: Path) -> None:
    assert str(verify_bytes(tmp_path, with_header_version(lines, 6)).error) == (
        "CASSETTE_INVALID: line 1 header: unsupported protocol version 6 (this build reads 1 to 5)"
    )


@pytest.mark.parametrize("version", [b"{}", b"[]", b'{"a":1}', b"[3]", b"true", b'"3"', b"null"])
@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_a_header_version_of_any_json_type_is_named_not_a_traceback(
    lines: list[bytes], tmp_path: Path, version: bytes, command: str,
) -> None:
    # A fuzz finding: an object ``version`` reached a set lookup and raised TypeError.
    path = tmp_path / "mutant.jsonl"
    path.write_bytes(b'{"kind":"header","protocol":"dsh-tool-cassette","seq":0,"version":' + version + b"}\n"
                     + b"".join(lines[1:]))
    message = "CASSETTE_INVALID: line 1 header: unsupported protocol version ? (this build reads 1 to 5)"
    assert str(verify_file(str(path)).error) == message
    result = CliRunner().invoke(main, [command, str(path)])
    assert (result.exception is None or isinstance(result.exception, SystemExit), result.exit_code) == (True, 1)
    named = message.replace("CASSETTE_INVALID: ", "CASSETTE_INVALID: mutant.jsonl: ")
    assert named in result.output.splitlines() or f"integrity: {message}" in result.output.splitlines()


def _rechained(lines: list[bytes], version: int, host: HostState | None = None, *,
               rendered: bool = False, extra: list[DefinitionFrame] | None = None) -> bytes:
    """The file re-sealed with header ``version`` (and ``host`` on its first result).

    Successes keep their rendered content only if ``rendered``; ``extra`` frames follow the header.
    """
    chain, out = Chain(), []
    for raw in lines:
        frame: Any = decode_frame(raw[:-1])
        if isinstance(frame, HeaderFrame):
            frame = msgspec.structs.replace(frame, version=version)
        elif isinstance(frame, ResultFrame):
            if version < 4:  # older versions keep outcome payloads canonical
                frame = canonical_outcome(frame)
            if not frame.isError and not rendered:
                frame = msgspec.structs.replace(frame, content=msgspec.UNSET, meta=msgspec.UNSET)
            if host is not None and frame.ordinal == 0:
                frame = msgspec.structs.replace(frame, host=host)
        _, line = chain.link(msgspec.structs.replace(frame, hash=msgspec.UNSET))
        out.append(line)
        if isinstance(frame, HeaderFrame):
            for definition in extra or ():
                _, line = chain.link(definition)
                out.append(line)
    return b"".join(out)


def _definition(tool: str = "weather_lookup", **fields: Any) -> DefinitionFrame:
    values: dict[str, Any] = {"description": "d", "parameters": msgspec.Raw(b'{"type":"object"}'),
                              "output": msgspec.Raw(b'{"type":"object"}'), **fields}
    return DefinitionFrame(seq=0, prev="", tool=tool, **values)


def test_version_3_members_are_refused_in_older_files_and_checked_in_version_3(
    lines: list[bytes], tmp_path: Path
) -> None:
    assert verify_bytes(tmp_path, _rechained(lines, 3, rendered=True, extra=[_definition()])).valid
    assert str(verify_bytes(tmp_path, _rechained(lines, 2, rendered=True)).error) == (
        "CASSETTE_INVALID: line 3 call/result ordinal 0: success with content or meta in a version 2 file"
    )
    assert str(verify_bytes(tmp_path, _rechained(lines, 2, extra=[_definition()])).error) == (
        "CASSETTE_INVALID: line 2 tool: tool definition in a version 2 file"
    )
    twice = _rechained(lines, 3, extra=[_definition(), _definition()])
    assert str(verify_bytes(tmp_path, twice).error) == "CASSETTE_INVALID: line 3 tool: second definition of a tool"
    for bad, reason in (
        ({"parameters": msgspec.Raw(b"[]")}, "parameters or output is not an object"),
        ({"output": msgspec.Raw(b'"x"')}, "parameters or output is not an object"),
        ({"presentationMeta": False}, "presentationMeta false (left out when false)"),
        ({"timeoutMs": 0}, "timeoutMs is not positive"),
    ):
        text = _rechained(lines, 3, extra=[_definition(**bad)])
        assert str(verify_bytes(tmp_path, text).error) == f"CASSETTE_INVALID: line 2 tool: {reason}", bad
    empty = _rechained(lines, 3, extra=[_definition(tool="")])
    assert str(verify_bytes(tmp_path, empty).error) == "CASSETTE_INVALID: line 2 tool: empty tool"


def test_a_version_1_file_still_reads_but_may_not_carry_host_state(lines: list[bytes], tmp_path: Path) -> None:
    report = verify_bytes(tmp_path, _rechained(lines, 1))
    assert (report.valid, report.version) == (True, 1)
    host = HostState(observe=("notes.txt",))
    assert verify_bytes(tmp_path, _rechained(lines, 2, host)).valid
    assert str(verify_bytes(tmp_path, _rechained(lines, 1, host)).error) == (
        "CASSETTE_INVALID: line 3 call/result ordinal 0: host state in a version 1 file"
    )


def test_missing_tail_is_named(lines: list[bytes], tmp_path: Path) -> None:
    assert str(verify_bytes(tmp_path, b"".join(lines[:-1])).error) == (
        "CASSETTE_INVALID: missing complete tail frame after line 7"
    )


def test_dropped_frame_is_a_seq_gap(lines: list[bytes], tmp_path: Path) -> None:
    assert str(verify_bytes(tmp_path, b"".join(lines[:2] + lines[3:])).error) == (
        "CASSETTE_INVALID: line 3 call/start ordinal 1: seq 3 where 2 expected"
    )


def test_frame_after_tail_is_rejected(lines: list[bytes], tmp_path: Path) -> None:
    assert str(verify_bytes(tmp_path, b"".join([*lines, lines[-1]])).error) == (
        "CASSETTE_INVALID: line 9: frame after the complete tail"
    )


def test_non_canonical_but_equivalent_line_is_rejected(lines: list[bytes], tmp_path: Path) -> None:
    spaced = lines[0].replace(b'"kind":"header"', b'"kind": "header"')
    assert str(verify_bytes(tmp_path, b"".join([spaced, *lines[1:]])).error) == (
        "CASSETTE_INVALID: line 1 header: not canonical JSON"
    )


def test_resealed_frames_with_a_broken_pairing_are_rejected(
    lines: list[bytes], tmp_path: Path
) -> None:
    frames = [decode_frame(line[:-1]) for line in lines]
    frames[4] = msgspec.structs.replace(frames[4], ordinal=0)
    prev, out = frames[0].prev, []
    for index, frame in enumerate(frames):
        chained = msgspec.structs.replace(frame, seq=index, prev=prev, hash=msgspec.UNSET)
        sealed, line = seal(chained)
        prev = sealed.hash
        out.append(line)
    assert str(verify_bytes(tmp_path, b"".join(out)).error) == (
        "CASSETTE_INVALID: line 5 call/result ordinal 0: duplicate result"
    )
