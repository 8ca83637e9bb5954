"""One handler per feature, named after the shim module that calls it (``tools``, ``model``,
``mock``, ``subagent``): each turns a hook's wire params into ``python_core`` engine calls
and the engine's decisions back into answers.

Imports ``transport`` and ``host`` below it.
"""
