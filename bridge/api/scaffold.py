"""``dsh-sidecar new-plugin NAME``: the files of a DSH tool plugin and a pytest test that records
and replays it (docs/tool-plugin-guide.md explains every line of what this writes).

The plugin is the guide's: plain ESM, a bundle patch that inserts its row disabled, one tool
defined with rc.8's ``defineTool`` that reads a file relative to the calling session's folder.
Nothing is written when the folder exists or the name is not a package name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec

from dsh_sidecar.python_core.errors import SidecarError

__all__ = ["InvalidName", "PluginExists", "Scaffold", "next_steps", "scaffold_plugin", "tool_name"]

_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_MAX_NAME = 50


class InvalidName(SidecarError):
    """The plugin name is not a lowercase npm package name usable as a row id."""

    code = "INVALID_NAME"

    def __init__(self, reason: str) -> None:
        super().__init__(f"NAME: {reason}; give lowercase letters, digits and single dashes, starting with a "
                         f"letter, at most {_MAX_NAME} characters (e.g. my-tools)")


class PluginExists(SidecarError):
    """The folder to scaffold into exists already; nothing was written."""

    code = "PLUGIN_EXISTS"

    def __init__(self, folder: str) -> None:
        super().__init__(f"{folder}: the folder exists; nothing was written; choose another NAME or --dir, "
                         "or remove that folder")


class Scaffold(msgspec.Struct, frozen=True):
    """What ``scaffold_plugin`` wrote: the folder, its files (relative), the tool's name."""

    folder: Path
    files: list[str]
    tool: str


def tool_name(name: str) -> str:
    """The scaffolded tool's name: the package name in snake case, then ``_word_count``."""
    return name.replace("-", "_") + "_word_count"


def _check_name(name: str) -> None:
    if not name:
        raise InvalidName("is empty")
    if len(name) > _MAX_NAME:
        raise InvalidName(f"is {len(name)} characters long")
    if not _NAME.fullmatch(name):
        raise InvalidName("is not a plain package name")


def scaffold_plugin(name: str, parent: Path) -> Scaffold:
    """Write the plugin ``parent/name`` with its test; refuse a bad name or an existing folder.

    Raises:
        InvalidName: ``name`` is not a lowercase package name.
        PluginExists: ``parent/name`` exists (nothing is written).
    """
    _check_name(name)
    folder = parent / name
    if folder.exists() or folder.is_symlink():
        raise PluginExists(name)
    tool = tool_name(name)
    files = {
        "package.json": _package_json(name),
        "cordis.patch.yml": _PATCH.format(name=name),
        "index.js": _INDEX.replace("{name}", name).replace("{tool}", tool),
        "tests/test_plugin.py": _TEST.replace("{name}", name).replace("{tool}", tool),
        "tests/.gitignore": _GITIGNORE,
        "README.md": _README.replace("{name}", name).replace("{tool}", tool),
    }
    parent.mkdir(parents=True, exist_ok=True)
    folder.mkdir()  # create-only: a folder made meanwhile fails here, before any file is written
    for relative, text in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return Scaffold(folder, list(files), tool)


def next_steps(scaffold: Scaffold, shown: str) -> list[str]:
    """The commands that install, record and replay the scaffolded plugin (``shown``: its folder as
    the user typed it)."""
    return [
        f"dsh-sidecar add-local-plugin {shown}            # pack it into the headless profile (row inserted disabled)",
        f"pytest {shown}/tests --dsh-record-mode once     # record tests/cassettes/... (the body runs)",
        f"pytest {shown}/tests                            # replay offline: the body does not run",
        "after an edit of index.js, run add-local-plugin again (a run warns PLUGIN_STALE until you do)",
    ]


def _package_json(name: str) -> str:
    package = {
        "name": name,
        "version": "0.1.0",
        "description": f"DSH tool plugin {name}",
        "type": "module",
        "main": "./index.js",
        "exports": {".": "./index.js", "./cordis.patch.yml": "./cordis.patch.yml", "./package.json": "./package.json"},
        "files": ["index.js", "cordis.patch.yml"],
        "keywords": ["dsh-plugin"],
        "license": "MIT",
        "dsh": {"bundle": {"patch": "./cordis.patch.yml"}},
        "peerDependencies": {
            "@deepseek-ai/cordis": "^4.0.1",
            "@deepseek-ai/dsh-llm": "^0.1.0-rc.8",
            "@deepseek-ai/dsh-tools": "^0.1.0-rc.8",
            "@deepseek-ai/schemastery": "^3.18.1",
        },
    }
    return json.dumps(package, indent=2) + "\n"


