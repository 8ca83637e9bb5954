"""Small third-party DSH plugins written the way plugins nobody here wrote are (issue 29): they read
files relative to ``process.cwd()``, keep state under ``$DSH_HOME`` through rc.8's ``dshHomePath``,
or are broken (a bundle naming a patch file the package lacks, an output schema rc.8 rejects).

Each is a plain ESM file in a folder whose ``node_modules`` links the profile's (so its imports
are the host's own instances) and enters a run as an inserted row with a ``file:`` URL, or, for
a package with a bundle, is installed into a private DSH home with ``dsh-sidecar add-local-plugin``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from dshrun import DSH_HOME, HOST, ROOT

from dsh_sidecar.bridge.api.run import Row

__all__ = ["BROKEN_SCHEMA", "CWD_TOOLS", "HOME_STATE", "broken_bundle_home", "plugin_row", "write_plugin"]

CLI = ROOT / ".venv" / "bin" / "dsh-sidecar"

# `cat_input`: reads input.txt from process.cwd(), as a terminal plugin's `cat input.txt` does.
CWD_TOOLS = """
import { readFileSync } from 'node:fs'
import { defineTool } from '@deepseek-ai/dsh-tools'
export const name = 'cwd-tools'
export const inject = ['tools']
export function apply(ctx) {
  ctx.tools.register(defineTool({
    name: 'cat_input',
    description: 'Print input.txt of the working directory.',
    parameters: { file: { type: 'string' } },
    output: {
      schema: { type: 'object', additionalProperties: false, properties: { text: { type: 'string', required: true } } },
      render: (_args, v) => [{ type: 'text', text: v.text }],
    },
    async execute() {
      try { return { text: readFileSync('input.txt', 'utf8') } }
      catch (error) { return { text: `cat: input.txt: ${error.code}` } }
    },
  }))
}
"""

# `state_put` / `state_get`: a store under $DSH_HOME made on first use, as a memory vault's `storages/`.
HOME_STATE = """
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { dshHomePath } from '@deepseek-ai/dsh-home-paths'
import { defineTool } from '@deepseek-ai/dsh-tools'
export const name = 'home-state'
export const inject = ['tools']
export function apply(ctx, config) {
  const dir = () => dshHomePath(config.store ?? 'plugin-state')
  const value = { type: 'string', required: true }
  const output = { schema: { type: 'object', additionalProperties: false, properties: { value } },
    render: (_args, v) => [{ type: 'text', text: `value:${v.value}` }] }
  ctx.tools.register(defineTool({
    name: 'state_put', description: 'Remember a value.', parameters: { value }, output,
    async execute(args) {
      mkdirSync(dir(), { recursive: true })
      writeFileSync(join(dir(), 'value.txt'), args.value)
      return { value: args.value }
    },
  }))
  ctx.tools.register(defineTool({
    name: 'state_get', description: 'Recall the value.', parameters: { key: { type: 'string' } }, output,
    async execute() {
      try { return { value: readFileSync(join(dir(), 'value.txt'), 'utf8') } } catch { return { value: '(none)' } }
    },
  }))
}
"""

# `bad_schema`: an output schema rc.8's defineTool rejects (a property type it does not know).
BROKEN_SCHEMA = """
import { defineTool } from '@deepseek-ai/dsh-tools'
export const name = 'broken-schema'
export const inject = ['tools']
export function apply(ctx) {
  ctx.tools.register(defineTool({
    name: 'bad_schema', description: 'A tool whose output schema is invalid.', parameters: {},
    output: { schema: { type: 'object', properties: { when: { type: 'datetime', required: true } } },
      render: (_args, v) => [{ type: 'text', text: String(v.when) }] },
    async execute() { return { when: 'now' } },
  }))
}
"""


def write_plugin(folder: Path, name: str, source: str) -> Path:
    """``folder/<name>.js`` holding ``source``, beside a link to the profile's modules."""
    folder.mkdir(parents=True, exist_ok=True)
    modules = folder / "node_modules"
    if not modules.exists():
        modules.symlink_to(DSH_HOME / "profiles" / "node_modules")
    file = folder / f"{name}.js"
    file.write_text(source)
    return file


def plugin_row(folder: Path, name: str, source: str, config: dict[str, object] | None = None) -> Row:
    """A row inserting the plugin ``source`` (written to ``folder``) into a run's composition."""
    return Row(name, write_plugin(folder, name, source).as_uri(), dict(config or {}), insert=True)


def broken_bundle_home(tmp_path: Path) -> Path:
    """A DSH home of its own whose headless profile has the sidecar, the example tools and
    ``dsh-broken-bundle``: a package whose ``dsh.bundle.patch`` names a file it does not ship."""
    home = tmp_path / "dsh-home"
    package = tmp_path / "dsh-broken-bundle"
    package.mkdir()
    (package / "package.json").write_text(json.dumps({
        "name": "dsh-broken-bundle", "version": "1.0.0", "type": "module", "main": "./index.js",
        "files": ["index.js"], "dsh": {"bundle": {"patch": "./cordis.patch.yml"}},
    }))
    (package / "index.js").write_text("export const name = 'dsh-broken-bundle'\nexport function apply() {}\n")
    for args in (("install", "--profile", "headless"),
                 ("add-local-plugin", str(ROOT / "examples" / "dsh-example-tools")),
                 ("add-local-plugin", str(package))):
        env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SIDECAR_HOST")}
        done = subprocess.run([str(CLI), *args, "--prefix", str(HOST), "--dsh-home", str(home)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        # Adding the broken package installs it, then fails the profile's check, as every boot will.
        assert done.returncode == 0 or args[1] == str(package), done.stderr
    assert (home / "profiles" / "headless" / "node_modules" / "dsh-broken-bundle").is_dir()
    return home
