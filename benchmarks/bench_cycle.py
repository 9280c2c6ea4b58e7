"""What one scheduling cycle costs in a running scheduler; prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_cycle [--repeat 7] [--profile | --phases] [--only small|big|rules|dra|nodes]

The live loop's path without the API server: watch events go into the controller's ``Cache`` as raw
objects, and each cycle is ``Cache.snapshot`` followed by the core's ``schedule`` with the state the
earlier cycles left (the core's standing view). Binds are assumed in the cache and then confirmed
by a "watch event" of the bound pod, as the live loop sees them (claims come back allocated the
same way). The figures (issue 10, goal 6; issues 18 and 31):

1. 5,000 nodes (128 CPUs, 8 GPUs) with 50,000 running pods (2,500 gangs of 20), one new 20-pod
   gang arrives: the cycle that places it. Goal <= 20 ms.
2. 5,000 empty nodes, one 3,000-pod gang (8 GPUs a pod, PreferGather by block, spine, datacenter)
   arrives: the cycle that places it. Goal <= 30 ms.
3. (issue 18) 5,000 nodes in 3 zones with 10,000 running pods (500 of them with anti-affinity), one
   1,000-pod gang with self anti-affinity per host and a zone spread (maxSkew 1) arrives: the cycle
   that places it. Reported; its target follows the array work of the next issues.
4. (issue 31) the second figure's topology with its GPUs published through DRA instead: 5,000
   nodes, each with one ResourceSlice of 8 GPUs and no ``nvidia.com/gpu`` allocatable; one 1,000-pod
   gang, each pod claiming 8 GPUs through a ResourceClaimTemplate (its claim made by the
   resourceclaim controller, named in the pod's status): the cycle that places it, after a warm-up
   with unchanged slices. Goal <= 100 ms; the first cycle is reported. The cache's objects are moved
   out of the garbage collector's reach after the cluster is loaded and again after the warm-up, as
   the scheduler does at start and at each resync (``settle_memory``, every 5 minutes): what the
   first cycle caches (each slice's selector verdicts, the candidates as arrays) is long-lived.

5. (issue 33) the first figure's cluster with nothing pending: the cycle after one node changes in
   a way scheduling reads (a taint comes or goes, as the node lifecycle controller or an operator
   makes it; a kubelet's heartbeat alone changes no parsed field and never reaches the core). The
   view looks again at which bound members still count: the gangs with members on that node, not
   all 2,500. Reported; no goal.

Each sample adds a new gang to the same standing state; best and median of ``--repeat``.
``--profile`` prints a cProfile of the timed cycles; ``--phases`` where the best sample's time went
(the cache's snapshot, the view's refresh, and the steps of the job), measured around each step.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import json
import pstats
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from benchmarks.bench_placement import GPU, LAYERS, cluster_objects
from koordpy.controller import claimwrites
from koordpy.controller.cache import Cache
from koordpy.controller.main import settle_memory
from koordpy.core import cycle as cycle_module
from koordpy.core import statement as statement_module
from koordpy.core import view as view_module
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult
from koordpy.core.state import SchedulerState

NAMES = frozenset({"koordpy"})

# The steps ``--phases`` times: (owner, attribute, label); a step's time includes the steps it calls.
PHASES = [(Cache, "snapshot", "Cache.snapshot"),
          (view_module.View, "refresh", "View.refresh (the standing view)"),
          (view_module, "nodes_changed", "  nodes changed (a node change)"),
          (view_module.View, "_gangs_on", "  the gangs on them"),
          (view_module.View, "_refresh_jobs", "  gangs and jobs"),
          (cycle_module.Cycle, "run", "Cycle.run (the queue's jobs)"),
          (cycle_module.Cycle, "pre_filter", "  pre_filter"),
          (cycle_module, "rank_order", "  rank_order"),
          (cycle_module.Cycle, "_place", "  placement (filter/score/reserve)"),
          (cycle_module.Cycle, "permit", "  permit"),
          (statement_module.Statement, "commit", "  commit"),
          (cycle_module.Cycle, "bind", "  bind (Binds and Events)"),
          (cycle_module.Cycle, "_podgroup_statuses", "  PodGroup statuses")]
phase_times: dict[str, float] = {}
# The garbage collector's passes during a timed cycle: (seconds, generation), from ``gc.callbacks``.
collected: list[tuple[float, int]] = []
_gc_start = [0.0]


def _gc_watch(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _gc_start[0] = time.perf_counter()
    else:
        collected.append((time.perf_counter() - _gc_start[0], info["generation"]))


gc.callbacks.append(_gc_watch)


@contextmanager
def phases_timed() -> Iterator[None]:
    """Wraps each of PHASES so that its time adds up in ``phase_times`` (the wrappers cost ~1 us a call)."""
    # (A step the code under measure does not have, an older commit's, is left out.)
    steps = [(owner, name, label) for owner, name, label in PHASES if hasattr(owner, name)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in steps]

    def timed(f: Callable[..., Any], label: str) -> Callable[..., Any]:
        @functools.wraps(f)
        def run(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                phase_times[label] = phase_times.get(label, 0.0) + time.perf_counter() - t0
        return run

    for (owner, name, label), (_, _, f) in zip(steps, saved, strict=True):
        setattr(owner, name, timed(f, label))
    try:
        yield
    finally:
        for owner, name, f in saved:
            setattr(owner, name, f)


def podgroup(name: str, size: int) -> dict[str, Any]:
    gather = [{"layer": layer, "strategy": "PreferGather"} for layer, _ in reversed(LAYERS)]
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-pg-{name}", "resourceVersion": "1",
                         "annotations": {"gang.scheduling.koordinator.sh/network-topology-spec":
                                         json.dumps({"gatherStrategy": gather})}},
            "spec": {"minMember": size}}


def pod(gang: str, i: int, cpu: str, gpus: int, node: str | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{gang}-{i}", "namespace": "default", "uid": f"uid-{gang}-{i}",
                     "resourceVersion": "1", "labels": {"pod-group.scheduling.sigs.k8s.io": gang},
                     "annotations": {"gang.scheduling.koordinator.sh/network-topology-index": str(i)}},
        "spec": {"schedulerName": "koordpy", "containers": [{"name": "main", "resources": {
            "requests": {"cpu": cpu, "memory": "1Gi", **({GPU: str(gpus)} if gpus else {})},
            **({"limits": {GPU: str(gpus)}} if gpus else {})}}]},
        "status": {"phase": "Pending"}}
    if node is not None:
        raw["spec"]["nodeName"] = node
        raw["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    return raw


class Live:
    """A cache and a scheduler state driven as the live loop drives them."""

    def __init__(self) -> None:
        self.cache = Cache()
        self.state = SchedulerState()
        self.rv = 10
        self.claims: dict[str, dict[str, Any]] = {}  # namespace/name -> the claims observed, as raw


    def observe(self, kind: str, raw: dict[str, Any]) -> None:
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        if kind == "ResourceClaim":
            self.claims[f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"] = raw
        self.cache.observe(kind, "ADDED", raw)

    def cycle(self) -> CycleResult:
        snap = self.cache.snapshot(NAMES)
        result = schedule(snap, self.state, 1000.0)
        for bind in result.binds:
            self.cache.assume(bind.pod, bind.node)
        return result

    def confirm(self, result: CycleResult, raws: dict[str, dict[str, Any]]) -> None:
        """The watch shows the binds: the claims come back allocated and reserved, then the pods
        bound (outside the timed cycle)."""
        for bind in result.binds:
            for w in bind.devices.claims if bind.devices is not None else ():
                claim = self.claims.get(w.claim)
                if claim is None or w.allocation is None:
                    continue
                self.rv += 1
                claim["metadata"]["resourceVersion"] = str(self.rv)
                claim["status"] = {"allocation": claimwrites.allocation(w.allocation, 1000.0), "reservedFor": [
                    {"resource": w.consumer.resource, "name": w.consumer.name, "uid": w.consumer.uid}]}
                self.cache.observe("ResourceClaim", "MODIFIED", claim)
            raw = raws[bind.pod]
            raw["spec"]["nodeName"] = bind.node
            raw["status"] = {"phase": "Running"}
            self.cache.observe("Pod", "MODIFIED", {**raw, "metadata": {**raw["metadata"],
                                                                       "resourceVersion": str(self.rv + 1)}})
            self.rv += 1


def timed_gangs(live: Live, size: int, cpu: str, gpus: int, repeat: int, prefix: str,
                profile: bool, before: Callable[[Live], None] | None = None,
                shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None, phases: bool = False,
                first: bool = False, warmed: Callable[[], None] | None = None,
                gc_report: bool = False) -> list[float]:
    """The timed cycles, after a warm-up (``first``: its time comes first in the list; ``warmed``:
    called once it is over, outside the figures; ``gc_report``: what the garbage collector took of
    each, printed)."""
    times = []
    collections: list[tuple[tuple[float, int], ...]] = []
    best: tuple[float, dict[str, float]] | None = None
    prof = cProfile.Profile() if profile else None
    for r in range(repeat + 1):  # the first is a warm-up
        if before is not None:
            before(live)
        name = f"{prefix}-{r}"
        live.observe("PodGroup", podgroup(name, size))
        raws = {}
        for i in range(size):
            raw = pod(name, i, cpu, gpus)
            if shape is not None:
                raw = shape(raw)
            raws[f"default/{name}-{i}"] = raw
            live.observe("Pod", raw)
        if prof is not None and r:
            prof.enable()
        phase_times.clear()
        collected.clear()
        with phases_timed() if phases else nullcontext():
            t0 = time.perf_counter()
            result = live.cycle()
            took = time.perf_counter() - t0
        if r or first:
            collections.append(tuple(collected))
        if prof is not None and r:
            prof.disable()
        assert len(result.binds) == size, (len(result.binds), list(result.waiting.values())[:1])
        if r or first:
            times.append(took)
            if r and phases and (best is None or took < best[0]):
                best = (took, dict(phase_times))
        live.confirm(result, raws)
        live.cycle()  # the cycle the confirmations bring, outside the figure
        if not r and warmed is not None:
            warmed()
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    if gc_report:
        print("  of which the garbage collector: " + ", ".join(
            f"{sum(t for t, _ in c) * 1000:.1f} ms ({sum(1 for _, g in c if g == 2)} full)" for c in collections))
    if best is not None:
        print(f"  where the best sample's {best[0] * 1000:.1f} ms went:")
        for _, _, label in PHASES:
            print(f"    {label:40s} {best[1].get(label, 0.0) * 1000:6.1f} ms")
    return times


def report(label: str, times: list[float], goal_ms: float | None) -> None:
    best, median = min(times) * 1000, statistics.median(times) * 1000
    verdict = "reported; no goal yet" if goal_ms is None else \
        f"goal <= {goal_ms:.0f} ms: {'met' if best <= goal_ms else 'missed'}"
    print(f"  {label}: best {best:.1f} ms, median {median:.1f} ms, all "
          f"{', '.join(f'{t * 1000:.1f}' for t in times)}  [{verdict}]", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the timed cycles")
    ap.add_argument("--phases", action="store_true", help="print where the best timed cycle's time went")
    ap.add_argument("--only", choices=("small", "big", "rules", "dra", "nodes"), help="run one of the figures")
    args = ap.parse_args()

    if args.only in (None, "small"):
        small(args)
    if args.only in (None, "big"):
        big(args)
    if args.only in (None, "rules"):
        rules(args)
    if args.only in (None, "dra"):
        dra(args)
    if args.only in (None, "nodes"):
        nodes(args)


ZONE = "topology.kubernetes.io/zone"


def with_zones(raw: dict[str, Any]) -> dict[str, Any]:
    if raw["kind"] == "Node":
        name = raw["metadata"]["name"]
        raw["metadata"]["labels"].update({"kubernetes.io/hostname": name, ZONE: f"zone-{int(name[5:]) % 3}"})
    return raw


def rules(args: argparse.Namespace) -> None:
    live = Live()
    for raw in cluster_objects():
        live.observe(raw["kind"], with_zones(raw))
    for i in range(10000):
        raw = pod("bg", i, "4", 0, node=f"node-{i // 2}")
        raw["metadata"]["labels"]["app"] = f"svc-{i % 50}"
        if i % 20 == 0:  # every 20th holds anti-affinity to its own service, per host
            raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": f"svc-{i % 50}"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        live.observe("Pod", raw)
    t1 = time.perf_counter()
    live.cycle()
    print(f"== 5,000 nodes in 3 zones, 10,000 running pods, 500 with anti-affinity (first cycle, building the view, "
          f"{(time.perf_counter() - t1) * 1000:.0f} ms)", flush=True)

    def ruled(raw: dict[str, Any]) -> dict[str, Any]:
        name = raw["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"]
        raw["metadata"]["labels"]["app"] = name
        sel = {"matchLabels": {"app": name}}
        raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": sel, "topologyKey": "kubernetes.io/hostname"}]}}
        raw["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": ZONE,
                                                     "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
        return raw

    def clear(live: Live) -> None:
        for key in [k for k, p in live.cache.pods.items() if p.node_name and not k.startswith("default/bg-")]:
            live.cache.observe("Pod", "DELETED", {"metadata": {"name": key.split("/")[1], "namespace": "default",
                                                               "resourceVersion": str(live.rv + 1)}})
            live.rv += 1
        live.cycle()

    report("one 1,000-pod gang, self anti-affinity per host and a zone spread",
           timed_gangs(live, 1000, "4", 0, min(args.repeat, 3), "ruled", args.profile, before=clear, shape=ruled,
                       phases=args.phases),
           None)


def small(args: argparse.Namespace) -> None:
    live = Live()
    t0 = time.perf_counter()
    for raw in cluster_objects():
        live.observe(raw["kind"], raw)
    nodes = [f"node-{i}" for i in range(5000)]
    for g in range(2500):
        live.observe("PodGroup", podgroup(f"run-{g}", 20))
        for i in range(20):
            live.observe("Pod", pod(f"run-{g}", i, "4", 0, node=nodes[(g * 20 + i) // 10]))
    built = time.perf_counter() - t0
    t1 = time.perf_counter()
    live.cycle()
    first = time.perf_counter() - t1
    print(f"== 5,000 nodes, 50,000 running pods in 2,500 gangs (objects into the cache {built:.1f} s; "
          f"first cycle, building the view, {first * 1000:.0f} ms)", flush=True)
    report("one new 20-pod gang (4 CPUs a pod)",
           timed_gangs(live, 20, "4", 0, args.repeat, "new", args.profile, phases=args.phases), 20)


def big(args: argparse.Namespace) -> None:
    live = Live()
    for raw in cluster_objects():
        live.observe(raw["kind"], raw)
    t1 = time.perf_counter()
    live.cycle()
    print(f"== 5,000 empty nodes (first cycle, building the view, {(time.perf_counter() - t1) * 1000:.0f} ms)",
          flush=True)

    def clear(live: Live) -> None:
        for key in [k for k, p in live.cache.pods.items() if p.node_name]:
            live.cache.observe("Pod", "DELETED", {"metadata": {"name": key.split("/")[1], "namespace": "default",
                                                               "resourceVersion": str(live.rv + 1)}})
            live.rv += 1
        live.cycle()

    report("one 3,000-pod gang (8 GPUs a pod)",
           timed_gangs(live, 3000, "16", 8, args.repeat, "big", args.profile, before=clear, phases=args.phases), 30)


def nodes(args: argparse.Namespace) -> None:
    live = Live()
    raws = {}
    for raw in cluster_objects():
        if raw["kind"] == "Node":
            raws[raw["metadata"]["name"]] = raw
        live.observe(raw["kind"], raw)
    for g in range(2500):
        live.observe("PodGroup", podgroup(f"run-{g}", 20))
        for i in range(20):
            live.observe("Pod", pod(f"run-{g}", i, "4", 0, node=f"node-{(g * 20 + i) // 10}"))
    live.cycle()
    live.cycle()
    print("== 5,000 nodes, 50,000 running pods in 2,500 gangs, nothing pending", flush=True)
    prof = cProfile.Profile() if args.profile else None
    times = []
    best: tuple[float, dict[str, float]] | None = None
    for r in range(args.repeat + 1):  # the first is a warm-up
        raw = raws[f"node-{r * 97 % 5000}"]
        # A NoSchedule taint comes (a node going NotReady is tainted so), or goes again: a change the
        # cache passes on, unlike a heartbeat.
        taints = raw.setdefault("spec", {}).get("taints")
        raw["spec"]["taints"] = [] if taints else [{"key": "example.com/maintenance", "effect": "NoSchedule"}]
        live.observe("Node", raw)
        phase_times.clear()
        if prof is not None and r:
            prof.enable()
        with phases_timed() if args.phases else nullcontext():
            t0 = time.perf_counter()
            live.cycle()
            took = time.perf_counter() - t0
        if prof is not None and r:
            prof.disable()
        if r:
            times.append(took)
            if args.phases and (best is None or took < best[0]):
                best = (took, dict(phase_times))
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    if best is not None:
        print(f"  where the best sample's {best[0] * 1000:.1f} ms went:")
        for _, _, label in PHASES:
            print(f"    {label:40s} {best[1].get(label, 0.0) * 1000:6.1f} ms")
    report("one node's taint changes", times, None)


DRA_CLASS, DRA_DRIVER = "gpu.example.com", "gpu.example.com"


def dra_cluster() -> list[dict[str, Any]]:
    """``cluster_objects`` with each node's 8 GPUs published as one ResourceSlice instead of allocatable."""
    driver = f"device.driver == '{DRA_DRIVER}'"
    objs: list[dict[str, Any]] = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                   "metadata": {"name": DRA_CLASS},
                                   "spec": {"selectors": [{"cel": {"expression": driver}}]}},
                                  {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                                   "metadata": {"name": "gpus", "namespace": "default"},
                                   "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                                       "deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": 8}}]}}}}]
    for raw in cluster_objects():
        if raw["kind"] == "Node":
            name = raw["metadata"]["name"]
            del raw["status"]["allocatable"][GPU]
            objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                         "metadata": {"name": f"{name}-gpus"},
                         "spec": {"driver": DRA_DRIVER, "nodeName": name,
                                  "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                                  "devices": [{"name": f"gpu-{d}", "attributes": {"index": {"int": d}}}
                                              for d in range(8)]}})
        objs.append(raw)
    return objs


