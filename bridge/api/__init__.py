"""The user's side: the run API (one headless DSH turn in, a typed result out) with its cold
and warm transports, the warm pool, the pytest plugin and the ``dsh-sidecar`` CLI.

The top room: it may import every other; nothing imports it but ``dsh_sidecar``.
"""
