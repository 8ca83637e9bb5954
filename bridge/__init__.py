"""The sidecar process: transport, lifecycle and the hooks that ask ``python_core``."""

__all__: list[str] = []
