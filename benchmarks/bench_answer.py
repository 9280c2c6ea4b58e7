"""A cycle's cost by the work it carries, and the time to an answer (issue 21, goals 4 and 6);
prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_answer [--only batch|answer] [--repeat 5] [--profile]
        [--cap N] [--parked 300]

The live loop's path without the API server, as ``benchmarks.bench_cycle`` drives it (watch events
into the controller's ``Cache``; each cycle is ``Cache.snapshot`` and the core's ``schedule`` with
the state earlier cycles left; binds assumed, then confirmed by a watch event outside the figure).

1. ``batch`` (goal 4, how ``podsPerCycle`` was chosen): bench_live's shape offline: 5,000 nodes of
   8 CPUs in blocks of 10 and spines of 10, ``--parked`` gangs x 20 of 9-CPU pods that never fit
   (parked), and k gangs x 20 of 4-CPU pods (PreferGather block, spine, datacenter) arriving
   together, for k from 1 to 100: the cycle that places them (snapshot and core apart), then the
   same batch under ``--cap`` pods a cycle: its longest cycle and all its cycles together. The
   per-pod cost and the fixed cost of a cycle come from a least-squares line through the batches.
2. ``answer`` (goal 6): 5,000 nodes (128 CPUs, 8 GPUs) with 50,000 running pods (2,500 gangs of
   20, 12 CPUs a pod, priority 0: 8 CPUs left on each node). From the last member of a complete
   gang arriving in the cache to the decision: a 20-pod and a 1,000-pod gang of 16-CPU pods at
   priority 0 that cannot fit (preemption finds nothing it may evict) -> PodScheduled=False; a
   20-pod gang of 16-CPU pods at priority 1,000 that must preempt -> its Nominate decisions. Each
   twice: the gang's pods all arriving at once, and all but the last seen by an earlier cycle
   (the gang waits for members) before the last arrives. Best and median of ``--repeat``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from typing import Any

from benchmarks.bench_cycle import Live, pod, podgroup
from benchmarks.bench_placement import cluster_objects
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult, Nominate, SetPodScheduledFalse

NAMES = frozenset({"koordpy"})


class Capped(Live):
    """bench_cycle's ``Live`` whose cycles carry at most ``cap`` placed pods (0: no cap), timing the
    snapshot and the core apart."""

    def __init__(self, cap: int = 0) -> None:
        super().__init__()
        self.cap = cap
        self.snap_s = self.core_s = 0.0

    def cycle(self) -> CycleResult:
        t0 = time.perf_counter()
        snap = self.cache.snapshot(NAMES)
        snap.pods_per_cycle = self.cap
        t1 = time.perf_counter()
        result = schedule(snap, self.state, 1000.0)
        self.snap_s, self.core_s = t1 - t0, time.perf_counter() - t1
        for bind in result.binds:
            self.cache.assume(bind.pod, bind.node)
        return result

    def gangs(self, prefix: str, count: int, size: int, cpu: str, priority: int | None = None,
              hold_last: bool = False) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
        """``count`` gangs of ``size`` pods into the cache; with ``hold_last`` the very last pod is
        returned instead of observed."""
        raws: dict[str, dict[str, Any]] = {}
        last = None
        for g in range(count):
            name = f"{prefix}-{g}"
            self.observe("PodGroup", podgroup(name, size))
            for i in range(size):
                raw = pod(name, i, cpu, 0)
                if priority is not None:
                    raw["spec"]["priority"] = priority
                raws[f"default/{name}-{i}"] = raw
                if hold_last and g == count - 1 and i == size - 1:
                    last = raw
                else:
                    self.observe("Pod", raw)
        return raws, last

    def delete(self, raws: dict[str, dict[str, Any]], groups: list[str]) -> None:
        for key in raws:
            self.rv += 1
            self.cache.observe("Pod", "DELETED", {"metadata": {"name": key.split("/")[1], "namespace": "default",
                                                               "resourceVersion": str(self.rv)}})
        for name in groups:
            self.rv += 1
            self.cache.observe("PodGroup", "DELETED", {"metadata": {"name": name, "namespace": "default",
                                                                    "resourceVersion": str(self.rv)}})


def eight_cpu_nodes() -> list[dict[str, Any]]:
    """bench_live's nodes (8 CPUs, 64Gi; blocks of 10, spines of 10) under bench_placement's layers."""
    objs = cluster_objects(5000, per_block=10)
    for raw in objs:
        if raw["kind"] == "Node":
            raw["status"]["allocatable"] = {"cpu": "8", "memory": "64Gi", "pods": "110"}
    return objs


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x``: (a, b)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def cap_for(fixed_s: float, per_pod_s: float, budget_s: float, share: float = 0.9) -> tuple[int, int]:
    """The range of caps that keep a capped cycle within ``budget_s`` (at most this many pods) while
    the cycle's fixed cost stays a small enough part of it that throughput is at least ``share`` of
    an unbounded cycle's (at least this many pods): (least, most)."""
    least = int(fixed_s * share / ((1 - share) * per_pod_s)) + 1
    most = int((budget_s - fixed_s) / per_pod_s)
    return least, most


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def batch(args: argparse.Namespace) -> None:
    live = Capped()
    for raw in eight_cpu_nodes():
        live.observe(raw["kind"], raw)
    live.gangs("park", args.parked, 20, "9")
    t0 = time.perf_counter()
    first = live.cycle()
    assert not first.binds and len(first.waiting) == args.parked * 20
    print(f"== 5,000 nodes of 8 CPUs, {args.parked} gangs x 20 parked (first cycle, building the view and "
          f"parking them, {ms(time.perf_counter() - t0)})", flush=True)
    live.cycle()
    empty = []
    for _ in range(args.repeat):
        live.cycle()
        empty.append(live.core_s + live.snap_s)
    print(f"  a cycle with nothing new (the fixed cost: snapshot, the queue of parked jobs): best {ms(min(empty))}, "
          f"median {ms(statistics.median(empty))}", flush=True)
    sizes = [1, 2, 5, 10, 20, 50, 100]
    xs: list[float] = []
    ys: list[float] = []
    prof = cProfile.Profile() if args.profile else None
    for k in sizes:
        cores, snaps, whole = [], [], []
        for r in range(args.repeat + 1):  # the first is a warm-up
            prefix = f"b{k}-{r}"
            raws, _ = live.gangs(prefix, k, 20, "4")
            if prof is not None and r and k == sizes[-1]:
                prof.enable()
            result = live.cycle()
            if prof is not None:
                prof.disable()
            assert len(result.binds) == 20 * k, (len(result.binds), list(result.waiting.values())[:1])
            placing = live.core_s + live.snap_s
            if r:
                cores.append(live.core_s)
                snaps.append(live.snap_s)
            live.confirm(result, raws)
            live.cycle()
            if r:  # with the cycle that takes the binds back from the watch, as the capped runs count it
                whole.append(placing + live.core_s + live.snap_s)
            live.delete(raws, [f"{prefix}-{g}" for g in range(k)])
            live.cycle()
        best = min(cores)
        xs.append(20.0 * k)
        ys.append(min(c + s for c, s in zip(cores, snaps, strict=True)))
        print(f"  {k:3} gangs x 20 = {20 * k:5} pods in one cycle: core best {ms(best)} (median "
              f"{ms(statistics.median(cores))}), snapshot best {ms(min(snaps))}; per pod "
              f"{best / (20 * k) * 1e6:.0f} us; with the binds taken back best {ms(min(whole))}", flush=True)
    # The fixed cost is a cycle with nothing new; the cost of a pod, the slope through each batch's best.
    fixed, (_, per_pod) = min(empty), fit(xs, ys)
    print(f"  a cycle costs {ms(fixed)} + {per_pod * 1e6:.0f} us a pod (slope through the best of each batch)")
    for budget in (0.02, 0.05, 0.1):
        least, most = cap_for(fixed, per_pod, budget)
        print(f"  a cycle of at most {budget * 1000:.0f} ms with >= 90% of the throughput: cap between {least} "
              f"and {most} pods")
    if prof is not None:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    if args.cap:
        print(f"== the same batches with podsPerCycle={args.cap}", flush=True)
        live.cap = args.cap
        for k in sizes:
            longest, total, cycles = [], [], []
            for r in range(args.repeat + 1):
                prefix = f"c{k}-{r}"
                raws, _ = live.gangs(prefix, k, 20, "4")
                times: list[float] = []
                bound = 0
                while bound < 20 * k:
                    result = live.cycle()
                    assert result.binds, list(result.waiting.values())[:1]
                    times.append(live.core_s + live.snap_s)
                    bound += len(result.binds)
                    live.confirm(result, raws)
                assert bound == 20 * k
                live.cycle()
                times.append(live.core_s + live.snap_s)  # the last binds taken back
                live.delete(raws, [f"{prefix}-{g}" for g in range(k)])
                live.cycle()
                if r:
                    longest.append(max(times))
                    total.append(sum(times))
                    cycles.append(len(times) - 1)
            print(f"  {k:3} gangs x 20 = {20 * k:5} pods: {cycles[0]} cycles, the longest best {ms(min(longest))}, "
                  f"all together with the binds taken back best {ms(min(total))} (median "
                  f"{ms(statistics.median(total))})", flush=True)


