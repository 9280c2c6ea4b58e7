"""Volcano and KAI placement at scale; prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_topology

On one cluster of 5,000 nodes (8 GPUs each) under a HyperNode tree of about 9,600 HyperNodes
(tiers 1-8: one node per tier-1 HyperNode, then pairs, pairs, pairs, fours, fours, eights, the
spine; the size of Volcano's PR #5811, where one PodGroup took minutes) and a Kueue Topology
(zone / block / hostname), one run measures:

1. building the HyperNode tree (once; cached while HyperNodes and nodes stay the same);
2. a Volcano PodGroup of 3,000 pods (4 GPUs each) in 8 partitions of 375, each partition hard
   within tier 7, the job within tier 8: one whole cycle (gang, sub-groups, placement);
3. a KAI job of 96 pods (8 GPUs each) owned by a batch/v1 Job, required level block (blocks of
   100 nodes): one whole cycle.

Both are timed after a warm-up run (numba loaded, trees built), best and median of 10: the whole
cycle from a fresh scheduler state (the view built from the snapshot, the gang, the placement, the
decisions), and the placement alone on that view.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from koordpy.core.cluster import Cluster
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.placement import rank_order
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from koordpy.kernels import warm_up
from koordpy.sim.simulator import World

GPU = "nvidia.com/gpu"
N_NODES = 5000
FANOUT = (1, 2, 2, 2, 4, 4, 8)  # children per HyperNode, tier 1 upwards (tier 1 holds nodes)


def nodes() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": {
        "kubernetes.io/hostname": f"node-{i}", "example.com/zone": f"zone-{i // 1000}",
        "example.com/block": f"block-{i // 100}"}},
        "status": {"allocatable": {"cpu": "128", "memory": "1Ti", GPU: "8", "pods": "110"}}} for i in range(N_NODES)]


def hypernodes(n_nodes: int = N_NODES, fanout: tuple[int, ...] = FANOUT) -> list[dict[str, Any]]:
    """Tier 1 groups ``fanout[0]`` nodes, each tier above groups ``fanout[t]`` HyperNodes of the tier
    below; one spine one tier higher holds the top ones."""
    out: list[dict[str, Any]] = []
    level = [f"node-{i}" for i in range(n_nodes)]
    member_type = "Node"
    for tier, fan in enumerate(fanout, start=1):
        names = []
        for j in range(0, len(level), fan):
            name = f"t{tier}-{j // fan}"
            out.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                        "spec": {"tier": tier, "members": [{"type": member_type, "selector": {"exactMatch": {
                            "name": m}}} for m in level[j:j + fan]]}})
            names.append(name)
        level, member_type = names, "HyperNode"
    out.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "spine"},
                "spec": {"tier": len(fanout) + 1, "members": [{"type": "HyperNode", "selector": {"exactMatch": {
                    "name": m}}} for m in level]}})
    return out


def pod(name: str, gpus: str, annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "annotations": annotations or {},
                            "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"uid-{owner}",
                                    "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"schedulerName": "koordpy", "containers": [
        {"name": "main", "image": "x", "resources": {"requests": {"cpu": "1", "memory": "1Gi", GPU: gpus}}}]}}


def volcano_job(n: int = 3000, partitions: int = 8) -> list[dict[str, Any]]:
    size = n // partitions
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "llm", "namespace": "default"},
          "spec": {"minMember": n, "networkTopology": {"mode": "hard", "highestTierAllowed": len(FANOUT) + 1},
                   "subGroupPolicy": [{"name": "worker", "subGroupSize": size,
                                       "matchLabelKeys": ["volcano.sh/partition-id"],
                                       "networkTopology": {"mode": "hard", "highestTierAllowed": len(FANOUT)}}]}}
    pods = [pod(f"llm-{i}", "4", {"scheduling.k8s.io/group-name": "llm"}, {"volcano.sh/partition-id": str(i // size)})
            for i in range(n)]
    return [pg, *pods]


def kai_job(n: int = 96) -> list[dict[str, Any]]:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "train", "namespace": "default", "uid": "uid-train",
        "annotations": {"kai.scheduler/topology": "network", "kai.scheduler/topology-required-placement": "block"}},
        "spec": {"parallelism": n, "template": {"spec": {"containers": []}}}}
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "network"},
            "spec": {"levels": [{"nodeLabel": "example.com/zone"}, {"nodeLabel": "example.com/block"},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}
    return [topo, job, *[pod(f"train-{i}", "8", owner="train") for i in range(n)]]


def snapshot(objs: list[dict[str, Any]]) -> Snapshot:
    return World.from_objects([("bench", o) for o in objs]).snapshot(frozenset({"koordpy"}))


def best_of(fn: Callable[[], Any], n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> None:
    warm_up()
    base = [*nodes(), *hypernodes()]
    n_hn = sum(1 for o in base if o["kind"] == "HyperNode")
    t0 = time.perf_counter()
    snap = snapshot([*base, *volcano_job(), *kai_job()])
    parse = time.perf_counter() - t0
    print(f"cluster: {N_NODES} nodes, {n_hn} HyperNodes (tiers 1-{len(FANOUT) + 1}), one Kueue Topology; "
          f"{len(snap.pods)} pods parsed in {parse:.2f} s")
    t0 = time.perf_counter()
    cluster = Cluster(snap)
    hn = cluster.trees.hypernode_tree()
    print(f"HyperNode tree built in {time.perf_counter() - t0:.2f} s ({len(hn.tree.order)} domains, "
          f"{len(hn.problems)} HyperNodes with problems)")

    vc = snapshot([*base, *volcano_job()])
    ka = snapshot([*base, *kai_job()])
    # What is parsed lives to the end; as `koordpy simulate` does, it is frozen out of the
    # collector's sight, whose full passes over ~100,000 objects would otherwise land in a cycle.
    gc.collect()
    gc.freeze()

    def placement(s: Snapshot, expect: int) -> Callable[[], None]:
        """Placement alone (requirement, sub-groups, kernels), on a cycle's view, discarded each time."""
        c = Cycle(s, SchedulerState(), 0.0)
        job = c.view.queue.jobs()[0]
        pods = rank_order(job.pods)

        def run() -> None:
            stmt = Statement(c.cluster)
            assert c._place(pods, c.requirement(job, pods), stmt) is None
            assert len(stmt.placed) == expect
            stmt.discard()

        return run

    def cycle(s: Snapshot, expect: int) -> dict[str, str]:
        result = schedule(s, SchedulerState(), 0.0)
        bound = {b.pod: b.node for b in result.binds}
        assert len(bound) == expect, (len(bound), next(iter(result.waiting.values()), ""))
        return bound

    bound = cycle(vc, 3000)  # warm-up: trees built and cached, kernels loaded
    parts: Counter[int] = Counter()
    spans: dict[int, set[str]] = {}
    for p, node in bound.items():
        part = int(p.rsplit("-", 1)[1]) // 375
        parts[part] += 1
        spans.setdefault(part, set()).add(node)
    vc_best, vc_med = best_of(lambda: cycle(vc, 3000), 10)
    inside = all(len({int(n.split("-")[1]) // 1024 for n in nodes}) == 1 for nodes in spans.values())
    print(f"Volcano PodGroup, 3,000 pods in 8 partitions of 375: cycle best {vc_best * 1000:.1f} ms, "
          f"median {vc_med * 1000:.1f} ms ({len(parts)} partitions placed on {len(set(bound.values()))} nodes; "
          f"each inside one tier-7 HyperNode: {inside})")
    place = placement(vc, 3000)
    place()
    p_best, p_med = best_of(place, 10)
    print(f"  placement alone: best {p_best * 1000:.1f} ms, median {p_med * 1000:.1f} ms")
    bound = cycle(ka, 96)
    blocks = {int(n.split("-")[1]) // 100 for n in bound.values()}
    ka_best, ka_med = best_of(lambda: cycle(ka, 96), 10)
    print(f"KAI required-block job, 96 pods: cycle best {ka_best * 1000:.1f} ms, median {ka_med * 1000:.1f} ms "
          f"({len(blocks)} block used)")
    place = placement(ka, 96)
    place()
    p_best, p_med = best_of(place, 10)
    print(f"  placement alone: best {p_best * 1000:.1f} ms, median {p_med * 1000:.1f} ms")


if __name__ == "__main__":
    main()
