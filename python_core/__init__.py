"""dsh-sidecar's logic: canonical JSON, errors, config, and the three features."""

__all__ = ["__version__"]

__version__ = "0.1.0"
