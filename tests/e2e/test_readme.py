"""The README's examples run as written, against the bootstrapped host.

Every fenced block that could hold a command or output (info string ``sh``, ``bash``, ``shell``,
``console``, ``python`` or none) carries a marker on the line just above its fence saying how it
is checked, so a new block cannot go untested silently:

- ``<!-- readme-test: shell [exit=N] -->``: run by bash (``set -euo pipefail``) in one shared
  work folder, in README order, as a user's shell session: variables a block exports (``eval
  "$(dsh-sidecar shellenv)"``) reach the later blocks. The folder holds a link to this
  checkout's ``examples/``; the session starts with ``.venv/bin`` on ``PATH`` (what ``pip
  install`` gives) but no ``dsh``, no ``DSH_HOME`` and no API key. The block must exit N
  (default 0).
- ``<!-- readme-test: python -->``: run by the venv's ``python`` in that session, in order.
- ``<!-- readme-test: checkout -->``: run by bash from the checkout's root (commands about this
  repository's own files, such as ``pytest tests/examples``).
- ``<!-- readme-test: pytest FILE -->``: the block is part of FILE verbatim, and FILE passes.
- ``<!-- readme-test: output NAME -->``: every line of the block is a line of the real output
  of NAME, in order (``…`` stands for any text; a line holding only ``…`` is skipped):
  ``previous`` (the block run just before, stdout and stderr as one stream),
  ``demo`` (``scripts/demo``) or ``weather-mismatch`` (the README's pytest example asking for
  Rome against the recorded Paris cassette).
- ``<!-- readme-test: patch -->`` (``yaml`` blocks): a profile patch; ``dsh --profile headless
  --patch BLOCK --dump-config`` composes it with no warning (a row name that does not match, an
  id the profile does not have).
- ``<!-- readme-test: skip (REASON) -->``: not run; the reason is required.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from dshrun import ROOT

pytestmark = pytest.mark.slow  # every README block, in order, in one shell session

README = ROOT / "README.md"
VENV_BIN = ROOT / ".venv" / "bin"
CHECKED_LANGS = {"sh", "bash", "shell", "console", "python", "yaml", ""}
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>\S*)\s*$")
MARKER = re.compile(r"^\s*<!-- readme-test: (?P<kind>[a-z-]+)(?: (?P<arg>.*?))? -->\s*$")
KINDS = {"shell": {"sh", "bash"}, "checkout": {"sh", "bash"}, "python": {"python"}, "pytest": {"python"},
         "output": {""}, "patch": {"yaml"}, "skip": CHECKED_LANGS}


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts, its info string, its dedented text and its marker."""

    line: int
    lang: str
    text: str
    kind: str | None
    arg: str


