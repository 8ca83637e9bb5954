"""``dsh-sidecar host doctor``'s checks: the ``sidecar`` row as a plain ``dsh`` run composes it.

The row is read from ``dsh --dump-config`` (the composed profile tree, block-style YAML written
by rc.8), so the doctor sees the user's own layers, not the package's defaults. Only the row's
block is parsed, with a reader for the subset that dump uses (mappings, lists of scalars, quoted
and plain scalars, ``[]``/``{}``); anything else makes the row's config unknown, never a guess.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dsh_sidecar.bridge.host.install import PACKAGE
from dsh_sidecar.bridge.host.stderr import broken_plugin, stderr_tail

__all__ = ["Boot", "SidecarRow", "boot_check", "boot_outcome", "parse_row", "python_check", "read_row"]

_NAMED = re.compile(r"^[A-Z][A-Z_]+: ")
# The cassette sections whose replay file a run reads from its working directory.
_FILE_SECTIONS = ("toolCassette", "subagentCassette", "modelCassette")


@dataclass(frozen=True)
class SidecarRow:
    """The ``sidecar`` row of the composed profile: ``missing``, ``disabled`` or ``enabled``."""

    state: Literal["missing", "disabled", "enabled", "unknown", "uncomposed"]
    config: dict[str, Any] | None
    # ``uncomposed``: why ``dsh --dump-config`` failed (a named ``PLUGIN_BROKEN`` line when it is one).
    problem: str = ""

    def replay_files(self) -> list[str]:
        """Relative replay cassette paths of the row (resolved against each run's cwd)."""
        files = []
        for section in _FILE_SECTIONS:
            value = (self.config or {}).get(section)
            if isinstance(value, dict) and value.get("mode") == "replay" and isinstance(value.get("file"), str):
                if not os.path.isabs(value["file"]):
                    files.append(value["file"])
        return files


def read_row(dsh: Path, profile: str, environ: dict[str, str], cwd: Path) -> SidecarRow:
    """The ``sidecar`` row of ``profile`` as ``dsh --dump-config`` composes it in ``cwd``."""
    proc = subprocess.run([str(dsh), "--profile", profile, "--dump-config"], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        named = broken_plugin(proc.stderr, profile)
        useful = stderr_tail(proc.stderr, known=[])
        return SidecarRow("uncomposed", None, named or (useful or [f"--dump-config exited {proc.returncode}"])[-1])
    return parse_row(proc.stdout)


def parse_row(dump: str) -> SidecarRow:
    """The ``sidecar`` row of a ``--dump-config`` text (``unknown`` when its block is not the expected subset)."""
    lines = dump.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "- id: sidecar"), None)
    if start is None:
        return SidecarRow("missing", None)
    block = ["  id: sidecar"]
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        block.append(line)
    try:
        row = _parse(block, 0, 2)[0]
    except (ValueError, IndexError):
        return SidecarRow("unknown", None)
    config = row.get("config")
    if row.get("disabled") is True:
        return SidecarRow("disabled", config if isinstance(config, dict) else None)
    return SidecarRow("enabled", config if isinstance(config, dict) else None)


def _scalar(text: str) -> Any:
    if text.startswith("'"):
        if len(text) < 2 or not text.endswith("'"):
            raise ValueError(text)
        return text[1:-1].replace("''", "'")
    if text.startswith('"'):
        return json.loads(text)
    fixed = {"[]": [], "{}": {}, "true": True, "false": False, "null": None, "~": None}
    if text in fixed:
        return fixed[text]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    # Flow collections, anchors, tags, block scalars, and what would be a mapping or a comment
    # inside a plain scalar: outside the subset, so the row is unknown rather than misread.
    if text[:1] in "[{&*!|>%@`" or ": " in text or " #" in text or text.endswith(":"):
        raise ValueError(text)
    return text


