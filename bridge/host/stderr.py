"""What a failed DSH process printed, cut to the lines a person can act on."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["broken_plugin", "stderr_tail"]

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


# rc.8's boot failures that name another plugin than the sidecar's (its own lines name the sidecar).
_OVERLAY = re.compile(r"^Error: dsh: failed to read overlay (?P<path>\S+): (?:Error: )?(?P<code>E[A-Z]+)\b")
_TREE = "plugin tree failed to load"
_ENTRY = re.compile(r"^(?P<spec>\S+): (?P<error>[A-Za-z]*Error): (?P<message>.+)$")
_ABSOLUTE = re.compile(r"(?:file://)?(?:/[^\s/:'\"]+)+/([^\s/:'\"]+)")
_OWN = "dsh-sidecar-shim"


def broken_plugin(stderr: str, profile: str = "headless") -> str | None:
    """The one line naming the third-party plugin that kept DSH from composing or loading its
    profile (``PLUGIN_BROKEN: ...; fix: ...``), or ``None``: no such failure in ``stderr``.

    Two rc.8 failures are read: a bundle whose ``dsh.bundle.patch`` file is not in its package
    (``failed to read overlay``) and a plugin whose ``apply`` threw (``entry did not activate``,
    e.g. an output schema rc.8's ``defineTool`` rejects). Absolute paths are cut to their last part.
    """
    lines = stderr.splitlines()
    for line in lines:
        overlay = _OVERLAY.match(line.strip())
        if overlay is None:
            continue
        parts = overlay["path"].split("/")
        if "node_modules" not in parts:
            return None
        at = len(parts) - 1 - parts[::-1].index("node_modules")
        package = "/".join(parts[at + 1:at + 3]) if parts[at + 1].startswith("@") else parts[at + 1]
        file = "/".join(parts[at + (3 if package.startswith("@") else 2):])
        if package == _OWN:
            return None
        missing = "has no" if overlay["code"] == "ENOENT" else f"cannot read ({overlay['code']})"
        return (f"PLUGIN_BROKEN: plugin {package}: its package {missing} {file}, the file its package.json's "
                f"dsh.bundle.patch names; every run of profile {profile} fails until it is fixed; fix: install a "
                f"version of {package} that ships {file}, or remove it: "
                f"dsh plugin --profile {profile} remove {package}")
    if not any(_TREE in line for line in lines):
        return None
    for line in lines:
        entry = _ENTRY.match(line.strip())
        if entry is None or entry["spec"].startswith(("Error:", "at ")) or _OWN in entry["spec"]:
            continue
        spec = entry["spec"]
        plugin = spec.rsplit("/", 1)[-1] if spec.startswith(("file:", "/")) else spec
        message = _ABSOLUTE.sub(r"\1", entry["message"])[:300]
        return (f"PLUGIN_BROKEN: plugin {plugin} did not load: {entry['error']}: {message}; every run of profile "
                f"{profile} fails until it is fixed; fix: correct the plugin (its author's fix), or leave its row "
                f"out of the profile (disable it in cordis.patch.yml, or dsh plugin --profile {profile} remove it)")
    return None