_PATCH = """\
# Applied when the package is added to a profile: insert this plugin's row, disabled.
# Enable it per run (the pytest test's Row) or in the profile's cordis.patch.yml.
- insert:
    - id: {name}
      name: {name}
      disabled: true
      config: {{}}
"""

_INDEX = """\
// @ts-check
/**
 * {name}: one DSH rc.8 tool, {tool}, which counts the words of a file in the session's folder.
 * Files resolve against the calling session's `header.cwd`, never `process.cwd()`: in a warm
 * host many sessions, each in its own folder, share one process.
 */
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import z from '@deepseek-ai/schemastery'
import { defineTool } from '@deepseek-ai/dsh-tools'
import { HarnessError } from '@deepseek-ai/dsh-llm'

export const name = '{name}'
export const inject = ['tools']
export const Config = z.object({
  maxBytes: z.natural().default(1_000_000),
})

/** @param {any} ctx @param {{maxBytes: number}} config */
export function apply(ctx, config) {
  /** The calling session's folder. @param {any} exec */
  const cwdOf = (exec) => exec?.agent?.session?.header?.cwd ?? process.cwd()

  ctx.tools.register(defineTool({
    name: '{tool}',
    description: 'Count the words of a text file in the working folder.',
    parameters: { file: { type: 'string', required: true, description: 'Path relative to the working folder' } },
    output: {
      schema: { type: 'object', additionalProperties: false, properties: {
        file: { type: 'string', required: true }, words: { type: 'integer', required: true } } },
      render: (_args, v) => [{ type: 'text', text: `${v.file}: ${v.words} words` }],
    },
    async execute(/** @type {any} */ args, /** @type {any} */ exec) {
      let text
      try {
        text = await readFile(resolve(cwdOf(exec), args.file), { encoding: 'utf8', signal: exec.signal })
      } catch (error) {
        // Thrown: the call fails (isError) with a runtime code the test can assert.
        throw new HarnessError(`cannot read ${args.file}`, 'FILE_UNREADABLE', { cause: error })
      }
      if (Buffer.byteLength(text) > config.maxBytes) {
        throw new HarnessError(`${args.file} is too large`, 'FILE_TOO_LARGE')
      }
      return { file: args.file, words: text.split(/\\s+/).filter(Boolean).length }
    },
  }))
}
"""

_TEST = '''\
"""Record and replay {tool} through headless DSH rc.8 (docs/tool-plugin-guide.md).

    dsh-sidecar add-local-plugin {name}           # once, and after every edit of index.js
    pytest {name}/tests --dsh-record-mode once    # records cassettes/test_plugin/*.tools.ndjson
    pytest {name}/tests                           # replays them: the tool body does not run
"""

import pytest

from dsh_sidecar import Row

# The package's bundle inserts its row disabled; each run enables it (config: Row's third argument).
PLUGIN = [Row("{name}", "{name}")]
TOOL = "{tool}"


def test_counts_the_words_of_a_file(dsh):
    (dsh.cwd / "notes.txt").write_text("one two three\\n")
    result = dsh.run(f'/mock run {TOOL}({{"file": "notes.txt"}})', tools=[TOOL], rows=PLUGIN)
    assert result.result(TOOL).value == {"file": "notes.txt", "words": 3}
    assert result.result(TOOL).output == "notes.txt: 3 words"
    if result.tool_cassette.mode == "replay":
        assert result.tool_cassette.consumed == 1  # served from the cassette: the body did not run


@pytest.mark.filterwarnings("ignore:TOOL_FAILURE_RECORDED")  # a failure recorded on purpose
def test_a_missing_file_is_a_failed_call(dsh):
    result = dsh.run(f'/mock run {TOOL}({{"file": "absent.txt"}})', tools=[TOOL], rows=PLUGIN, check=False)
    assert result.result(TOOL).error_code == "FILE_UNREADABLE"
'''

_GITIGNORE = """\
# A recording in progress (published into cassettes/ only when complete). Commit cassettes/.
.*.recording
*.partial
"""

_README = """\
# {name}

A DSH rc.8 tool plugin with one tool, `{tool}`, scaffolded by `dsh-sidecar new-plugin`.
How each file works: dsh-sidecar's docs/tool-plugin-guide.md.

```sh
dsh-sidecar add-local-plugin {name}
pytest {name}/tests --dsh-record-mode once
pytest {name}/tests
```
"""