def _parse(lines: list[str], at: int, indent: int) -> tuple[Any, int]:
    """Parse the block at ``indent`` starting at line ``at``; return the value and the next line."""
    if lines[at][indent:].startswith("- "):
        items = []
        while at < len(lines) and lines[at].startswith(" " * indent + "- "):
            items.append(_scalar(lines[at][indent + 2:].strip()))
            at += 1
        return items, at
    mapping: dict[str, Any] = {}
    while at < len(lines) and lines[at].startswith(" " * indent) and lines[at][indent] != " ":
        key, sep, rest = lines[at][indent:].partition(":")
        if not sep or (rest and not rest.startswith(" ")):
            raise ValueError(lines[at])
        key = _scalar(key.strip())
        at += 1
        if rest.strip():
            mapping[key] = _scalar(rest.strip())
        elif at < len(lines) and lines[at].startswith(" " * (indent + 2)):
            mapping[key], at = _parse(lines, at, indent + 2)
        elif at < len(lines) and lines[at].startswith(" " * indent + "- "):
            mapping[key], at = _parse(lines, at, indent)  # a list at the key's own indent
        else:
            mapping[key] = None
    return mapping, at


def python_check(profile_dir: Path, row: SidecarRow) -> tuple[bool, str]:
    """Whether the interpreter the row starts (its ``python`` key, else the installed one) imports the bridge."""
    configured = (row.config or {}).get("python")
    try:
        if isinstance(configured, list) and configured and all(isinstance(p, str) for p in configured):
            python, source = configured, "the row's python key"
        else:
            installed = json.loads((profile_dir / "node_modules" / PACKAGE / "install.json").read_text())
            python, source = installed["python"], "the interpreter that ran install"
        # From an empty folder: `python -c` puts the cwd on sys.path, and a checkout's cwd would
        # let an interpreter without dsh-sidecar import the bridge from the sources.
        with tempfile.TemporaryDirectory() as empty:
            proc = subprocess.run([*python, "-c", "import dsh_sidecar.bridge.session.sidecar"], cwd=empty,
                                  capture_output=True, text=True, timeout=60)
    except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as exc:
        return False, f"cannot start the row's python ({type(exc).__name__}); re-run `dsh-sidecar install` from " \
                      "the right venv, or fix the row's python key"
    if proc.returncode != 0:
        return False, f"{python[0]} ({source}) cannot import the bridge; re-run `dsh-sidecar install` from the " \
                      "right venv, or fix the row's python key"
    return True, f"{python[0]} ({source}) imports the bridge"


@dataclass(frozen=True)
class Boot:
    """A real boot of the profile: whether the sidecar answered, and the first named line."""

    ok: bool
    line: str


def boot_check(dsh: Path, profile: str, environ: dict[str, str], row: SidecarRow, cwd: Path) -> Boot:
    """Boot ``profile`` as configured (the row's own config and python) and ask the sidecar's mock route.

    The boot runs in an empty folder, so the doctor's turn never writes a recording into the
    project; the row's relative replay files are linked into it from ``cwd`` so they resolve as
    in a run started there. Only the row is switched on and the default model pointed at the
    sidecar's mock route. The sidecar answering proves the plugin loaded, the config passed the
    validator and the row's python started the bridge; errors at the end of that empty turn (an
    unconsumed replay, nothing recorded) are expected and not the profile's fault.
    """
    with tempfile.TemporaryDirectory() as work:
        for name in row.replay_files():
            source, target = cwd / name, Path(work) / name
            if source.exists() and ".." not in Path(name).parts:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(source.resolve())
        patch = Path(work) / ".dsh-doctor.patch.yml"
        # An id-targeted patch replaces only the keys it names: the row keeps its config.
        patch.write_text(
            "- id: sidecar\n  disabled: false\n"
            "- id: agent-default-model\n  config: { provider: mock, model: mock }\n"
        )
        proc = subprocess.run(
            [str(dsh), "--profile", profile, "--patch", str(patch), "doctor"],
            cwd=work, env=environ, capture_output=True, text=True, timeout=120,
        )
    return boot_outcome(proc.returncode, proc.stdout, proc.stderr)


def boot_outcome(returncode: int, stdout: str, stderr: str) -> Boot:
    """What a doctor boot shows: ok, or the line that names why it failed."""
    if "dsh-sidecar mock route" in stdout:
        return Boot(True, "ok: the sidecar started with the row's config and answered")
    useful = stderr_tail(stderr, known=[], limit=None)
    # The named error wherever it is: under load rc.8 may print more lines after the sidecar's,
    # and its own "FAILED: agent ... setup aborted" (a code without an underscore) comes last.
    named = sorted((line for line in useful if _NAMED.match(line)), key=lambda line: "_" not in line.split(":")[0])
    return Boot(False, (named or useful[-6:] or [f"exit {returncode}, no stderr"])[0])
