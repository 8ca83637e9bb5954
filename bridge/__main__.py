"""``python -m dsh_sidecar.bridge``: serve the shim on stdin/stdout until end of input."""

from __future__ import annotations

import sys

import anyio

from dsh_sidecar.bridge.session.sidecar import Sidecar
from dsh_sidecar.bridge.transport.server import Server
from dsh_sidecar.bridge.transport.stdio import FdReceiveStream, FdSendStream, claim_stdout

__all__ = ["main"]


async def _serve() -> None:
    protocol_fd = claim_stdout()
    sys.stdout = sys.stderr
    sidecar = Sidecar()
    server = Server(sidecar)
    await server.serve(FdReceiveStream(0), FdSendStream(protocol_fd))


def main() -> None:
    """Run the sidecar."""
    try:
        anyio.run(_serve)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
