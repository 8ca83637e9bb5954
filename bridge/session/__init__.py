"""The sidecar's side of a run: the router that gives every hook to its session, the state
of one session, and the warm host's control socket (many sessions, one process).

Imports ``hooks``, ``host`` and ``transport`` below it.
"""
