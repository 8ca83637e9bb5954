"""How a cassette takes part in a run: replay the file, or record to a private file published
only when the recording is complete (create-only for ``once``, atomic replace for ``all``).

Record modes follow pytest-recording: ``none`` replays and never records, ``once`` records only
a missing cassette, ``all`` re-records. The turn's own outcome does not matter: a turn that
fails on purpose (a recorded tool error) is a complete recording.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Literal

import msgspec

from dsh_sidecar.bridge.api.types import CassetteMissing, CassetteNotAFile, CassetteSummary, RecordMode
from dsh_sidecar.bridge.transport.report import CassetteCounts

__all__ = ["CassettePlan", "plan_cassette", "publish", "summarize"]


class CassettePlan(msgspec.Struct, kw_only=True):
    """How one cassette takes part in a run."""

    kind: Literal["tool", "subagent", "model"]
    target: Path
    name: str
    mode: Literal["record", "replay"]
    write_to: Path
    record_mode: RecordMode


def plan_cassette(kind: Literal["tool", "subagent", "model"], file: str, cwd: Path, record_mode: RecordMode,
                  hint: str) -> CassettePlan:
    field = f"{kind}Cassette.file"
    target = (cwd / file) if not os.path.isabs(file) else Path(file)
    name = os.path.basename(file) or file
    if target.exists() and not target.is_file():
        raise CassetteNotAFile(field, name)
    exists = target.is_file()
    if record_mode == "none" and not exists:
        raise CassetteMissing(field, name, hint)
    if exists and record_mode != "all":
        return CassettePlan(kind=kind, target=target, name=name, mode="replay", write_to=target,
                            record_mode=record_mode)
    if not target.parent.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
    private = target.parent / f".{target.name}.{secrets.token_hex(4)}.recording"
    return CassettePlan(kind=kind, target=target, name=name, mode="record", write_to=private, record_mode=record_mode)


def publish(plan: CassettePlan, complete: bool, named: bool = False) -> bool:
    """Move a complete private recording into place; drop an incomplete one. True if published.

    ``named``: the sidecar reported the unpublished recording (its error names the ``.partial``
    it kept), so the partial stays; with no report (DSH killed, timed out) nothing names it.
    """
    private = plan.write_to
    try:
        if not complete or not private.is_file():
            return False
        if plan.record_mode == "all":
            os.replace(private, plan.target)
        else:
            os.link(private, plan.target)  # create-only: never overwrite a cassette that appeared
        fd = os.open(plan.target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return True
    except FileExistsError:
        return False
    finally:
        private.unlink(missing_ok=True)
        # An unpublished recording's partial is the evidence its error names ("kept ...partial").
        if not named:
            Path(f"{private}.partial").unlink(missing_ok=True)
        shutil.rmtree(f"{private}.writer.lock", ignore_errors=True)



def summarize(plan: CassettePlan, counts: CassetteCounts | None, published: bool, filtered: bool) -> CassetteSummary:
    c = counts or CassetteCounts(kind=plan.kind, mode=plan.mode)
    return CassetteSummary(
        kind=plan.kind, file=plan.name, record_mode=plan.record_mode, mode=plan.mode, selected=c.selected,
        recorded=c.recorded, consumed=c.consumed, unconsumed=c.unconsumed, missed=c.missed, poisoned=c.poisoned,
        published=published, injected=c.injected, faults=c.faults, failed=c.failed,
        filtered=filtered, stood_up=list(c.stoodUp),
    )