def parse(text: str) -> list[Block]:
    """Every fenced block of ``text`` with the marker on the line above its fence, if any."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        indent = len(fence["indent"])
        end = next(i for i in range(index + 1, len(lines)) if lines[i].strip() == "```")
        body = "\n".join(line[indent:] for line in lines[index + 1:end]) + "\n"
        marker = MARKER.match(lines[index - 1]) if index > 0 else None
        blocks.append(Block(index + 1, fence["lang"], body, marker and marker["kind"],
                            (marker and marker["arg"]) or ""))
        index = end + 1
    return blocks


BLOCKS = [b for b in parse(README.read_text()) if b.lang in CHECKED_LANGS]
RUN = [b for b in BLOCKS if b.kind in ("shell", "python", "output", "checkout", "pytest", "patch")]


def test_every_block_is_classified() -> None:
    assert len(BLOCKS) > 10
    problems = []
    for b in BLOCKS:
        if b.kind is None:
            problems.append(f"README.md:{b.line}: ```{b.lang} block without a <!-- readme-test: ... --> marker")
        elif b.kind not in KINDS or b.lang not in KINDS[b.kind]:
            problems.append(f"README.md:{b.line}: marker {b.kind!r} does not fit a ```{b.lang} block")
        elif b.kind == "skip" and not re.fullmatch(r"\(.+\)", b.arg):
            problems.append(f"README.md:{b.line}: a skip needs its reason in parentheses")
        elif b.kind == "output" and b.arg not in ("previous", "demo", "weather-mismatch"):
            problems.append(f"README.md:{b.line}: unknown output source {b.arg!r}")
    assert problems == []


def test_the_parser_sees_markers_indented_blocks_and_unmarked_blocks() -> None:
    text = "x\n<!-- readme-test: shell exit=1 -->\n```sh\nfalse\n```\n  <!-- readme-test: output demo -->\n  ```\n" \
           "  a\n    b\n  ```\n```python\nprint()\n```\n"
    assert parse(text) == [Block(3, "sh", "false\n", "shell", "exit=1"), Block(7, "", "a\n  b\n", "output", "demo"),
                           Block(11, "python", "print()\n", None, "")]


@dataclass
class Ran:
    """What one block (or output source) did."""

    rc: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"exit {self.rc}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


def _environ(path_head: list[Path]) -> dict[str, str]:
    """A user's environment: no key, no DSH_HOME, no project host on PATH; ``path_head`` first."""
    env = {k: v for k, v in os.environ.items()
           if "API_KEY" not in k and k not in ("DSH_HOME", "DSH_SIDECAR_HOST", "VIRTUAL_ENV")}
    host_bin = str(ROOT / ".host" / "bin")
    rest = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != host_bin and p != str(VENV_BIN)]
    env["PATH"] = os.pathsep.join([*map(str, path_head), *rest])
    env["DSH_TELEMETRY_DISABLED"] = "1"
    return env


