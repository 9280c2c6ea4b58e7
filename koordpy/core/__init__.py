"""The pure scheduling core: a snapshot of the cluster and the current time in, decisions out.

Belongs here: the topology tree, the gangs (``gang``) and the gang rule (``gangrule``), the
scheduler's state and its transitions (``state``), the scheduling cycle named after
kube-scheduler's extension points (pre_filter, filter, score, reserve, permit, bind,
post_filter), the verdicts they reach as typed values (``verdicts``) and the one place that
words them (``messages``), the transaction every change of one job is journaled in (``txn``) and
the Statement that commits or discards trial moves on it, and the decisions (bind, condition,
event, annotation, status) the cycle returns, the queue (``queue``) and the standing view it keeps
between cycles so that a cycle costs what changed (``view``), and the explanation of why
a job waits or where it went, built from a dry run (``explain``). Does not belong here:
any I/O. Nothing under ``koordpy.core`` imports kopf, kubernetes_asyncio or asyncio, reads a
file or looks at a clock; callers pass ``now`` in. The array kernels live in
``koordpy.kernels``.
"""
