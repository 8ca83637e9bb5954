"""A compaction's summarization call, rebuilt from what an rc.8 log holds of it.

Rule: rc.8's ``@deepseek-ai/dsh-compaction-basic`` (``summarizeWithLlm``) makes one
``ctx.llm.stream()`` call per compaction: the latest request header's system prompt and tools,
the messages of the compacted surface nodes (``shadowedSeqs``, in order), then its fixed
instruction as a plugin's user message, with the summary event's route, model and
``maxTokens`` and ``purpose: "compaction"``. The ``compaction/summary`` event holds all but the
instruction (copied below from that package, ``lib/index.js`` ``COMPACTION_INSTRUCTION``), and the
*assembled* answer (``rawOutput``: text blocks) with its ``usage``, not the chunks. So the
request, and with it the fingerprint, is the host's; the chunks are the ones rc.8's adapter
yields for such an answer (a block start, one text delta, the block end, the usage, a ``stop``
finish), which assemble back to the same blocks, so the summary and the checkpoint the replay
lands are the logged ones. A compaction that failed (``compaction/end`` with an ``error``) left
no answer in the log and is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["COMPACTION_INSTRUCTION", "COMPACTION_LANE", "compaction_request", "summary_chunks"]

COMPACTION_LANE: Final = "compaction"
"""The lane of a call whose ``purpose`` is ``compaction`` (``model_request.lane_of``)."""

COMPACTION_INSTRUCTION: Final = "\n".join((
    ("You are now acting as a compaction engine for this AI coding assistant. Condense the "
     "conversation ABOVE into a structured checkpoint that lets another model resume the work with "
     "no loss of essential context."),
    "",
    ("Output EXACTLY the Markdown structure below: keep every section, in order. Use terse bullets, "
     "not prose paragraphs. Write \"(none)\" for an empty section — never drop a section."),
    "",
    "## Primary Request and Intent",
    "- [the user's original and evolving goals; quote verbatim where the exact wording matters]",
    "",
    "## Key Technical Concepts",
    "- [technologies, frameworks, patterns, and conventions in play]",
    "",
    "## Files and Code",
    "- [exact path: why it matters, key changes or snippets]",
    "",
    "## Errors and Fixes",
    "- [error: how it was resolved, plus any related user feedback]",
    "",
    "## Pending Jobs",
    "- [explicitly requested work not yet completed]",
    "",
    "## Current Work",
    "- [precisely what was in progress at this checkpoint]",
    "",
    "## Next Step",
    "- [the single next action, directly in line with the most recent request, or \"(none)\"]",
    "",
    "## Critical Context",
    ("- [decisions and their rationale, constraints, user preferences, open questions, data needed "
     "to continue]"),
    "",
    "Rules:",
    ("- Write concise English engineering prose. Preserve exact file paths, commands, error strings, "
     "identifiers, numeric values, function signatures, and syntax fragments."),
    "- Capture user feedback and explicit instructions faithfully, especially corrections.",
    "- Do NOT mention this summarization request or that the context was compacted.",
    "- Output only the checkpoint text: do not call any tool or take any other action.",
    ("- If the conversation already contains a <compacted-summary> block, it is a PRIOR checkpoint. "
     "Do not copy it forward verbatim: preserve still-true facts, drop stale ones, and merge newer "
     "information into a single consolidated summary under the same structure."),
))
"""rc.8's summarization directive, verbatim (another version's text is a fingerprint mismatch at replay)."""
_INSTRUCTION_SOURCE: Final = {"kind": "plugin", "plugin": "dsh-compaction-basic"}


def compaction_request(summary: Mapping[str, Any], header: Mapping[str, Any],
                       region: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``GenerateOptions`` of the call (no ids, no signal, no session id): ``summary`` is the
    ``compaction/summary`` event's data, ``header`` the request header then, ``region`` the
    compacted nodes' messages in order."""
    request: dict[str, Any] = {"provider": summary.get("provider"), "model": summary.get("model")}
    instruction = {"role": "user", "content": [{"type": "text", "text": COMPACTION_INSTRUCTION}],
                   "source": dict(_INSTRUCTION_SOURCE)}
    request["messages"] = [*({k: v for k, v in m.items() if k != "id"} for m in region), instruction]
    for key in ("system", "tools"):
        if header.get(key) is not None:
            request[key] = header[key]
    if "maxTokens" in summary:
        request["maxTokens"] = summary["maxTokens"]
    request["purpose"] = "compaction"
    return request


def summary_chunks(raw_output: Sequence[Mapping[str, Any]], usage: object) -> list[dict[str, Any]]:
    """The chunks rc.8's adapter yields for the assembled text blocks ``raw_output``."""
    chunks: list[dict[str, Any]] = []
    for index, block in enumerate(raw_output):
        text = block.get("text")
        chunks += [{"type": "block-start", "index": index, "blockType": "text"},
                   {"type": "text-delta", "index": index, "text": text},
                   {"type": "block-end", "index": index, "block": {"type": "text", "text": text}}]
    if isinstance(usage, Mapping):
        chunks.append({"type": "usage", "usage": dict(usage)})
    chunks.append({"type": "finish", "reason": {"kind": "stop"}})
    return chunks
