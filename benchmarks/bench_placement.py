"""Placement benchmarks; prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_placement

1. One 3,000-pod gang of 8-GPU pods on 5,000 nodes of 8 GPUs in 4 layers
   (datacenter/spine/block/node): the gather placement alone and a whole cycle.
2. The numba kernels against their plain-Python twins on the same arrays.
3. A whole ``simulate`` of 5,000 nodes with 100 gangs of 32 pods.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from koordpy.api import ClusterNetworkTopology, Node, Pod, PodGroup
from koordpy.api.topology import parse_network_topology_spec
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import schedule
from koordpy.core.dialects import koordinator
from koordpy.core.filters import Filters
from koordpy.core.placement import Placer, rank_order
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from koordpy.kernels import (
    achievable,
    achievable_py,
    allocate,
    allocate_py,
    choose_candidate,
    choose_candidate_py,
    node_offerslots,
    node_offerslots_py,
    subtree_sums,
    subtree_sums_py,
)
from koordpy.sim.simulator import World, simulate

GPU = "nvidia.com/gpu"
LAYERS = (("DatacenterLayer", "dc"), ("SpineLayer", "spine"), ("BlockLayer", "block"))


def cluster_objects(n_nodes: int = 5000, per_block: int = 25, blocks_per_spine: int = 10,
                    spines_per_dc: int = 10) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for i in range(n_nodes):
        b = i // per_block
        s = b // blocks_per_spine
        d = s // spines_per_dc
        objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": {
            "topology/dc": f"dc-{d}", "topology/spine": f"spine-{s}", "topology/block": f"block-{b}"}},
            "status": {"allocatable": {"cpu": "128", "memory": "1Ti", GPU: "8", "pods": "110"}}})
    spec: list[dict[str, Any]] = []
    parent = None
    for layer, key in LAYERS:
        item: dict[str, Any] = {"topologyLayer": layer, "labelKey": [f"topology/{key}"]}
        if parent:
            item["parentTopologyLayer"] = parent
        spec.append(item)
        parent = layer
    spec.append({"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": parent})
    objs.append({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
                 "metadata": {"name": "default"}, "spec": {"networkTopologySpec": spec}})
    return objs


def gang_objects(name: str, n_pods: int, gpus: int = 8) -> list[dict[str, Any]]:
    gather = [{"layer": layer, "strategy": "PreferGather"} for layer, _ in reversed(LAYERS)]
    objs: list[dict[str, Any]] = [{
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "annotations": {
            "gang.scheduling.koordinator.sh/network-topology-spec": json.dumps({"gatherStrategy": gather})}},
        "spec": {"minMember": n_pods}}]
    for i in range(n_pods):
        objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{name}-{i}", "namespace": "default", "labels": {"pod-group.scheduling.sigs.k8s.io": name},
            "annotations": {"gang.scheduling.koordinator.sh/network-topology-index": str(i)}},
            "spec": {"schedulerName": "koordpy", "containers": [{"name": "main", "resources": {
                "requests": {"cpu": "16", "memory": "64Gi", GPU: str(gpus)}}}]}})
    return objs


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def snapshot_of(objs: list[dict[str, Any]]) -> Snapshot:
    nodes = [Node.from_raw(o) for o in objs if o["kind"] == "Node"]
    pods = [Pod.from_raw(o) for o in objs if o["kind"] == "Pod"]
    pgs = {f"default/{o['metadata']['name']}": PodGroup.from_raw(o) for o in objs if o["kind"] == "PodGroup"}
    cnt = next(ClusterNetworkTopology.from_raw(o) for o in objs if o["kind"] == "ClusterNetworkTopology")
    return Snapshot(nodes=nodes, pods=pods, podgroups=pgs, topology=cnt)


def bench_one_gang() -> dict[str, float]:
    snap = snapshot_of(cluster_objects() + gang_objects("big", 3000))
    t0 = time.perf_counter()
    cluster = Cluster(snap)
    build = time.perf_counter() - t0
    placer = Placer(Filters(cluster))
    pods = rank_order(list(snap.pods))
    annotations = next(iter(snap.podgroups.values())).annotations
    spec = parse_network_topology_spec(annotations["gang.scheduling.koordinator.sh/network-topology-spec"])
    req = koordinator.requirement(spec, cluster.tree, koordinator.layer_labels(snap.topology), None, len(cluster.nodes))

    def place() -> None:
        stmt = Statement(cluster)
        failure = placer.place(pods, req, stmt)
        assert failure is None, failure
        assert len(stmt.placed) == 3000
        stmt.discard()

    place()  # warm-up: numba compiles or loads its cache
    gather_min, gather_med = best_of(place, 20)

    def cycle() -> None:
        result = schedule(snap, SchedulerState(), 0.0)
        assert len(result.binds) == 3000

    cycle()
    cycle_min, cycle_med = best_of(cycle, 5)
    return {"tree_and_arrays_build_s": build, "gather_min_s": gather_min, "gather_median_s": gather_med,
            "cycle_min_s": cycle_min, "cycle_median_s": cycle_med}


def bench_kernels() -> dict[str, float]:
    snap = snapshot_of(cluster_objects() + gang_objects("big", 1))
    cluster = Cluster(snap)
    tree = cluster.tree
    rng = np.random.default_rng(7)
    cluster.used[:, cluster.res_index[GPU]] = rng.integers(0, 9, len(cluster.nodes))
    free = cluster.free()
    req = cluster.request_vector(snap.pods[0])
    feasible = np.ones(len(cluster.nodes), dtype=np.bool_)
    multiple = np.ones(len(tree.order), dtype=np.int64)
    slots = node_offerslots(free, req, feasible)
    sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
    allowed = np.ones(len(tree.order), dtype=np.bool_)
    desired = int(sums[0] // 2)
    chosen = choose_candidate(sums, tree.depth, allowed, desired, tree.parent, tree.name_rank, True)
    sets = achievable(slots, tree.node_domain, tree.end, multiple, desired)
    cases = {
        "node_offerslots": (lambda: node_offerslots(free, req, feasible),
                            lambda: node_offerslots_py(free, req, feasible)),
        "subtree_sums": (lambda: subtree_sums(slots, tree.node_domain, tree.parent, multiple),
                         lambda: subtree_sums_py(slots, tree.node_domain, tree.parent, multiple)),
        "choose_candidate": (lambda: choose_candidate(sums, tree.depth, allowed, desired, tree.parent, tree.name_rank,
                                                      True),
                             lambda: choose_candidate_py(sums, tree.depth, allowed, desired, tree.parent,
                                                         tree.name_rank, True)),
        "achievable": (lambda: achievable(slots, tree.node_domain, tree.end, multiple, desired),
                       lambda: achievable_py(slots, tree.node_domain, tree.end, multiple, desired)),
        "allocate": (lambda: allocate(sums, tree.end, tree.name_rank, *sets, chosen, desired),
                     lambda: allocate_py(sums, tree.end, tree.name_rank, *sets, chosen, desired)),
    }
    out: dict[str, float] = {}
    total_jit = total_py = 0.0
    for name, (jit, py) in cases.items():
        jit_t, _ = best_of(jit, 50)
        py_t, _ = best_of(py, 5)
        out[f"{name}_numba_us"] = jit_t * 1e6
        out[f"{name}_python_us"] = py_t * 1e6
        out[f"{name}_ratio"] = py_t / jit_t
        total_jit += jit_t
        total_py += py_t
    out["all_kernels_ratio"] = total_py / total_jit
    out["domains"] = float(len(tree.order))
    return out


def bench_simulate() -> dict[str, float]:
    objs = cluster_objects()
    for g in range(100):
        objs += gang_objects(f"job-{g}", 32)
    docs = [("bench", o) for o in objs]
    t0 = time.perf_counter()
    world = World.from_objects(docs)
    parse = time.perf_counter() - t0
    t1 = time.perf_counter()
    result = simulate(world)
    sim = time.perf_counter() - t1
    assert len(result.bound) == 3200, len(result.bound)
    return {"parse_s": parse, "simulate_s": sim, "rounds": float(result.rounds), "pods_bound": float(len(result.bound))}


def main() -> None:
    print("== one 3,000-pod gang (8 GPUs each) on 5,000 nodes x 8 GPUs, 4 layers")
    for k, v in bench_one_gang().items():
        print(f"  {k:28s} {v * 1000:10.2f} ms")
    kernels = bench_kernels()
    print(f"== numba kernels vs plain-Python twins (5,000 nodes, {int(kernels.pop('domains')):,} domains in the tree)")
    for k, v in kernels.items():
        unit = "x" if k.endswith("ratio") else "us"
        print(f"  {k:28s} {v:12.1f} {unit}")
    print("== simulate: 5,000 nodes, 100 gangs x 32 pods")
    for k, v in bench_simulate().items():
        print(f"  {k:28s} {v:10.3f}")


if __name__ == "__main__":
    main()
