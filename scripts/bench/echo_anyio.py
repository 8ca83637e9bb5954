"""A second floor for scripts/bench_bridge: the sidecar's own fd streams under anyio, echoing.

The same reads and writes as ``python -m dsh_sidecar.bridge`` (``bridge.transport.stdio``: non-blocking fds,
``anyio.wait_readable`` when a read would block) and no JSON-RPC work: what the transport
costs before any line is handled.
"""

import anyio

from dsh_sidecar.bridge.transport.stdio import FdReceiveStream, FdSendStream


async def main() -> None:
    receive, send = FdReceiveStream(0), FdSendStream(1)
    while True:
        try:
            data = await receive.receive()
        except anyio.EndOfStream:
            return
        await send.send(data)


anyio.run(main)
