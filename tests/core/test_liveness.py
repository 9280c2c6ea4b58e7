"""Whether a bound member still counts (koordpy.core.liveness): the failed-node cases of Kueue's TAS
node controller (deleted, NotReady, tainted NoExecute with and without tolerationSeconds, NoSchedule,
cordoned), and the member's own states (terminating, failed at admission)."""

from __future__ import annotations

from typing import Any

from koordpy.api.objects import Node, Pod
from koordpy.core.liveness import Loss, loss, lost_later

T0 = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"  # T0 as RFC 3339


def _node(*taints: dict[str, Any], ready: bool = True, unschedulable: bool = False) -> Node:
    return Node.from_raw({
        "metadata": {"name": "n1"},
        "spec": {"taints": list(taints), "unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": "8"},
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


def _pod(*tolerations: dict[str, Any], phase: str = "Running", reason: str = "",
         deleting: bool = False) -> Pod:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = STAMP
    return Pod.from_raw({"metadata": meta,
                         "spec": {"nodeName": "n1", "tolerations": list(tolerations),
                                  "containers": [{"name": "c"}]},
                         "status": {"phase": phase, "reason": reason}})


UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": STAMP}
TOLERATE_300 = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}


def test_the_times_parse() -> None:
    node = _node(UNREACHABLE)
    assert node.taints[0].time_added == T0
    assert _pod(TOLERATE_300).tolerations[0].seconds == 300.0
    assert _pod(phase="Failed", reason="OutOfcpu").reason == "OutOfcpu"


def test_a_deleted_node_loses_its_members() -> None:
    assert loss(_pod(), None, T0) == Loss("node-gone", "n1")


def test_notready_alone_loses_nothing() -> None:
    assert loss(_pod(), _node(ready=False), T0) is None


def test_a_cordon_loses_nothing() -> None:
    assert loss(_pod(), _node(unschedulable=True), T0) is None


def test_a_noschedule_taint_loses_nothing() -> None:
    taint = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule", "timeAdded": STAMP}
    assert loss(_pod(), _node(taint), T0 + 3600) is None


def test_an_untolerated_noexecute_taint_loses_the_member_at_once() -> None:
    assert loss(_pod(), _node(UNREACHABLE), T0) == Loss("node-failed", "node.kubernetes.io/unreachable")


def test_a_tolerated_noexecute_taint_loses_it_when_the_toleration_runs_out() -> None:
    pod, node = _pod(TOLERATE_300), _node(UNREACHABLE)
    assert loss(pod, node, T0 + 299) is None
    assert lost_later(pod, node, T0 + 299) == T0 + 300
    assert loss(pod, node, T0 + 300) == Loss("node-failed", "node.kubernetes.io/unreachable")
    assert lost_later(pod, node, T0 + 300) is None


def test_the_shortest_matching_toleration_wins() -> None:
    short = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}
    assert loss(_pod(TOLERATE_300, short), _node(UNREACHABLE), T0 + 11) is not None


def test_a_toleration_for_ever_keeps_the_member() -> None:
    forever = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    assert loss(_pod(forever), _node(UNREACHABLE), T0 + 10**6) is None
    assert lost_later(_pod(forever), _node(UNREACHABLE), T0) is None


def test_zero_seconds_tolerate_nothing() -> None:
    zero = dict(TOLERATE_300, tolerationSeconds=0)
    assert loss(_pod(zero), _node(UNREACHABLE), T0) is not None


def test_a_taint_without_time_added_leaves_the_clock_to_the_taint_manager() -> None:
    taint = {k: v for k, v in UNREACHABLE.items() if k != "timeAdded"}
    assert loss(_pod(TOLERATE_300), _node(taint), T0 + 10**6) is None


def test_terminating_and_failed_members_are_lost() -> None:
    assert loss(_pod(deleting=True), _node(), T0) == Loss("terminating", "")
    assert loss(_pod(phase="Failed", reason="OutOfmemory"), _node(), T0) == Loss("failed", "OutOfmemory")
    assert loss(_pod(phase="Succeeded"), _node(), T0) is None
