"""koordpy: a gang- and network-topology-aware Kubernetes scheduler.

Layout (each package says in its own docstring what belongs in it):

- ``koordpy.api``: typed models parsed from raw Kubernetes objects; no scheduling logic.
- ``koordpy.kernels``: numba kernels over numpy arrays, each with a plain-Python twin.
- ``koordpy.core``: the pure scheduling core; a snapshot and the time in, decisions out.
- ``koordpy.sim``: the offline simulator that drives the core to quiescence in memory.
- ``koordpy.cli``: the command line; the only place here that reads files.
- ``koordpy.errors``: ``KoordpyError``, the root every deliberate error derives from, with its exit status.
"""

__version__ = "0.1.0"
