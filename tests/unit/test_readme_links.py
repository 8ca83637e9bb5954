"""The README's links work where it is read from PyPI: absolute, and pointing at files that exist."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def test_every_readme_link_is_absolute_and_a_repository_link_names_a_file_that_exists() -> None:
    home = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]
    owner_repo = home.removeprefix("https://github.com/")
    prefixes = (f"{home}/blob/main/", f"https://raw.githubusercontent.com/{owner_repo}/main/")
    targets = LINK.findall((ROOT / "README.md").read_text())
    assert targets
    for target in targets:
        if target.startswith("#"):
            continue  # an anchor of the README itself
        assert re.match(r"https?://", target), f"relative link {target} breaks on PyPI"
        for prefix in prefixes:
            if target.startswith(prefix):
                path = target.removeprefix(prefix).split("#")[0]
                assert (ROOT / path).exists(), f"{target}: no {path} in the repository"
