"""Factories for realistic DSH rc.8 session logs (reference/dsh-llm-api.md section 4)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import zstandard

Call = tuple[str, str, str]  # (call id, tool name, raw JSON arguments)


class SessionLog:
    """Builds a session.jsonl the way the real JSONL persistence writes it."""

    def __init__(self, *, start: int = 1795998413459) -> None:
        self.time = start
        self.seq = 0
        self.lines: list[str] = [
            json.dumps(
                {
                    "type": "session",
                    "version": 0,
                    "id": "session-712e28cf-47b1-42fa-a496-8f2011273247",
                    "createdAt": start,
                    "cwd": "/work/project",
                    "delegationDepth": 0,
                },
                separators=(",", ":"),
            )
        ]
        self.turn = 0

    @property
    def line(self) -> int:
        """The 1-based line number of the last record written."""
        return len(self.lines)

    def raw(self, record: dict[str, Any]) -> int:
        """Append one record verbatim and return its line number."""
        self.lines.append(json.dumps(record, separators=(",", ":")))
        return self.line

    def event(self, kind: str, data: Any, *, dt: int = 1, **extra: Any) -> int:
        """Append one event with the next seq, ``dt`` ms after the previous one."""
        self.time += dt
        record = {"type": kind, "seq": self.seq, "time": self.time, "data": data, **extra}
        self.seq += 1
        return self.raw(record)

    def start_turn(self, text: str = "run the mock script") -> None:
        """Append a user message and ``turn/start``."""
        self.turn += 1
        self.event("turn/start", {"turn": self.turn})
        self.event(
            "user/message",
            {
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
                "role": "user",
                "id": f"user-{self.turn}",
            },
            surfaceOp="append",
        )

    def tool_step(
        self,
        step: int,
        calls: Sequence[Call],
        *,
        latency: int = 5,
        interleave: bool = False,
        results: bool = True,
        chunk_calls: Sequence[Call] | None = None,
        tool_calls: Sequence[Call] | None = None,
    ) -> int:
        """Append one agent step with tool calls; return the assistant/message line."""
        turn = self.turn
        self.event("step/start", {"turn": turn, "step": step}, dt=3)
        seqs: list[int] = []
        for index, (call_id, name, args) in enumerate(chunk_calls or calls):
            seqs.append(self.seq)
            self.event(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": "block-start", "index": index, "blockType": "tool-call"},
                },
                dt=latency if index == 0 else 1,
            )
            seqs.append(self.seq)
            block = {"type": "tool-call", "id": call_id, "name": name, "arguments": args}
            self.event(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": "block-end", "index": index, "block": block},
                },
            )
        for chunk in (
            {"type": "usage", "usage": {"inputTokens": 0, "outputTokens": 0}},
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ):
            seqs.append(self.seq)
            self.event("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
        content = [{"type": "tool-call", "id": c, "name": n, "arguments": a} for c, n, a in calls]
        message_line = self.event(
            "assistant/message",
            {
                "turn": turn,
                "step": step,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "source": {"kind": "model", "provider": "mock", "model": "mock"},
                    "id": f"msg-{turn}-{step}",
                },
                "usage": {"inputTokens": 0, "outputTokens": 0},
            },
            sourceEventSeqs=seqs,
            surfaceOp="append",
        )
        stated = list(tool_calls or calls)
        call_seqs = []
        for call_id, name, args in stated:
            call_seqs.append(self.seq)
            self.event(
                "tool/call",
                {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": args},
            )
            if interleave and results:
                self.result(step, call_id, call_seqs[-1])
        if results and not interleave:
            for (call_id, _, _), seq in zip(stated, call_seqs, strict=True):
                self.result(step, call_id, seq)
        self.event("step/end", {"turn": turn, "step": step})
        return message_line

    def result(self, step: int, call_id: str, call_seq: int) -> int:
        """Append a historical tool/result (whose content must never be replayed)."""
        return self.event(
            "tool/result",
            {
                "turn": self.turn,
                "step": step,
                "message": {
                    "source": {"kind": "tool", "callId": call_id},
                    "content": [
                        {
                            "type": "tool-result",
                            "toolCallId": call_id,
                            "content": [{"type": "text", "text": "HISTORICAL-OUTPUT"}],
                            "isError": False,
                        }
                    ],
                    "role": "user",
                    "id": f"result-{call_id}",
                },
            },
            sourceEventSeqs=[call_seq],
            surfaceOp="append",
        )

    def final_step(self, step: int, text: str = "done") -> None:
        """Append the text-only final step and ``turn/end``."""
        turn = self.turn
        self.event("step/start", {"turn": turn, "step": step}, dt=3)
        first = self.seq
        self.event(
            "assistant/chunk",
            {
                "turn": turn,
                "step": step,
                "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
            },
            dt=7,
        )
        self.event(
            "assistant/chunk",
            {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": text}},
        )
        self.event(
            "assistant/message",
            {
                "turn": turn,
                "step": step,
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "model", "provider": "mock", "model": "mock"},
                    "id": "final",
                },
            },
            sourceEventSeqs=[first, first + 1],
            surfaceOp="append",
        )
        self.event("step/end", {"turn": turn, "step": step})
        self.event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def text(self) -> bytes:
        """The plain JSONL bytes."""
        return ("\n".join(self.lines) + "\n").encode()

    def zstd(self, frame_lines: int = 3) -> bytes:
        """The ``session.jsonl.zstd`` bytes: a header frame, then one frame per batch."""
        compressor = zstandard.ZstdCompressor()
        frames = [compressor.compress((self.lines[0] + "\n").encode())]
        body = self.lines[1:]
        for start in range(0, len(body), frame_lines):
            batch = "".join(line + "\n" for line in body[start : start + frame_lines])
            frames.append(compressor.compress(batch.encode()))
        return b"".join(frames)


@pytest.fixture
def make_session() -> Callable[..., SessionLog]:
    """Factory for ``SessionLog`` builders."""
    return SessionLog


@pytest.fixture
def three_step_log() -> SessionLog:
    """The reference log: one call, then a parallel pair, then text (reference section 4.3)."""
    log = SessionLog()
    log.start_turn()
    log.tool_step(1, [("mock-1-1-0", "mock_echo", '{"text":"hello from mock"}')], latency=40)
    log.tool_step(
        2,
        [
            ("mock-1-2-0", "mock_echo", '{"text":"p1"}'),
            ("mock-1-2-1", "mock_echo", '{"text":"p2"}'),
        ],
        latency=53,
    )
    log.final_step(3)
    return log
