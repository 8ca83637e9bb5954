"""The rooms of ``bridge/`` import only downward (docs/architecture.md), and ``python_core``
never imports ``bridge``.

Order, lowest first: ``transport`` (the wire), ``host`` (the DSH installation), ``hooks`` (one
handler per feature), ``session`` (the router and per-session state), ``api`` (the user's side).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ["transport", "host", "hooks", "session", "api"]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["dsh_sidecar", "bridge"] or len(parts) < 3:
        return None
    return parts[2]


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room: str) -> None:
    allowed = set(ROOMS[: ROOMS.index(room) + 1])
    wrong = {
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "bridge" / room).rglob("*.py"))
        for module in _imports(path)
        if (target := _room(module)) is not None and target not in allowed
    }
    assert not wrong


def test_bridge_holds_only_rooms_and_its_entry_point() -> None:
    loose = sorted(p.name for p in (ROOT / "bridge").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]
    rooms = sorted(p.name for p in (ROOT / "bridge").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert rooms == sorted(ROOMS)


def test_python_core_never_imports_bridge() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "python_core").rglob("*.py"))
        for module in _imports(path)
        if module.startswith("dsh_sidecar.bridge")
    ]
    assert not wrong


FEATURES = ("mock", "tool_cassette", "model_cassette", "subagent_cassette")
# The sidecar row's config is the one module above the features: it composes each one's section.
ABOVE_FEATURES = {"config.py"}


def test_python_cores_shared_modules_depend_on_no_feature() -> None:
    wrong = [
        f"python_core/{path.name} imports {module}"
        for path in sorted((ROOT / "python_core").glob("*.py"))
        if path.name not in ABOVE_FEATURES
        for module in _imports(path)
        if module.startswith("dsh_sidecar.python_core.") and module.split(".")[2] in FEATURES
    ]
    assert not wrong


def test_a_feature_imports_no_other_feature() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} imports {module}"
        for feature in FEATURES
        for path in sorted((ROOT / "python_core" / feature).rglob("*.py"))
        for module in _imports(path)
        if module.startswith("dsh_sidecar.python_core.") and module.split(".")[2] in FEATURES
        and module.split(".")[2] != feature
    ]
    assert not wrong
