"""A real MCP server written with the PyPI ``mcp`` SDK (FastMCP), for the tool cassette's tests.

    python mcp_notes_server.py --world DIR --calls FILE                  # stdio
    python mcp_notes_server.py --world DIR --calls FILE --port PORT      # streamable HTTP

Its answers come from the "world" folder (``<name>.txt`` notes, ``<name>.lock`` locks), so a
test changes what a real call would answer by editing files there. Every ``tools/call`` it
serves appends the tool's name as one line to ``--calls``, which is how a replay test proves
the real server saw no call. Over HTTP it listens on 127.0.0.1:PORT/mcp and prints
``notes server ready`` on stdout once it listens there.
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import anyio
import uvicorn
from mcp.server.fastmcp import FastMCP
from pydantic import BaseModel

READY_LINE = "notes server ready"


class NoteStats(BaseModel):
    """What ``note_stats`` returns: FastMCP derives the tool's output schema from it."""

    name: str
    lines: int
    words: int


def build(world: Path, calls: Path, port: int) -> FastMCP:
    """The notes server reading ``world`` and counting its calls in ``calls``."""
    server = FastMCP("notes", host="127.0.0.1", port=port, log_level="WARNING")

    def served(tool: str) -> None:
        with calls.open("a") as log:
            log.write(tool + "\n")

    @server.tool()
    def read_note(name: str) -> str:
        """Return the text of the note ``name``."""
        served("read_note")
        return (world / f"{name}.txt").read_text()

    @server.tool()
    def note_stats(name: str) -> NoteStats:
        """Count the lines and words of the note ``name``."""
        served("note_stats")
        text = (world / f"{name}.txt").read_text()
        return NoteStats(name=name, lines=len(text.splitlines()), words=len(text.split()))

    @server.tool()
    def check_note(name: str) -> str:
        """Fail when the note ``name`` is locked (``<name>.lock`` exists), else say it is open."""
        served("check_note")
        if (world / f"{name}.lock").exists():
            raise ValueError(f"note {name} is locked")
        return f"note {name} is open"

    return server


def _serve_http(server: FastMCP, port: int) -> None:
    # Bind and listen before uvicorn starts, so the ready line is true when printed (the kernel
    # queues early connections) and a port taken meanwhile fails here instead of serving nothing.
    listener = socket.create_server(("127.0.0.1", port))
    print(READY_LINE, flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    anyio.run(uvicorn.Server(config).serve, [listener])


def main() -> None:
    """Serve over stdio, or over streamable HTTP with ``--port``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--world", type=Path, required=True)
    parser.add_argument("--calls", type=Path, required=True)
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    server = build(args.world, args.calls, args.port or 0)
    if args.port is None:
        server.run("stdio")
        return
    _serve_http(server, args.port)


if __name__ == "__main__":
    main()
