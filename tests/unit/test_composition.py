"""The plugin composition a tool cassette keeps, and what a replay says when it changed (issue 29 item 8)."""

from __future__ import annotations

from dsh_sidecar.python_core.composition import PluginRow, compose, describe_change

ROWS = [
    PluginRow("cordis:include", True),
    PluginRow("@deepseek-ai/dsh-tool-fs", True, "@deepseek-ai/dsh-tool-fs", "0.1.0-rc.8"),
    PluginRow("@deepseek-ai/dsh-tool-pwsh", False, "@deepseek-ai/dsh-tool-pwsh", "0.1.0-rc.8"),
    PluginRow("file:///opt/someone/plugins/mask/index.js", True, "dsh-mask-plugin", "1.2.0"),
    PluginRow("file:///opt/someone/plugins/loose.js", True),
]


def test_the_composition_is_the_enabled_rows_packages_and_versions_without_directories() -> None:
    assert compose(ROWS) == {"@deepseek-ai/dsh-tool-fs": "0.1.0-rc.8", "dsh-mask-plugin": "1.2.0", "loose.js": None}


def test_a_change_names_rows_absent_added_and_upgraded() -> None:
    recorded = {"dsh-mask-plugin": "1.2.0", "dsh-vault": "1.0.0", "loose.js": None}
    assert describe_change(recorded, recorded) == ""
    assert describe_change(recorded, {"dsh-vault": "1.1.0", "dsh-reader": "2.0.0", "loose.js": None}) == (
        "dsh-mask-plugin 1.2.0 is absent, dsh-reader 2.0.0 was added, dsh-vault 1.0.0 -> 1.1.0")
    many = {f"p{i}": "1" for i in range(5)}
    assert describe_change(many, {}) == "p0 1 is absent, p1 1 is absent, p2 1 is absent and 2 more"
