"""The DSH host on this machine: the toolchain (Node, pnpm, DSH rc.8 and its fix), plugin
install, ``host doctor`` and the staging of a run's session logs.

Imports only ``python_core``: the sidecar's session room and the run API build on it.
"""