def running_cluster(live: Capped) -> float:
    """bench_cycle's 5,000 nodes (128 CPUs, 8 GPUs) with 2,500 running gangs of 20 pods of 12 CPUs
    (10 a node: 8 CPUs left on each); returns the first cycle's time (building the view)."""
    for raw in cluster_objects():
        live.observe(raw["kind"], raw)
    for g in range(2500):
        live.observe("PodGroup", podgroup(f"run-{g}", 20))
        for i in range(20):
            raw = pod(f"run-{g}", i, "12", 0, node=f"node-{(g * 20 + i) // 10}")
            raw["spec"]["priority"] = 0
            live.observe("Pod", raw)
    t0 = time.perf_counter()
    live.cycle()
    return time.perf_counter() - t0


def answer(args: argparse.Namespace) -> None:
    live = Capped()
    first = running_cluster(live)
    print(f"== 5,000 nodes, 50,000 running pods in 2,500 gangs of 20 (12 CPUs, priority 0; first cycle, building "
          f"the view, {ms(first)})", flush=True)
    cases: list[tuple[str, int, int, type[SetPodScheduledFalse] | type[Nominate]]] = [
        ("a 20-pod gang that cannot fit (16 CPUs a pod, priority 0) -> PodScheduled=False", 20, 0,
         SetPodScheduledFalse),
        ("a 1,000-pod gang that cannot fit (16 CPUs a pod, priority 0) -> PodScheduled=False", 1000, 0,
         SetPodScheduledFalse),
        ("a 20-pod gang that must preempt (16 CPUs a pod, priority 1,000) -> nominations", 20, 1000, Nominate)]
    refills = 0
    for label, size, priority, want in cases:
        print(f"  {label}", flush=True)
        for held in (False, True):
            times, counts = [], []
            prof = cProfile.Profile() if args.profile else None
            for r in range(args.repeat + 1):  # the first is a warm-up
                prefix = f"ans{size}-{priority}-{int(held)}-{r}"
                raws, last = live.gangs(prefix, 1, size, "16", priority, hold_last=held)
                if last is not None:
                    waiting = live.cycle()  # the gang waits for its last member (parked until it changes)
                    assert not waiting.binds and len(waiting.waiting) == size - 1, list(waiting.waiting.values())[:1]
                    t0 = time.perf_counter()
                    live.observe("Pod", last)
                else:
                    t0 = time.perf_counter()
                if prof is not None and r:
                    prof.enable()
                cycles = 0
                while True:
                    result = live.cycle()
                    cycles += 1
                    found = [d for d in result.decisions if isinstance(d, want)]
                    if found:
                        break
                    assert cycles < 5, f"no {want.__name__} after {cycles} cycles: {list(result.waiting.values())[:1]}"
                took = time.perf_counter() - t0
                if prof is not None:
                    prof.disable()
                assert not result.binds
                if r:
                    times.append(took)
                    counts.append(len(found))
                # Back to the cluster as it was: the gang gone, and each victim replaced by a pod like it.
                victims = {d.pod: live.cache.pods[d.pod].node_name for d in result.preempted}
                live.delete(raws, [f"{prefix}-0"])
                live.delete({v: {} for v in victims}, [])
                for node in victims.values():
                    refills += 1
                    raw = pod("refill", refills, "12", 0, node=node)
                    del raw["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"]
                    raw["spec"]["priority"] = 0
                    live.observe("Pod", raw)
                live.cycle()
            note = "all but the last seen by an earlier cycle" if held else "all at once"
            print(f"    {note}: best {ms(min(times))}, median {ms(statistics.median(times))} "
                  f"({counts[0]} {want.__name__} decisions)", flush=True)
            if prof is not None:
                pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the timed cycles")
    ap.add_argument("--only", choices=("batch", "answer"), help="run one of the figures")
    ap.add_argument("--cap", type=int, default=0, help="batch: the same batches again with this podsPerCycle")
    ap.add_argument("--parked", type=int, default=300, help="batch: gangs x 20 that never fit, parked")
    args = ap.parse_args()
    if args.only in (None, "answer"):
        answer(args)
    if args.only in (None, "batch"):
        batch(args)


if __name__ == "__main__":
    main()