class Session:
    """Runs the README's blocks in order, once, carrying the shell state from block to block."""

    def __init__(self, work: Path, blocks: list[Block] | None = None) -> None:
        self.blocks = RUN if blocks is None else blocks
        self.work = work
        self.state = work.parent / "readme-state.sh"
        self.state.write_text("")
        self.cwd = work.parent / "readme-cwd"
        self.cwd.write_text(str(work))
        self.results: dict[int, Ran] = {}
        self.previous: Ran | None = None
        self.sources: dict[str, Ran] = {}
        (work / "examples").symlink_to(ROOT / "examples")

    def result(self, block: Block) -> Ran:
        """The result of ``block``, running it (and every block before it) if not done yet."""
        for b in self.blocks:
            if b.line not in self.results:
                self.results[b.line] = self._run(b)
            if b.line == block.line:
                return self.results[b.line]
        raise AssertionError(f"README.md:{block.line} is not a run block")

    def _run(self, block: Block) -> Ran:
        if block.kind == "output":
            return self._source(block.arg)
        if block.kind == "patch":
            patch = self.work.parent / f"readme-block-{block.line}.patch.yml"
            patch.write_text(block.text)
            host = ROOT / ".host"
            env = {**_environ([VENV_BIN]), "DSH_HOME": str(host / "dsh-home")}
            ran = _command([str(host / "bin" / "dsh"), "--profile", "headless", "--patch", str(patch), "--dump-config"],
                           self.work.parent, env)
            return Ran(ran.rc or (1 if ran.stderr else 0), ran.stdout, ran.stderr)
        if block.kind == "checkout":
            ran = _bash(f"set -euo pipefail\n{block.text}", ROOT, _environ([VENV_BIN]))
        elif block.kind == "pytest":
            ran = _command([str(VENV_BIN / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", block.arg],
                           ROOT, _environ([VENV_BIN]))
        else:
            body = block.text
            if block.kind == "python":
                script = self.work.parent / f"readme-block-{block.line}.py"
                script.write_text(block.text)
                body = f"python {script}\n"
            # stderr joins stdout, so shown output keeps the order a terminal shows.
            ran = _bash(
                f"exec 2>&1\nsource {self.state}\ncd \"$(cat {self.cwd})\"\n"
                f"trap 'export -p > {self.state}; pwd > {self.cwd}' EXIT\nset -euo pipefail\n{body}",
                self.work, _environ([VENV_BIN]),
            )
        self.previous = ran
        return ran

    def _source(self, name: str) -> Ran:
        if name == "previous":
            assert self.previous is not None, "an `output previous` block must follow a run block"
            return self.previous
        if name == "demo":
            return _command([str(VENV_BIN / "python"), str(ROOT / "scripts" / "demo.py")], ROOT, _environ([VENV_BIN]))
        if name in self.sources:
            return self.sources[name]  # several blocks show parts of one run's output
        project = self.work.parent / "weather-mismatch"
        shutil.copytree(ROOT / "tests" / "examples", project)
        test = project / "test_weather.py"
        text = test.read_text()
        assert text.count('{"city": "Paris"})') == 1
        test.write_text(text.replace('{"city": "Paris"})', '{"city": "Rome"})'))
        patches = ROOT / "examples" / "example-tools.patch.yml"
        ran = _command([str(VENV_BIN / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-o", f"dsh_patches={patches}", "test_weather.py"], project, _environ([VENV_BIN]))
        self.sources[name] = ran
        return ran


def _command(argv: list[str], cwd: Path, env: dict[str, str]) -> Ran:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    return Ran(proc.returncode, proc.stdout, proc.stderr)


def _bash(script: str, cwd: Path, env: dict[str, str]) -> Ran:
    return _command(["bash", "-c", script], cwd, env)


def shown_lines_appear(shown: str, output: str) -> bool:
    """Whether every non-blank line of ``shown`` is a whole line of ``output``, in order (``…``: any text)."""
    lines = [line.rstrip() for line in output.splitlines()]
    position = 0
    for wanted in (line.rstrip() for line in shown.splitlines()):
        if wanted in ("", "…"):
            continue
        pattern = re.compile(".*?".join(map(re.escape, wanted.split("…"))))
        position = next((i + 1 for i in range(position, len(lines)) if pattern.fullmatch(lines[i])), -1)
        if position < 0:
            return False
    return True


def test_shown_lines_match_whole_lines_in_order_with_ellipsis_wildcards() -> None:
    output = "head\nsha256:0123abcd… differ\nlast line\n"
    assert shown_lines_appear("sha256:0123… differ\n\nlast line\n", output)
    assert shown_lines_appear("head\n…\nlast line\n", output)
    assert not shown_lines_appear("last line\nhead\n", output)
    assert not shown_lines_appear("last\n", output)


# A block that (re)installs into the project's host changes the DSH home every e2e test uses:
# rc.8's `plugin add` removes the installed package first (tests/conftest.py, writes_dsh_home).
_INSTALLS = re.compile(r"dsh-sidecar (host install|install|add-local-plugin)\b")


@pytest.mark.parametrize("block", [
    pytest.param(b, marks=[pytest.mark.writes_dsh_home] if _INSTALLS.search(b.text) else [],
                 id=f"line{b.line}-{b.kind}" + (f"-{b.arg}" if b.kind == "output" else ""))
    for b in RUN
])
def test_readme_block(session: Session, block: Block) -> None:
    ran = session.result(block)
    if block.kind == "output":
        assert shown_lines_appear(block.text, ran.stdout + "\n" + ran.stderr), (
            f"README.md:{block.line}: the shown output is not what `{block.arg}` prints\n{ran.explain()}")
        return
    if block.kind == "pytest":
        assert block.text.strip() in (ROOT / block.arg).read_text(), f"README.md:{block.line} differs from {block.arg}"
    expected = int(block.arg.removeprefix("exit=")) if block.arg.startswith("exit=") else 0
    assert ran.rc == expected, f"README.md:{block.line}: expected exit {expected}\n{ran.explain()}"

