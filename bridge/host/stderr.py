"""What a failed DSH process printed, cut to the lines a person can act on."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["stderr_tail"]

# rc.8 prints nothing to stderr on success; a failure's useful lines are its last ones.
_STDERR_TAIL = 6
# What Node prints around an uncaught error besides its message: frames, source excerpts, carets.
_NODE_NOISE = re.compile(r"^(at |Node\.js v|file://\S+:\d+$|\^+$|[{}]$|throw |\[cause\]: )")
# The run API's own cassette summary lines, shown apart.
_SUMMARY_PREFIXES = ("tool cassette ", "subagent cassette ", "model cassette ")
# The sidecar's pointer to a failed tool's message: the account shows the message and a command
# that works where the user is instead.
_FULL_MESSAGE = re.compile(r"; its full message is in the session log: dsh-sidecar sessions show \S+$")


def stderr_tail(stderr: str, *, known: Sequence[str], limit: int | None = _STDERR_TAIL) -> list[str]:
    """The last ``limit`` useful stderr lines (``None``: all): no JS stack frames, no repeats,
    nothing already shown."""
    seen: list[str] = []
    for raw in stderr.splitlines():
        line = raw.strip()
        for prefix in ("dsh-sidecar: ", "dsh: "):
            line = line.removeprefix(prefix)
        line = _FULL_MESSAGE.sub("", line)
        if (
            not line or _NODE_NOISE.match(line) or line.startswith(_SUMMARY_PREFIXES)
            or any(k and k in line for k in known) or line in seen
        ):
            continue
        seen.append(line)
    # Cut only a stray huge line: the sidecar's own lines (a recorded-failure line names three calls) fit.
    return [line[:400] for line in (seen if limit is None else seen[-limit:])]
