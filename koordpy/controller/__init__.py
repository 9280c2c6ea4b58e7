"""The live scheduler's I/O shell: watches the API server, runs the core, writes decisions.

Belongs here: kopf event handlers and the pod watch that keep an in-memory cache of the
cluster, the loop that turns the cache into a snapshot and runs
``koordpy.core.cycle.schedule``, and the writer that binds pods, evicts preemption's victims,
writes nominations, conditions, events, annotations and statuses with retries; and the one-off LIST of every kind that
``koordpy topology show`` draws a live cluster from, filed in the cache for ``koordpy explain``
(``oneshot``). Does not belong here: any scheduling rule.
This package (with the CLI) is the only one allowed to import kopf, kubernetes_asyncio and
asyncio.
"""
