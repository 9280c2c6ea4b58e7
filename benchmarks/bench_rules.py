"""Rules between pods, live (issue 18): kube-scheduler's scheduler_perf shapes with inter-pod
affinity, anti-affinity and topology spread, koordpy against kube-scheduler on the same objects.

    .venv/bin/python -m benchmarks.bench_rules [--nodes 5000] [--shapes NAME,...] [--scale 1.0]
        [--skip-kube-scheduler] [--json PATH]

The shapes are the ``5000Nodes`` workloads of upstream's ``test/integration/scheduler_perf``
(``affinity/`` and ``topology_spreading/``), their pod templates rewritten here (100m CPU, 500Mi,
container port 80; nodes of 4 CPUs, 32Gi, 110 pods, labelled ``kubernetes.io/hostname`` and
``topology.kubernetes.io/zone`` moon-1..3):

- ``SchedulingPodAntiAffinity``: 1,000 init + 1,000 measured pods ``color=green`` with required
  anti-affinity to ``color=green`` per hostname in both namespaces (the init pods repel too);
- ``SchedulingPodAffinity``: 5,000 init + 1,000 measured pods ``color=blue`` with required affinity
  to ``color=blue`` per zone;
- ``SchedulingPreferredPodAffinity``: 5,000 init + 1,000 measured pods ``color=red`` preferring
  (weight 1) a host with ``color=red``;
- ``TopologySpreading``: 5,000 plain init pods + 2,000 measured pods ``color=blue`` spread over the
  zones with ``maxSkew: 5``, ``DoNotSchedule``.

Per shape: the init pods are created already bound (``spec.nodeName``, one a node in turn, which
keeps their own rules) in namespace bench-rules-0, so that both schedulers start from the same
state and no scheduler's time goes into them. Then, one scheduler at a time (koordpy, then
kube-scheduler with the control plane's feature gates, default profile, QPS 5000; the other is
not running): the scheduler is started and left until its CPU is quiet, the measured pods are
created in bench-rules-1 (64 requests in flight), and the round is timed from the first pod
created to the last bind seen on a watch. Its CPU is utime + stime of the scheduler's process
(and any children, e.g. a profiler's) from /proc/PID/stat, read just before the first create and
once the process is quiet again after the last bind (the Events and statuses written after a bind
are part of scheduling it; the figure at the last bind is kept too). Then every bound pod is
checked against the rules (``rule_violations``: anti-affinity both ways, required affinity, the
spread's skew, resource fit; written from ``tests.integration.checker``'s rule readers, not
koordpy's code), the scheduler is stopped and the measured pods deleted.

Every wait has a deadline (``--deadline``, ``--stall`` without progress) and ends in an error
naming what is missing. ``KOORDPY_TEST_CONTROLPLANE=DIR`` reuses a control plane (run nothing else
on it meanwhile: its other nodes would take pods); ``KOORDPY_BENCH_WRAP`` prefixes koordpy's
command line (e.g. with a profiler).
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from benchmarks.live_harness import (
    CALL_SECONDS,
    LIST_SECONDS,
    RETRIES,
    ROOT,
    Child,
    LiveBench,
    Pods,
    call,
    control_plane,
    cpu_seconds,
    create,
    kwok_node,
    quiet,
    run_and_report,
    say,
    wait_for,
)
from koordpy.controller.main import api_client
from tests.integration.checker import (
    Obj,
    amount,
    hard_spreads,
    key_of,
    labels_of,
    name_of,
    namespace_of,
    node_affinity_matches,
    pod_requests,
    pod_terms,
)

INIT_NS, MEASURED_NS = "bench-rules-0", "bench-rules-1"
PREFIX = "rules-node-"
HOST, ZONE = "kubernetes.io/hostname", "topology.kubernetes.io/zone"
ZONES = ("moon-1", "moon-2", "moon-3")


# -- the objects (upstream's templates, rewritten) ------------------------------------------------

def node_body(i: int) -> Obj:
    return kwok_node(f"{PREFIX}{i}", {ZONE: ZONES[i % len(ZONES)]})


def plain(color: str | None = None) -> Obj:
    res = {"cpu": "100m", "memory": "500Mi"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"color": color} if color else {}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                "name": "pause", "image": "registry.k8s.io/pause:3.10.1", "ports": [{"containerPort": 80}],
                "resources": {"limits": dict(res), "requests": dict(res)}}]}}


def term(color: str, key: str) -> Obj:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key,
            "namespaces": [MEASURED_NS, INIT_NS]}


def anti_pod() -> Obj:
    p = plain("green")
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term("green", HOST)]}}
    return p


def affine_pod() -> Obj:
    p = plain("blue")
    p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term("blue", ZONE)]}}
    return p


def preferred_pod() -> Obj:
    p = plain("red")
    p["spec"]["affinity"] = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "podAffinityTerm": term("red", HOST)}]}}
    return p


def spread_pod() -> Obj:
    p = plain("blue")
    p["spec"]["topologySpreadConstraints"] = [{"maxSkew": 5, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"color": "blue"}}}]
    return p


@dataclass(frozen=True)
class Shape:
    name: str
    short: str  # in pod names and round labels
    init: int
    measured: int
    init_pod: Callable[[], Obj]
    measured_pod: Callable[[], Obj]


SHAPES = (
    Shape("SchedulingPodAntiAffinity", "anti", 1000, 1000, anti_pod, anti_pod),
    Shape("SchedulingPodAffinity", "aff", 5000, 1000, affine_pod, affine_pod),
    Shape("SchedulingPreferredPodAffinity", "pref", 5000, 1000, preferred_pod, preferred_pod),
    Shape("TopologySpreading", "spread", 5000, 2000, plain, spread_pod),
)


def named(body: Obj, name: str, round_: str, scheduler: str | None = None, node: str | None = None) -> Obj:
    body["metadata"]["name"] = name
    body["metadata"]["labels"]["bench-round"] = round_
    if scheduler:
        body["spec"]["schedulerName"] = scheduler
    if node:
        body["spec"]["nodeName"] = node
    return body


# -- the rules, checked on the final state ----------------------------------------------------------

def rule_violations(nodes: list[Obj], pods: list[Obj], namespaces: dict[str, dict[str, str]]) -> list[str]:
    """What the bound ``pods`` break in the state they make together, one line per violation: a
    required anti-affinity term (any pod's, so the symmetry rule is covered from the other side)
    matching another pod in the term's domain; a required affinity term with no other pod matching
    all the pod's terms in its domain (the first pod of a self-affine set excepted); a
    ``DoNotSchedule`` spread whose skew over the eligible domains exceeds ``maxSkew``; a node
    holding more than it has. Each holds for the final state whatever the bind order: pods only
    arrive, so a skew every bind kept stays kept (the fullest domain got its last pod within
    maxSkew of a minimum that can only have grown), and anti-affinity is symmetric in time."""
    node_labels = {name_of(n): labels_of(n) for n in nodes}
    bound = [p for p in pods if (p.get("spec") or {}).get("nodeName") in node_labels
             and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
             and not p["metadata"].get("deletionTimestamp")]
    problems = [f"{key_of(p)} is bound to {p['spec']['nodeName']}, a node the cluster does not have"
                for p in pods if (p.get("spec") or {}).get("nodeName") and p["spec"]["nodeName"] not in node_labels]
    index: dict[str, dict[str, list[Obj]]] = {}  # topology key -> value -> the pods there

    def domain(key: str, value: str) -> list[Obj]:
        if key not in index:
            by: dict[str, list[Obj]] = defaultdict(list)
            for p in bound:
                v = node_labels[p["spec"]["nodeName"]].get(key)
                if v is not None:
                    by[v].append(p)
            index[key] = by
        return index[key].get(value, [])

    for p in bound:
        nl = node_labels[p["spec"]["nodeName"]]
        for t in pod_terms(p, "podAntiAffinity"):
            if t.key in nl:
                hit = next((q for q in domain(t.key, nl[t.key]) if q is not p and t.matches(q, namespaces)), None)
                if hit is not None:
                    problems.append(f"{key_of(p)} on {p['spec']['nodeName']}: anti-affinity term {t.index} "
                                    f"({t.key}={nl[t.key]}) matches {key_of(hit)}")
        affinity = pod_terms(p, "podAffinity")
        if affinity:
            def all_terms(q: Obj, terms: list[Any] = affinity) -> bool:
                return all(t.matches(q, namespaces) for t in terms)

            lacking = [t for t in affinity if t.key not in nl or not any(
                q is not p and all_terms(q) for q in domain(t.key, nl[t.key]))]
            if lacking and not (all_terms(p) and not any(q is not p and all_terms(q) for q in bound)):
                problems.append(f"{key_of(p)} on {p['spec']['nodeName']}: no other pod matching its affinity "
                                f"terms in its domain of {', '.join(t.key for t in lacking)}")
    seen: set[tuple[Any, ...]] = set()
    for p in bound:
        for c in hard_spreads(p):
            sig = (namespace_of(p), c.key, c.max_skew, c.selector, c.min_domains, c.honor_affinity, c.honor_taints)
            if sig in seen:
                continue
            seen.add(sig)
            eligible = [n for n in nodes if c.key in labels_of(n)
                        and (not c.honor_affinity or node_affinity_matches(p, n))]
            counts = {labels_of(n)[c.key]: 0 for n in eligible}
            names = {name_of(n) for n in eligible}
            for q in bound:
                if q["spec"]["nodeName"] in names and namespace_of(q) == namespace_of(p) \
                        and not c.selector.empty and c.selector.matches(labels_of(q)):
                    counts[node_labels[q["spec"]["nodeName"]][c.key]] += 1
            low = 0 if len(counts) < c.min_domains else min(counts.values(), default=0)
            over = {d: n for d, n in counts.items() if n - low > c.max_skew}
            if over:
                problems.append(f"spread of {key_of(p)}'s kind ({c.key}, maxSkew {c.max_skew}): domains {over} "
                                f"exceed the minimum {low} (all: {dict(sorted(counts.items()))})")
    by_node: dict[str, list[Obj]] = defaultdict(list)
    for p in bound:
        by_node[p["spec"]["nodeName"]].append(p)
    for n in nodes:
        here = by_node.get(name_of(n), [])
        alloc = {k: amount(k, v) for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()}
        used: dict[str, int] = defaultdict(int)
        for p in here:
            for k, v in pod_requests(p).items():
                used[k] += v
        used["pods"] = len(here)
        over_fit = {k: (v, alloc.get(k, 0)) for k, v in used.items() if v > alloc.get(k, 0) and v > 0}
        if over_fit:
            problems.append(f"node {name_of(n)} holds more than it has (used, allocatable): {over_fit}")
    return problems


# -- the run --------------------------------------------------------------------------------------

class RulesBench(LiveBench):
    def __init__(self, api: ApiClient, args: argparse.Namespace, env: dict[str, str], state: Path) -> None:
        super().__init__(api, env, state, "bench-rules", PREFIX, args.deadline, args.stall)
        self.args = args

    async def start_kube_scheduler(self) -> Child:  # type: ignore[override]
        return await super().start_kube_scheduler(MEASURED_NS, named(plain(), "probe", "probe", "default-scheduler"))

    async def init_pods(self, shape: Shape, count: int) -> None:
        t0 = time.perf_counter()
        bodies = [named(shape.init_pod(), f"{shape.short}-init-{i}", f"{shape.short}-init",
                        node=f"{PREFIX}{i % self.args.nodes}") for i in range(count)]
        await create("init pods", bodies, lambda b: self.core.create_namespaced_pod(
            INIT_NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))
        say(f"  {count:,} init pods created bound in {time.perf_counter() - t0:.1f} s")

    async def measure(self, shape: Shape, who: str, count: int) -> dict[str, Any]:
        a = self.args
        c = await (self.start_koordpy() if who == "koordpy" else self.start_kube_scheduler())
        try:
            _, idle = await quiet(c, "after its start")
            round_ = f"{shape.short}-{'kp' if who == 'koordpy' else 'ks'}"
            scheduler = "koordpy" if who == "koordpy" else "default-scheduler"
            bodies = [named(shape.measured_pod(), f"{round_}-{i}", round_, scheduler) for i in range(count)]
            pods = Pods(self.api, round_, namespace=MEASURED_NS)
            await pods.start()
            try:
                cpu0, t0 = cpu_seconds(c.proc.pid), time.perf_counter()
                created = await create("measured pods", bodies, lambda b: self.core.create_namespaced_pod(
                    MEASURED_NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))
                create_s = time.perf_counter() - t0
                await wait_for(f"{shape.name}, {who}: pods bound", lambda: len(pods.bound_at), count,
                               lambda: [n for n in created if n not in pods.bound_at], a.deadline, a.stall, pods, [c])
                cpu_bind = cpu_seconds(c.proc.pid) - cpu0
                total_s = max(pods.bound_at.values()) - t0
            finally:
                await pods.stop()
            cpu_end, settled = await quiet(c, "after the last bind")
            rss = c.memory()["VmRSS"]
        finally:
            self.stop(c)
        cpu = cpu_end - cpu0
        out: dict[str, Any] = {"pods": count, "create_s": create_s, "total_s": total_s, "pods_per_s": count / total_s,
               "cpu_s": cpu, "cpu_s_per_1000": cpu / count * 1000, "cpu_s_at_last_bind": cpu_bind,
               "cpu_s_per_1000_at_last_bind": cpu_bind / count * 1000, "quiet_before": idle, "quiet_after": settled,
               "rss_mib": rss}
        say(f"  {shape.name}, {who}: {count:,} pods in {total_s:.1f} s = {out['pods_per_s']:.0f} pods/s (created in "
            f"{create_s:.1f} s); CPU {cpu:.1f} s = {out['cpu_s_per_1000']:.2f} s per 1,000 pods "
            f"({cpu_bind:.1f} s at the last bind); RSS {rss:.0f} MiB")
        t1 = time.perf_counter()
        problems = await self.check()
        out["violations"] = len(problems)
        out["violations_first"] = problems[:10]
        say(f"  checked the bound pods against their rules in {time.perf_counter() - t1:.1f} s: "
            f"{len(problems)} violations" + "".join(f"\n    {line}" for line in problems[:10]))
        await self.clean(MEASURED_NS)
        return out

    async def check(self) -> list[str]:
        nodes = await call("LIST nodes", lambda: self.core.list_node(
            _preload_content=False, _request_timeout=LIST_SECONDS))
        pods: list[Obj] = []
        for ns in (INIT_NS, MEASURED_NS):
            pods += (await call(f"LIST pods {ns}", lambda ns=ns: self.core.list_namespaced_pod(  # type: ignore[misc]
                ns, _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
        nss = await call("LIST namespaces", lambda: self.core.list_namespace(
            _preload_content=False, _request_timeout=LIST_SECONDS))
        labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nss.get("items") or []}
        return rule_violations(nodes.get("items") or [], pods, labels)


def scaled(n: int, scale: float) -> int:
    return max(1, round(n * scale))


async def bench(args: argparse.Namespace, state: Path, fig: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    env = control_plane(state)
    api = await api_client(env["KUBECONFIG"])
    b = RulesBench(api, args, env, state)
    fig.update({"nodes": args.nodes, "scale": args.scale, "shapes": {}})
    try:
        await b.namespaces((INIT_NS, MEASURED_NS))
        for ns in (INIT_NS, MEASURED_NS):
            await b.clean(ns)
        await b.nodes([node_body(i) for i in range(args.nodes)])
        who = ["koordpy"] + ([] if args.skip_kube_scheduler else ["kube-scheduler"])
        for shape in SHAPES:
            if args.shapes and shape.name not in args.shapes:
                continue
            init, measured = scaled(shape.init, args.scale), scaled(shape.measured, args.scale)
            say(f"{shape.name}: {init:,} init pods, {measured:,} measured pods on {args.nodes:,} nodes")
            await b.init_pods(shape, init)
            f: dict[str, Any] = {"init": init, "measured": measured}
            fig["shapes"][shape.name] = f
            for w in who:
                f[w] = await b.measure(shape, w, measured)
            await b.clean(INIT_NS)
        await b.drop_nodes()
        say(f"done in {time.perf_counter() - t0:.0f} s; retried calls {dict(RETRIES) or 'none'}")
    finally:
        b.stop_all()
        await api.close()


def table(fig: dict[str, Any]) -> str:
    rows = ["| shape (init + measured pods) | scheduler | pods/s | CPU s per 1,000 pods (at the last bind) "
            "| violations |", "| --- | --- | --- | --- | --- |"]
    for name, f in fig["shapes"].items():
        for w in ("koordpy", "kube-scheduler"):
            if w in f:
                r = f[w]
                rows.append(f"| {name} ({f['init']:,} + {f['measured']:,}) | {w} | {r['pods_per_s']:.0f} | "
                            f"{r['cpu_s_per_1000']:.2f} ({r['cpu_s_per_1000_at_last_bind']:.2f}) | {r['violations']} |")
        if "koordpy" in f and "kube-scheduler" in f:
            ratio = f["koordpy"]["cpu_s_per_1000"] / f["kube-scheduler"]["cpu_s_per_1000"]
            rows.append(f"| {name} | koordpy / kube-scheduler CPU | | **{ratio:.2f}x** "
                        f"({'met' if ratio <= 1 else 'missed'}: goal <= 1x) | |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--shapes", type=lambda s: set(s.split(",")), default=None,
                    help=f"comma-separated, of {', '.join(s.name for s in SHAPES)} (default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every shape's pod counts")
    ap.add_argument("--deadline", type=float, default=1200.0, help="seconds any one wait may take")
    ap.add_argument("--stall", type=float, default=180.0, help="seconds a wait may go without progress")
    ap.add_argument("--skip-kube-scheduler", action="store_true")
    ap.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    args = ap.parse_args()
    if args.shapes and args.shapes - {s.name for s in SHAPES}:
        ap.error(f"unknown shapes {sorted(args.shapes - {s.name for s in SHAPES})}")
    for s in SHAPES:  # anti-affinity per host: every pod needs a node of its own
        if s.short == "anti" and (not args.shapes or s.name in args.shapes) \
                and scaled(s.init, args.scale) + scaled(s.measured, args.scale) > args.nodes:
            ap.error(f"{s.name} needs a node per pod: --nodes {args.nodes} is fewer than its pods")
    run_and_report("bench_rules", lambda state, fig: bench(args, state, fig), args.json, ROOT, table)


if __name__ == "__main__":
    main()
