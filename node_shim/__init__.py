"""The Node shim's files, shipped inside the Python distribution so a pip-installed sidecar can
pack and install its own DSH plugin."""

from pathlib import Path

__all__ = ["SHIM_DIR"]

SHIM_DIR = Path(__file__).resolve().parent
