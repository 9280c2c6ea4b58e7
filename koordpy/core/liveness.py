"""Whether a bound pod still counts as running where it was put: the rule stale gangs and the
replacement of failed nodes share.

Belongs here: the reasons a bound member is lost to its gang (terminating, failed, its node gone,
its node failed) and, for a member that is not lost yet but will be, the time it will be (so the
cycle can wake then). Pure: a pod, its node (None when the snapshot has none of that name) and the
time. Does not belong here: what a gang does about a lost member (``koordpy.core.stale``, the
cycle), or whether a pending pod may go to a node (``koordpy.core.filters``).

A node "fails" for a pod as the taint manager would evict the pod from it: a ``NoExecute`` taint
the pod does not tolerate, at once, or one it tolerates for ``tolerationSeconds``, once those have
run from the taint's ``timeAdded``. NotReady alone is no failure (the node lifecycle controller
taints a node that stays NotReady, and that taint is the signal; Kueue v0.19 stopped treating
NotReady by itself as a failure for the same reason), and neither is a cordon, which stops no
running pod. Counting a member lost only when its toleration runs out keeps the order right: a
real pod tolerates ``not-ready`` and ``unreachable`` for 300 s (the DefaultTolerationSeconds
admission plugin), so a node that comes back within that time costs its gang nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from koordpy.api.objects import Node, Pod, Taint

# Why a bound member no longer counts: "terminating" (being deleted), "failed" (phase Failed: the
# kubelet refused it at admission, OutOfcpu / OutOfmemory, or it ran and failed), "node-gone" (its
# node is not in the cluster), "node-failed" (a NoExecute taint it does not tolerate, or no longer).
LossKind = Literal["terminating", "failed", "node-gone", "node-failed"]


@dataclass(frozen=True, slots=True)
class Loss:
    kind: LossKind
    detail: str = ""  # the pod's status.reason, or the taint's key


def noexecute_deadline(pod: Pod, taint: Taint) -> float | None:
    """When the pod stops tolerating a ``NoExecute`` taint: ``-inf`` at once (no toleration, or one of
    0 s or less), None never (a toleration without seconds, or a taint with no ``timeAdded`` to count
    from: the taint manager's own deletion then decides), else ``timeAdded`` + the shortest
    tolerationSeconds of the tolerations that match (as the taint manager takes the minimum)."""
    matching = [t for t in pod.tolerations if t.tolerates(taint)]
    if not matching:
        return float("-inf")
    if any(t.seconds is None for t in matching):
        return None
    seconds = min(t.seconds for t in matching if t.seconds is not None)
    if seconds <= 0:
        return float("-inf")
    if taint.time_added is None:
        return None
    return taint.time_added + seconds


def _earliest_failure(pod: Pod, node: Node) -> tuple[float, Taint] | None:
    """The ``NoExecute`` taint of ``node`` that evicts ``pod`` first, and when (``-inf``: already)."""
    first: tuple[float, Taint] | None = None
    for taint in node.taints:
        if taint.effect != "NoExecute":
            continue
        at = noexecute_deadline(pod, taint)
        if at is not None and (first is None or at < first[0]):
            first = (at, taint)
    return first


def node_fails_at(pod: Pod, node: Node) -> float | None:
    """The earliest time a ``NoExecute`` taint of ``node`` evicts ``pod`` (``-inf``: already), or None."""
    first = _earliest_failure(pod, node)
    return None if first is None else first[0]


def loss(pod: Pod, node: Node | None, now: float) -> Loss | None:
    """Why the bound ``pod`` no longer counts as a running member at ``now`` (None: it does).
    A pod that Succeeded is no loss (it finished); an unbound pod is not asked about."""
    if pod.phase == "Failed":
        return Loss("failed", pod.reason)
    if pod.deleting:
        return Loss("terminating", pod.reason)
    if node is None:
        return Loss("node-gone", pod.node_name)
    first = _earliest_failure(pod, node)
    if first is not None and first[0] <= now:
        return Loss("node-failed", first[1].key)
    return None


def lost_later(pod: Pod, node: Node | None, now: float) -> float | None:
    """For a member that counts at ``now``: the time it will stop counting (its node's taint
    outlasting its toleration), so that whoever waits on it can wake then; None if no such time."""
    if node is None or pod.phase == "Failed" or pod.deleting:
        return None
    at = node_fails_at(pod, node)
    return at if at is not None and at > now else None

