"""Issue 33, item 2, live: a running gang loses two nodes and gets both replacements inside its rack.

The nodes fail as in a cluster: the node lifecycle controller would mark an unreachable node's Ready
``Unknown`` and taint it ``node.kubernetes.io/unreachable:NoExecute`` (with ``timeAdded``); the test
does both, and takes the nodes from kwok first, so that no fake kubelet heals them or confirms a
deletion there. The taint manager would then delete the members there; the test deletes them (they
stay terminating while no kubelet confirms, or go at once: either way they no longer count). The
test makes their replacements, as their controller would. koordpy must bind both together inside
the rack the gang runs in (``r2``, MustGather on the block layer), not on the other rack's free
nodes (``r1``, the first names, which binpacking takes among equals), and overcommit nothing (the
``kube`` fixture's invariants).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup
from tests.integration.kube import Kube, Scheduler, fake, settle, wait_for, when

NS = "replace"
SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
KWOK = "kwok.x-k8s.io/node"


def rack(name: str, size: int) -> list[dict[str, Any]]:
    return fake([node(f"{name}-{i}", cpu="8", labels={SPINE: "s0", BLOCK: name}) for i in range(size)])


def member(i: int) -> dict[str, Any]:
    p = pod(f"job-{i}", cpu="8", memory="1Gi", group="job", index=i)
    p["metadata"]["namespace"] = NS
    return p


def fail(kube: Kube, node_name: str) -> None:
    """``node_name`` as the node lifecycle controller leaves an unreachable node, with no kubelet."""
    kube.kubectl("annotate", "node", node_name, f"{KWOK}-")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    kube.kubectl("patch", "node", node_name, "--type=merge", "-p", json.dumps({"spec": {"taints": [
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": now}]}}))
    kube.kubectl("patch", "node", node_name, "--subresource=status", "--type=merge", "-p", json.dumps(
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                                    "lastHeartbeatTime": now, "lastTransitionTime": now}]}}))


def test_two_failed_nodes_are_replaced_together_inside_the_rack(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    pg = podgroup("job", 4, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    pg["metadata"]["namespace"] = NS
    kube.apply(SPINE_BLOCK_CNT, rack("r2", 6), pg, [member(i) for i in range(4)])
    first = wait_for(lambda: when(len(kube.bound(NS)) == 4, kube.bound(NS)), "the gang bound in r2")
    assert all(n.startswith("r2-") for n in first.values()), first
    # Another rack with room for the whole gang, which the replacements must not use.
    kube.apply(rack("r1", 4))

    lost = [first["job-0"], first["job-1"]]
    for n in lost:
        fail(kube, n)
    kube.kubectl("delete", "pod", "-n", NS, "job-0", "job-1", "--wait=false")

    def going(name: str) -> bool:
        raw = kube.pods(NS).get(name)
        return raw is None or bool(raw["metadata"].get("deletionTimestamp"))

    wait_for(lambda: going("job-0") and going("job-1"), "the lost members terminating (or gone)")
    kube.apply(member(4), member(5))

    bound = wait_for(lambda: when({"job-4", "job-5"} <= kube.bound(NS).keys(), kube.bound(NS)),
                     "both replacements bound", timeout=60.0)
    free = {n for n in (f"r2-{i}" for i in range(6)) if n not in first.values()}
    assert {bound["job-4"], bound["job-5"]} == free, bound
    # And they stay so: nothing else moves (the terminating members keep their dead nodes' room).
    assert settle(lambda: kube.bound(NS), 3.0) == bound
