"""docs/protocol.md documents exactly the method table."""

from __future__ import annotations

import re
from pathlib import Path

from dsh_sidecar.bridge.transport.protocol import METHODS, PROTOCOL_VERSION

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def test_protocol_doc_lists_exactly_the_method_table() -> None:
    documented = re.findall(r"^### `([^`]+)`", DOC.read_text(), flags=re.M)

    assert sorted(documented) == sorted(METHODS)


def test_protocol_doc_names_the_current_version() -> None:
    assert (
        DOC.read_text().splitlines()[0]
        == f"# dsh-sidecar wire protocol, version {PROTOCOL_VERSION}"
    )
