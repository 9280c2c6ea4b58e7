"""Many Volcano sub-groups in one job (seed 004's use case); prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_subgroups

One cluster of 2,000 nodes (8 GPUs each) under 9 tiers of HyperNodes: 250 tier-1 HyperNodes of 8
nodes, then pairs up to two tier-8 HyperNodes (1,024 and 976 nodes) and the tier-9 spine. One
Volcano PodGroup of 1,000 pods (8 GPUs each, one node apiece) in 125 partitions of 8, each
partition hard within tier 1 (one tier-1 HyperNode), the job hard within tier 9. Two variants:

1. every partition needed (``minSubGroups`` unset): the first candidate that holds them all is a
   tier-8 HyperNode, and all 125 go inside it;
2. ``minSubGroups: 1``: the first candidate is a tier-1 HyperNode that takes partition 0, and the
   other 124 are placed where the job's limit allows (issue 17 item 3).

Each is timed after a warm-up run, best and median of 5: the whole cycle from a fresh scheduler
state, and the placement alone on that cycle's view. The benchmark checks that every pod binds and
that each partition sits inside one tier-1 HyperNode.
"""

from __future__ import annotations

import gc
from typing import Any

from benchmarks.bench_topology import best_of
from benchmarks.bench_topology import hypernodes as tiered_hypernodes
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.placement import rank_order
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from koordpy.kernels import warm_up
from koordpy.sim.simulator import World

GPU = "nvidia.com/gpu"
N_NODES = 2000
FANOUT = (8, 2, 2, 2, 2, 2, 2, 2)  # children per HyperNode, tier 1 upwards (tier 1 holds nodes); tier 9: the spine
PARTITIONS = 125
SIZE = 8
RUNS = 5


def nodes() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": {
        "kubernetes.io/hostname": f"node-{i}"}},
        "status": {"allocatable": {"cpu": "128", "memory": "1Ti", GPU: "8", "pods": "110"}}} for i in range(N_NODES)]


def hypernodes() -> list[dict[str, Any]]:
    return tiered_hypernodes(N_NODES, FANOUT)


def job(min_sub_groups: int | None) -> list[dict[str, Any]]:
    policy: dict[str, Any] = {"name": "worker", "subGroupSize": SIZE, "matchLabelKeys": ["volcano.sh/partition-id"],
                              "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
    if min_sub_groups is not None:
        policy["minSubGroups"] = min_sub_groups
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "llm", "namespace": "default"},
          "spec": {"minMember": SIZE if min_sub_groups else PARTITIONS * SIZE,
                   "networkTopology": {"mode": "hard", "highestTierAllowed": len(FANOUT) + 1},
                   "subGroupPolicy": [policy]}}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"llm-{i}", "namespace": "default", "annotations": {"scheduling.k8s.io/group-name": "llm"},
        "labels": {"volcano.sh/partition-id": str(i // SIZE)}},
        "spec": {"schedulerName": "koordpy", "containers": [{"name": "main", "image": "x", "resources": {
            "requests": {"cpu": "1", "memory": "1Gi", GPU: "8"}}}]}} for i in range(PARTITIONS * SIZE)]
    return [pg, *pods]


def main() -> None:
    warm_up()
    base = [*nodes(), *hypernodes()]
    n_hn = sum(1 for o in base if o["kind"] == "HyperNode")
    total = PARTITIONS * SIZE
    print(f"cluster: {N_NODES} nodes, {n_hn} HyperNodes (tiers 1-{len(FANOUT) + 1}); one PodGroup of {total} pods "
          f"in {PARTITIONS} partitions of {SIZE}, each within tier 1")
    snaps: dict[str, Snapshot] = {}
    for label, min_sub in (("every partition needed", None), ("minSubGroups 1", 1)):
        snaps[label] = World.from_objects([("bench", o) for o in [*base, *job(min_sub)]]).snapshot(
            frozenset({"koordpy"}))
    gc.collect()
    gc.freeze()  # as `koordpy simulate` does: what is parsed lives to the end

    for label, snap in snaps.items():

        def cycle(s: Snapshot = snap) -> dict[str, str]:
            result = schedule(s, SchedulerState(), 0.0)
            bound = {b.pod: b.node for b in result.binds}
            assert len(bound) == total, (len(bound), next(iter(result.waiting.values()), ""))
            return bound

        bound = cycle()  # warm-up: trees built and cached
        spans: dict[int, set[int]] = {}
        for p, node in bound.items():
            spans.setdefault(int(p.rsplit("-", 1)[1]) // SIZE, set()).add(int(node.split("-")[1]) // FANOUT[0])
        assert len(spans) == PARTITIONS and all(len(t1) == 1 for t1 in spans.values()), "a partition spans tier 1"
        c_best, c_med = best_of(cycle, RUNS)

        c = Cycle(snap, SchedulerState(), 0.0)
        gang = c.view.queue.jobs()[0]
        pods = rank_order(gang.pods)

        def place(c: Cycle = c, gang: Any = gang, pods: list[Any] = pods) -> None:
            stmt = Statement(c.cluster)
            assert c._place(pods, c.requirement(gang, pods), stmt) is None
            assert len(stmt.placed) == total
            stmt.discard()

        place()
        p_best, p_med = best_of(place, RUNS)
        print(f"{label}: cycle best {c_best * 1000:.1f} ms, median {c_med * 1000:.1f} ms; placement alone best "
              f"{p_best * 1000:.1f} ms, median {p_med * 1000:.1f} ms ({len(spans)} partitions, each in one tier-1 "
              f"HyperNode, on {len(set(bound.values()))} nodes)")


if __name__ == "__main__":
    main()