def dra(args: argparse.Namespace) -> None:
    live = Live()
    t0 = time.perf_counter()
    for raw in dra_cluster():
        live.observe(raw["kind"], raw)
    t1 = time.perf_counter()
    live.cycle()
    settle_memory()  # as the scheduler does once its caches are filled
    print(f"== 5,000 empty nodes, 5,000 ResourceSlices of 8 GPUs (objects into the cache {t1 - t0:.1f} s; first "
          f"cycle, building the view, {(time.perf_counter() - t1) * 1000:.0f} ms)", flush=True)
    def shape(raw: dict[str, Any]) -> dict[str, Any]:
        """The pod asks for its GPUs through the template; its claim is made as the resourceclaim
        controller makes it (owned by the pod, named in the pod's status) and observed before the pod."""
        name = raw["metadata"]["name"]
        raw["metadata"]["uid"] = f"uid-{name}"
        raw["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpus"}]
        raw["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
        raw["status"]["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": f"{name}-gpus", "namespace": "default", "uid": f"uid-{name}-gpus",
                              "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": name,
                                                   "uid": f"uid-{name}", "controller": True}]},
                 "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                     "deviceClassName": DRA_CLASS, "allocationMode": "ExactCount", "count": 8}}]}}}
        live.observe("ResourceClaim", claim)
        return raw

    def clear(live: Live) -> None:
        """The last gang's pods and claims go (their devices free again), outside the figure."""
        for key in [k for k, p in live.cache.pods.items() if p.node_name]:
            name = key.split("/")[1]
            live.cache.observe("Pod", "DELETED", {"metadata": {"name": name, "namespace": "default",
                                                               "resourceVersion": str(live.rv + 1)}})
            live.rv += 1
            claim = live.claims.pop(f"default/{name}-gpus", None)
            if claim is not None:
                live.rv += 1
                live.cache.observe("ResourceClaim", "DELETED", {**claim, "metadata": {
                    **claim["metadata"], "resourceVersion": str(live.rv)}})
        live.cycle()

    times = timed_gangs(live, 1000, "16", 0, args.repeat, "dra", args.profile, before=clear, shape=shape,
                        phases=args.phases, first=True, warmed=settle_memory, gc_report=True)
    print(f"  first cycle of the first gang (devices counted and cached per slice): {times[0] * 1000:.1f} ms")
    report("one 1,000-pod gang, 8 GPUs a pod through a ResourceClaimTemplate", times[1:], 100)


if __name__ == "__main__":
    main()
