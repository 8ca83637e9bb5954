"""Model cassette: record a provider route's ``stream()`` calls once, replay them offline."""

from dsh_sidecar.python_core.model_cassette.config import ModelCassetteConfig, parse_config
from dsh_sidecar.python_core.model_cassette.engine import (
    CloseReport,
    Forward,
    ModelCassetteEngine,
    ModelStats,
    Pass,
    Serve,
)
from dsh_sidecar.python_core.model_cassette.store import VerifyReport, load, verify_file

__all__ = [
    "CloseReport",
    "Forward",
    "ModelCassetteConfig",
    "ModelCassetteEngine",
    "ModelStats",
    "Pass",
    "Serve",
    "VerifyReport",
    "load",
    "parse_config",
    "verify_file",
]
