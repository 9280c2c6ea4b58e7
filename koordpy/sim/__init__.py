"""The offline simulator: the same core as the live scheduler, driven in memory.

Belongs here: turning a list of raw Kubernetes objects into a snapshot (with the API
server's and admission's defaulting that a real cluster would apply), applying the
core's decisions to that in-memory world, and running cycles to quiescence. Does not
belong here: reading files (the CLI does it) or any scheduling rule (the core has them).

The simulator lives in ``koordpy.sim.simulator``; this package imports nothing, so that
``koordpy.sim.errors`` stays cheap to import for the command line.
"""
