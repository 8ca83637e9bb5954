"""docs/mcp.md's examples run as written, the way test_readme.py runs the README's."""

from __future__ import annotations

import pytest
from dshrun import ROOT
from test_readme import CHECKED_LANGS, Block, Session, parse, shown_lines_appear

DOC = ROOT / "docs" / "mcp.md"
BLOCKS = [b for b in parse(DOC.read_text()) if b.lang in CHECKED_LANGS]
RUN = [b for b in BLOCKS if b.kind in ("patch", "checkout", "output")]


def test_every_block_of_the_page_is_run() -> None:
    assert [b.kind for b in RUN] == ["patch", "checkout", "output"]
    assert [b.line for b in BLOCKS if b not in RUN] == []


@pytest.mark.parametrize("block", RUN, ids=[f"line{b.line}-{b.kind}" for b in RUN])
def test_doc_block(session: Session, block: Block) -> None:
    ran = session.result(block)
    if block.kind == "output":
        assert shown_lines_appear(block.text, ran.stdout + "\n" + ran.stderr), (
            f"docs/mcp.md:{block.line}: the shown output is not what the block before prints\n{ran.explain()}")
        return
    assert ran.rc == 0, f"docs/mcp.md:{block.line}: expected exit 0\n{ran.explain()}"
    if block.kind == "patch":
        assert "mcp-notes" in ran.stdout and "@deepseek-ai/dsh-mcp-client" in ran.stdout, ran.explain()
