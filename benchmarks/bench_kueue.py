"""Behind Kueue, live (issue 34, "Speed"): koordpy behind Kueue v0.19.2 against kube-scheduler v1.37
behind the same Kueue, on the same Jobs, one scheduler at a time.

    .venv/bin/python -m benchmarks.bench_kueue [--jobs 50] [--size 8] [--nodes 500] [--runs 3]
        [--hostname-level] [--skip-kube-scheduler] [--json PATH] [--deadline S] [--stall S]

The cluster: ``--nodes`` KWOK nodes (rounded up to whole racks) of 8 CPUs, 32Gi and 110 pods, in
racks of 10 nodes (``example.com/rack``) and blocks of 5 racks (``example.com/block``). Kueue
(``tests/integration/frontends.py``: its real webhooks, the ``batch/job`` integration) has a
Topology of those levels (with ``kubernetes.io/hostname`` under them when ``--hostname-level``: then
Kueue picks each pod's node, else the scheduler picks it inside the rack), a TAS ResourceFlavor over
the nodes, one ClusterQueue whose quota is the whole cluster (all Jobs are admitted at once:
admission is not what is measured) and one LocalQueue.

A run: ``--jobs`` batch/v1 Jobs of ``--size`` pods (2 CPUs, 1Gi each), each one gang
(``spec.scheduling.schedulingPolicy.gang.minCount: size``: Kubernetes v1.37 makes a PodGroup for it,
on which both schedulers gang) asking Kueue for one rack
(``kueue.x-k8s.io/podset-required-topology``), created 64 requests in flight. Measured from a watch
of the pods (binds are ``spec.nodeName`` set, never pod phases: kwok completes a Job's pods soon
after they run): per Job, from its create's answer to its ``size``-th pod bound (Kueue's admission
and topology assignment, the Job controller's pods, Kueue's ungating and the scheduler's binds);
per Job too, from its last pod seen without scheduling gates (Kueue has written the assigned rack
into its nodeSelector) to its ``size``-th bind, the scheduler's own share; for the batch, from the
first create sent to the last bind. CPU is utime + stime of the scheduler's process
(``live_harness.cpu_seconds``) from just before the first create until it is quiet again after the
last bind; Kueue's over the same window beside it. Then the final state is checked
(``assignment_violations``): every bound pod's node matches its nodeSelector, which names the rack
Kueue assigned, every Job's pods are in one rack, and no Job is bound in part.

Runs alternate (koordpy, kube-scheduler, koordpy, ...; ``--runs`` each), each scheduler started
fresh for its run and left until its CPU is quiet, the other stopped; between runs the Jobs are
deleted and the namespace is emptied (pods, Kueue's Workloads, the PodGroups and Workloads of
``scheduling.k8s.io``). Reported per scheduler: the median and p90 (nearest rank) of the per-Job
times pooled over its runs, and the median over its runs of the batch time and of the CPU.

Every wait has a deadline (``--deadline``, ``--stall`` without progress) and ends in an error naming
the Jobs still missing, what their pods show and what Kueue says of them. ``KOORDPY_TEST_CONTROLPLANE
=DIR`` reuses a control plane (run nothing else on it meanwhile); Kueue and JobSet are started for
the benchmark and removed at its end with their CRDs (``frontends.stop``, ``remove_crds``), as the
integration tests' fixture does. ``KOORDPY_BENCH_WRAP`` prefixes koordpy's command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient, BatchV1Api, CustomObjectsApi

from benchmarks.bench_workloads import PODGROUPS, log_errors
from benchmarks.live_harness import (
    CALL_SECONDS,
    LIST_SECONDS,
    QUIET_DEADLINE,
    QUIET_SHARE,
    QUIET_WINDOW,
    RETRIES,
    ROOT,
    BenchError,
    Child,
    LiveBench,
    Pods,
    call,
    cpu_seconds,
    create,
    kwok_node,
    limited,
    list_names,
    quiet,
    run,
    run_and_report,
    say,
    wait_for,
)
from koordpy.controller.main import api_client
from koordpy.controller.writer import Gone
from tests.integration.checker import Obj, labels_of, name_of
from tests.integration.frontends import KUEUE_OBJECTS, NAMESPACE_LABEL, FrontendsError, own_crds, remove_crds
from tests.integration.frontends import start as start_frontends
from tests.integration.frontends import stop as stop_frontends
from tests.integration.kube import ControlPlane, Kube, read_env

NS = "bench-kueue"
PREFIX = "kq-node-"
HOST, BLOCK, RACK = "kubernetes.io/hostname", "example.com/block", "example.com/rack"
POOL = "bench-kueue/pool"  # the TAS ResourceFlavor's node label
NODE_CPU, NODE_MEMORY_GI, NODE_PODS = 8, 32, 110
POD_CPU, POD_MEMORY_GI = 2, 1
RACK_NODES, BLOCK_RACKS = 10, 5
QUEUE = "bench"  # the ClusterQueue, the LocalQueue, the ResourceFlavor and the Topology
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
JOB_LABEL = "batch.kubernetes.io/job-name"
KUEUE_WORKLOADS = ("kueue.x-k8s.io", "v1beta2", "workloads")
SCHEDULING_WORKLOADS = ("scheduling.k8s.io", "v1beta1", "workloads")
SCHEDULERS = ("koordpy", "kube-scheduler")
PAUSE = "registry.k8s.io/pause:3.10.1"
OWN_TOPOLOGY_CRD = ROOT / "crds" / "kueue.x-k8s.io_topologies.yaml"  # koordpy's copy of Kueue's


# -- the objects ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """The cluster a run of ``jobs`` Jobs of ``size`` pods needs, in whole racks."""

    nodes: int
    racks: int
    jobs_a_rack: int  # how many Jobs one rack holds (pods a node x nodes a rack // size)

    @property
    def capacity(self) -> int:
        return self.racks * self.jobs_a_rack


def layout(jobs: int, size: int, nodes: int) -> Layout:
    """``nodes`` rounded up to whole racks; a ValueError when a Job of ``size`` pods does not fit one
    rack or the ``jobs`` do not fit the cluster together (each Job must get a rack of its own choosing
    at once: a Job waiting for room would measure the wait, not the scheduler)."""
    if jobs < 1 or size < 1 or nodes < 1:
        raise ValueError("--jobs, --size and --nodes must be at least 1")
    racks = math.ceil(nodes / RACK_NODES)
    pods_a_rack = RACK_NODES * (NODE_CPU // POD_CPU)
    if size > pods_a_rack:
        raise ValueError(f"a Job of {size} pods does not fit one rack ({RACK_NODES} nodes of {NODE_CPU} CPUs hold "
                         f"{pods_a_rack} pods of {POD_CPU} CPUs)")
    out = Layout(racks * RACK_NODES, racks, pods_a_rack // size)
    if jobs > out.capacity:
        raise ValueError(f"{jobs} Jobs of {size} pods do not fit {out.nodes} nodes ({out.racks} racks of "
                         f"{out.jobs_a_rack} Jobs each): give more --nodes")
    return out


def node_body(i: int) -> Obj:
    rack = i // RACK_NODES
    body = kwok_node(f"{PREFIX}{i}", {POOL: "tas", BLOCK: f"b{rack // BLOCK_RACKS}", RACK: f"r{rack}"})
    alloc = {"cpu": str(NODE_CPU), "memory": f"{NODE_MEMORY_GI}Gi", "pods": str(NODE_PODS)}
    body["status"] = {"allocatable": alloc, "capacity": dict(alloc)}
    return body


def kueue_objects(lay: Layout, hostname_level: bool) -> list[Obj]:
    """The namespace (labelled so Kueue's webhooks see it), a Topology, a TAS ResourceFlavor, a
    ClusterQueue whose quota is the whole cluster, and a LocalQueue."""
    levels = [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}] + ([{"nodeLabel": HOST}] if hostname_level else [])
    quota = [{"name": "cpu", "nominalQuota": str(lay.nodes * NODE_CPU)},
             {"name": "memory", "nominalQuota": f"{lay.nodes * NODE_MEMORY_GI}Gi"}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {NAMESPACE_LABEL: "true"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": QUEUE},
         "spec": {"levels": levels}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": QUEUE},
         "spec": {"nodeLabels": {POOL: "tas"}, "topologyName": QUEUE}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": QUEUE},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory"], "flavors": [{"name": QUEUE, "resources": quota}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": QUEUE, "namespace": NS},
         "spec": {"clusterQueue": QUEUE}},
    ]


def job_body(name: str, size: int, scheduler: str, round_: str) -> Obj:
    """A Job of ``size`` pods, one gang, in the LocalQueue, requiring one rack; its pods are labelled
    ``bench-round=<round_>`` (the watch's selector) and name ``scheduler``."""
    res = {"cpu": str(POD_CPU), "memory": f"{POD_MEMORY_GI}Gi"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: QUEUE}},
            "spec": {"parallelism": size, "completions": size,
                     "scheduling": {"schedulingPolicy": {"gang": {"minCount": size}}},
                     "template": {
                         "metadata": {"labels": {"bench-round": round_}, "annotations": {REQUIRED: RACK}},
                         "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                                  "terminationGracePeriodSeconds": 0, "containers": [
                                      {"name": "main", "image": PAUSE, "resources": {"requests": res}}]}}}}


def order(runs: int, skip_kube_scheduler: bool) -> list[tuple[str, int]]:
    """The rounds, (scheduler, run number from 1), alternating so that neither scheduler always runs
    on a cluster the other has just left."""
    who = SCHEDULERS[:1] if skip_kube_scheduler else SCHEDULERS
    return [(w, r) for r in range(1, runs + 1) for w in who]


# -- the figures ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class JobTime:
    total: float  # the Job's create answered -> its size-th pod bound
    scheduler: float  # its last pod (of those first bound) seen ungated -> its size-th pod bound


def job_times(created: dict[str, float], job_of: dict[str, str], ungated_at: dict[str, float],
              bound_at: dict[str, float], size: int) -> dict[str, JobTime]:
    """Per Job (named in ``created``), once ``size`` of its pods are bound: see ``JobTime``. A pod
    never seen gated counts as ungated when it was bound. Jobs with fewer bound pods are left out."""
    bound: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for pod, at in bound_at.items():
        job = job_of.get(pod)
        if job in created:
            bound[job].append((at, pod))
    out = {}
    for job, pods in bound.items():
        if len(pods) < size:
            continue
        first = sorted(pods)[:size]
        done = first[-1][0]
        ready = max(min(ungated_at.get(pod, at), at) for at, pod in first)
        out[job] = JobTime(done - created[job], done - ready)
    return out


def nearest_rank(values: Iterable[float], q: float) -> float | None:
    """The ``q`` quantile by nearest rank (a value that was measured), None for no values."""
    s = sorted(values)
    if not s:
        return None
    return s[max(0, math.ceil(q * len(s)) - 1)]


def median(values: Iterable[float | None]) -> float | None:
    s = [v for v in values if v is not None]
    return statistics.median(s) if s else None


def summarize(rounds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scheduler, over its rounds: the per-Job times pooled (median, p90), the medians of the
    batch time and CPU over the rounds, how many rounds ended in an error and the violations."""
    out: dict[str, dict[str, Any]] = {}
    for who in SCHEDULERS:
        mine = [r for r in rounds if r["scheduler"] == who]
        if not mine:
            continue
        jobs = [t for r in mine for t in r.get("job_s") or []]
        share = [t for r in mine for t in r.get("scheduler_s") or []]
        out[who] = {
            "runs": len(mine), "errors": sum(1 for r in mine if r.get("error")),
            "jobs_measured": len(jobs), "jobs": sum(r["jobs"] for r in mine),
            "job_s_median": median(jobs), "job_s_p90": nearest_rank(jobs, 0.9),
            "scheduler_s_median": median(share), "scheduler_s_p90": nearest_rank(share, 0.9),
            "batch_s_median": median(r.get("batch_s") for r in mine),
            "batch_s": [r.get("batch_s") for r in mine],
            "cpu_s_median": median(r.get("cpu_s") for r in mine),
            "kueue_cpu_s_median": median(r.get("kueue_cpu_s") for r in mine),
            "violations": sum(r.get("violations", 0) for r in mine)}
    return out


# -- the final state ----------------------------------------------------------------------------------

def assignment_violations(nodes: list[Obj], pods: list[Obj], size: int) -> list[str]:
    """What the bound ``pods`` (finished ones too: kwok completes them, their node stays) break of
    Kueue's assignment, one line each: a pod whose nodeSelector names no rack (it was not placed under
    Kueue's topology assignment); a pod on a node its nodeSelector does not match, or on a node not
    there; a Job whose bound pods span racks; a Job with some but fewer than ``size`` pods bound (a
    gang bound in part)."""
    node_labels = {name_of(n): labels_of(n) for n in nodes}
    by_job: dict[str, list[Obj]] = defaultdict(list)
    problems = []
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node:
            continue
        name = name_of(p)
        by_job[labels_of(p).get(JOB_LABEL, "<no job>")].append(p)
        selector = p["spec"].get("nodeSelector") or {}
        if RACK not in selector:
            problems.append(f"{name} on {node}: its nodeSelector {selector} names no {RACK} (no Kueue assignment)")
        on = node_labels.get(node)
        if on is None:
            problems.append(f"{name} is bound to {node}, which is not a node")
        elif any(on.get(k) != v for k, v in selector.items()):
            problems.append(f"{name} on {node} ({ {k: on.get(k) for k in selector} }) outside its nodeSelector "
                            f"{selector}")
    for job, members in sorted(by_job.items()):
        racks = sorted({node_labels.get(p["spec"]["nodeName"], {}).get(RACK, "<no rack>") for p in members})
        if len(racks) > 1:
            problems.append(f"Job {job}: its pods span racks {racks}")
        if len(members) < size:
            problems.append(f"Job {job}: {len(members)} of its {size} pods bound (a gang bound in part)")
    return problems


# -- the run ----------------------------------------------------------------------------------------

class JobPods(Pods):
    """``Pods``, with each pod's Job (its ``batch.kubernetes.io/job-name`` label) and when it was first
    seen without scheduling gates (Kueue's ungater has lifted its topology gate); a wait names Jobs,
    and what it misses is said Job by Job, with Kueue's conditions on each Job's Workload."""

    def __init__(self, api: ApiClient, round_: str, size: int, kueue_pid: int | None) -> None:
        super().__init__(api, round_, namespace=NS)
        self.custom = CustomObjectsApi(api)
        self.size, self.kueue_pid = size, kueue_pid
        self.job_of: dict[str, str] = {}
        self.ungated_at: dict[str, float] = {}

    def _record(self, pod: dict[str, Any], listed: bool) -> None:
        super()._record(pod, listed)
        name = (pod.get("metadata") or {}).get("name") or ""
        job = labels_of(pod).get(JOB_LABEL)
        if job:
            self.job_of[name] = job
        if not (pod.get("spec") or {}).get("schedulingGates") and name not in self.ungated_at:
            # First seen on a LIST: lifted some time before; never later than its bind.
            self.ungated_at[name] = min(time.perf_counter(), self.bound_at.get(name, math.inf))

    def bound_jobs(self) -> set[str]:
        count: dict[str, int] = defaultdict(int)
        for pod in self.bound_at:
            if pod in self.job_of:
                count[self.job_of[pod]] += 1
        return {j for j, n in count.items() if n >= self.size}

    async def describe(self, missing: list[str]) -> str:
        """What a fresh LIST of the pods and of Kueue's Workloads says of the Jobs still ``missing``."""
        await self.refresh()
        pods: dict[str, list[str]] = defaultdict(list)
        for name, state in self.state.items():
            if name in self.job_of:
                gated = name not in self.ungated_at
                pods[self.job_of[name]].append("bound" if state.node else "gated" if gated else
                                               f"pending PodScheduled={state.scheduled or '-'} {state.reason} "
                                               f"{state.message[:100]!r}")
        kueue: dict[str, str] = {}
        try:
            data = await call("LIST Kueue Workloads", lambda: self.custom.list_namespaced_custom_object(
                *KUEUE_WORKLOADS[:2], NS, KUEUE_WORKLOADS[2], _preload_content=False,
                _request_timeout=LIST_SECONDS))
            for w in data.get("items") or []:
                owner = next((r["name"] for r in w["metadata"].get("ownerReferences") or [] if r["kind"] == "Job"), "")
                conds = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
                said = [f"{t}={conds[t]['status']}" for t in ("QuotaReserved", "Admitted", "Finished") if t in conds]
                why = conds.get("QuotaReserved", {})
                if why.get("status") == "False":
                    said.append(f"{why.get('reason', '')} {why.get('message', '')[:150]!r}")
                kueue[owner] = " ".join(said) or "no conditions"
        except Exception as exc:
            kueue = {j: f"(a LIST of Kueue's Workloads failed: {exc!r})" for j in missing}
        alive = "" if self.kueue_pid is None or Path(f"/proc/{self.kueue_pid}").exists() else \
            "Kueue is not running (see its log, DIR/logs/kueue.log); "
        first = "; ".join(f"{j}: pods {dict(sorted(Counter(pods.get(j, [])).items())) or 'none made'}, Kueue's "
                          f"Workload: {kueue.get(j, 'none')}" for j in missing[:5])
        return (f"{alive}{len(missing):,} Jobs missing; first: {first} [watch breaks {self.breaks}, "
                f"relists {self.relists}]")


class KueueBench(LiveBench):
    def __init__(self, api: ApiClient, args: argparse.Namespace, env: dict[str, str], state: Path,
                 lay: Layout) -> None:
        super().__init__(api, env, state, "bench-kueue", PREFIX, args.deadline, args.stall)
        self.args, self.lay = args, lay
        self.batch = BatchV1Api(api)
        self.custom = CustomObjectsApi(api)
        self.kueue_pid: int | None = None

    async def until_empty(self, what: str, names: Callable[[], Awaitable[list[str]]],
                          delete: Callable[[str], Awaitable[Any]]) -> int:
        """Deletes every object ``names()`` lists, once each, and waits until none is listed (a finalizer
        may hold one a while); a BenchError naming what is left after the deadline."""
        t0, asked = time.perf_counter(), set[str]()
        while True:
            left = await names()
            if not left:
                return len(asked)
            if time.perf_counter() - t0 > self.deadline:
                raise BenchError(f"{len(left):,} {what} of {NS} still there {self.deadline:.0f} s after their "
                                 f"delete (a finalizer nobody lifts?); first: {', '.join(left[:5])}")

            async def drop(name: str) -> None:
                with contextlib.suppress(Gone):
                    await call(f"delete {what} {name}", lambda: delete(name))

            await limited(drop(n) for n in left if n not in asked)
            asked |= set(left)
            await asyncio.sleep(1.0)

    async def clean_all(self) -> None:
        """The Jobs gone (their pods with them, in the background), then every pod, then Kueue's
        Workloads and the PodGroups and Workloads of ``scheduling.k8s.io`` (each held by a finalizer
        until its controller lets go)."""
        t0 = time.perf_counter()
        jobs = await self.until_empty("Jobs", lambda: list_names(lambda: self.batch.list_namespaced_job(
            NS, _preload_content=False, _request_timeout=LIST_SECONDS)), lambda n: self.batch.delete_namespaced_job(
            n, NS, propagation_policy="Background", _preload_content=False, _request_timeout=CALL_SECONDS))
        pods = await self.until_empty("pods", lambda: list_names(lambda: self.core.list_namespaced_pod(
            NS, _preload_content=False, _request_timeout=LIST_SECONDS)), lambda n: self.core.delete_namespaced_pod(
            n, NS, grace_period_seconds=0, _preload_content=False, _request_timeout=CALL_SECONDS))
        rest = 0
        for kind in (KUEUE_WORKLOADS, PODGROUPS, SCHEDULING_WORKLOADS):
            rest += await self.until_empty(kind[2], lambda kind=kind: list_names(  # type: ignore[misc]
                lambda: self.custom.list_namespaced_custom_object(*kind[:2], NS, kind[2], _preload_content=False,
                                                                  _request_timeout=LIST_SECONDS)),
                lambda n, kind=kind: self.custom.delete_namespaced_custom_object(  # type: ignore[misc]
                    *kind[:2], NS, kind[2], n, _preload_content=False, _request_timeout=CALL_SECONDS))
        if jobs or pods or rest:
            say(f"  {NS} emptied of {jobs:,} Jobs, {pods:,} pods and {rest:,} Workloads and PodGroups in "
                f"{time.perf_counter() - t0:.1f} s")

    async def start(self, who: str) -> Child:
        if who == "koordpy":
            return await self.start_koordpy()
        probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "labels": {"bench-round": "probe"}},
                 "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                     {"name": "main", "image": PAUSE, "resources": {"requests": {"cpu": "100m"}}}]}}
        return await self.start_kube_scheduler(NS, probe)

    async def kueue_quiet(self) -> None:
        """Waits until Kueue uses at most QUIET_SHARE of a core (it may still be releasing the last
        run's Workloads), as ``quiet`` does for a scheduler; after QUIET_DEADLINE it says so and goes on."""
        if self.kueue_pid is None:
            return
        start = last_t = time.perf_counter()
        last = cpu_seconds(self.kueue_pid)
        while time.perf_counter() - start < QUIET_DEADLINE:
            await asyncio.sleep(QUIET_WINDOW)
            now, t = cpu_seconds(self.kueue_pid), time.perf_counter()
            if (now - last) / (t - last_t) <= QUIET_SHARE:
                return
            last, last_t = now, t
        say(f"  Kueue was never quiet in {QUIET_DEADLINE:.0f} s: the run starts all the same")

    async def measure(self, who: str, run_no: int) -> dict[str, Any]:
        a = self.args
        round_ = f"{'kp' if who == 'koordpy' else 'ks'}{run_no}"
        bodies = [job_body(f"{round_}-j{i}", a.size, "koordpy" if who == "koordpy" else "default-scheduler", round_)
                  for i in range(a.jobs)]
        out: dict[str, Any] = {"scheduler": who, "run": run_no, "jobs": a.jobs, "pods": a.jobs * a.size}
        await self.clean_all()
        await self.kueue_quiet()
        c = await self.start(who)
        log_start = c.log.stat().st_size
        try:
            await quiet(c, "after its start")
            pods = JobPods(self.api, round_, a.size, self.kueue_pid)
            await pods.start()
            try:
                kueue0 = cpu_seconds(self.kueue_pid) if self.kueue_pid else 0.0
                cpu0, t0 = cpu_seconds(c.proc.pid), time.perf_counter()
                created = await create("Jobs", bodies, lambda b: self.batch.create_namespaced_job(
                    NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))
                out["create_s"] = time.perf_counter() - t0
                try:
                    await wait_for(f"{who} run {run_no}: Jobs bound whole", lambda: len(pods.bound_jobs()), a.jobs,
                                   lambda: sorted(set(created) - pods.bound_jobs()), a.deadline, a.stall, pods, [c])
                except BenchError as exc:  # the run is reported with what it did; the next one goes on
                    out["error"] = str(exc)
                    say(f"  {who} run {run_no}: {exc}")
                out["cpu_s_at_last_bind"] = cpu_seconds(c.proc.pid) - cpu0
                times = job_times(created, dict(pods.job_of), dict(pods.ungated_at), dict(pods.bound_at), a.size)
                last_bind = max((at for p, at in pods.bound_at.items() if pods.job_of.get(p) in created), default=None)
            finally:
                await pods.stop()
            cpu_end, settled = await quiet(c, "after the last bind")
            out["kueue_cpu_s"] = (cpu_seconds(self.kueue_pid) - kueue0) if self.kueue_pid else None
        finally:
            self.stop(c)
        job_s = sorted(t.total for t in times.values())
        share = sorted(t.scheduler for t in times.values())
        out.update({
            "jobs_bound": len(times), "job_s": job_s, "scheduler_s": share,
            "job_s_median": median(job_s), "job_s_p90": nearest_rank(job_s, 0.9), "job_s_max": job_s[-1] if job_s
            else None, "scheduler_s_median": median(share), "scheduler_s_p90": nearest_rank(share, 0.9),
            "batch_s": (last_bind - t0) if last_bind is not None and len(times) == a.jobs else None,
            "cpu_s": cpu_end - cpu0, "quiet_after": settled, "log_errors": log_errors(c.log, log_start)})
        say(f"  {who} run {run_no}: {len(times)} of {a.jobs} Jobs bound whole"
            + (f"; per Job median {out['job_s_median']:.2f} s, p90 {out['job_s_p90']:.2f} s (ungated -> bound median "
               f"{out['scheduler_s_median']:.2f} s)" if job_s else "")
            + (f"; the batch {out['batch_s']:.2f} s" if out["batch_s"] is not None else "")
            + f" (created in {out['create_s']:.1f} s); CPU {out['cpu_s']:.2f} s"
            + (f", Kueue's {out['kueue_cpu_s']:.2f} s" if out["kueue_cpu_s"] is not None else ""))
        for line in out["log_errors"][:5]:
            say(f"    log: {line}")
        out.update(await self.check())
        say(f"  {who} run {run_no}: {out['violations']} violations of Kueue's assignment"
            + "".join(f"\n    {line}" for line in out["violations_first"]))
        return out

    async def check(self) -> dict[str, Any]:
        nodes = (await call("LIST nodes", lambda: self.core.list_node(
            _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
        pods = (await call(f"LIST pods {NS}", lambda: self.core.list_namespaced_pod(
            NS, _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
        problems = assignment_violations(nodes, pods, self.args.size)
        return {"violations": len(problems), "violations_first": problems[:10]}

    async def queue_active(self) -> None:
        t0 = time.perf_counter()
        while True:
            cq = await call("GET ClusterQueue", lambda: self.custom.get_cluster_custom_object(
                "kueue.x-k8s.io", "v1beta2", "clusterqueues", QUEUE, _preload_content=False,
                _request_timeout=CALL_SECONDS))
            conds = {c["type"]: c for c in (cq.get("status") or {}).get("conditions") or []}
            if conds.get("Active", {}).get("status") == "True":
                say(f"  ClusterQueue {QUEUE} active after {time.perf_counter() - t0:.1f} s")
                return
            if time.perf_counter() - t0 > self.deadline:
                raise BenchError(f"ClusterQueue {QUEUE} not Active after {self.deadline:.0f} s: "
                                 f"{conds.get('Active') or 'no Active condition'}")
            await asyncio.sleep(1.0)


def control_plane(state: Path) -> tuple[dict[str, str], ControlPlane]:
    """``live_harness.control_plane``, but koordpy's CRDs as ``frontends.own_crds`` picks them: its copy
    of Kueue's Topology CRD is left out once Kueue's own is installed (a killed run of this benchmark
    on a reused control plane leaves it), which it would be applied over."""
    t0 = time.perf_counter()
    run([str(ROOT / "e2e/controlplane/up.sh"), str(state)], timeout=1800)
    env = read_env(state / "env")
    cp = ControlPlane(dir=state, env=env)
    files = own_crds(Kube(cp))
    run([env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"], "apply", *(a for f in files for a in ("-f", str(f)))],
        timeout=120)
    say(f"control plane {state} up in {time.perf_counter() - t0:.1f} s")
    return env, cp


async def bench(args: argparse.Namespace, lay: Layout, state: Path, fig: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    fig.update({"jobs": args.jobs, "size": args.size, "nodes": lay.nodes, "racks": lay.racks,
                "hostname_level": args.hostname_level, "rounds": []})
    env, cp = control_plane(state)
    api = await api_client(env["KUBECONFIG"])
    b = KueueBench(api, args, env, state, lay)
    kube = Kube(cp)
    started = False
    try:
        say(f"{args.jobs} Jobs of {args.size} pods, a rack required, on {lay.nodes:,} nodes ({lay.racks} racks, "
            f"{lay.jobs_a_rack} Jobs a rack: {args.jobs / lay.capacity:.0%} of the cluster)")
        await b.nodes([node_body(i) for i in range(lay.nodes)],
                      same=lambda n: labels_of(n) == labels_of(node_body(int(name_of(n)[len(PREFIX):])))
                      and (n.get("status") or {}).get("allocatable", {}).get("cpu") == str(NODE_CPU))
        t1 = time.perf_counter()
        try:
            fronts = await asyncio.to_thread(start_frontends, cp)
        except FrontendsError as exc:
            raise BenchError(f"Kueue did not start: {exc}") from exc
        started = True
        pid = (fronts.dir / "kueue.pid")
        b.kueue_pid = int(pid.read_text()) if pid.exists() else None
        say(f"Kueue v0.19.2 (pid {b.kueue_pid}, log {state}/logs/kueue.log) up in {time.perf_counter() - t1:.1f} s")
        await asyncio.to_thread(kube.apply, kueue_objects(lay, args.hostname_level))
        await b.queue_active()
        for who, n in order(args.runs, args.skip_kube_scheduler):
            say(f"{who}, run {n}")
            fig["rounds"].append(await b.measure(who, n))
        await b.clean_all()
        fig["summary"] = summarize(fig["rounds"])
        say(f"done in {time.perf_counter() - t0:.0f} s; retried calls {dict(RETRIES) or 'none'}")
    finally:
        b.stop_all()
        if started:  # Kueue's objects go while it runs (its finalizers), then Kueue, then its CRDs
            await asyncio.to_thread(kube.kubectl, "delete", "jobs.batch", "--all", "-n", NS, "--timeout=60s",
                                    check=False)
            await asyncio.to_thread(kube.kubectl, "delete", KUEUE_OBJECTS, "--all", "--all-namespaces",
                                    "--timeout=60s", check=False)
            await asyncio.to_thread(stop_frontends, cp)
            await asyncio.to_thread(remove_crds, cp, OWN_TOPOLOGY_CRD)
        try:
            await b.drop_nodes()
        finally:
            await api.close()
    if "summary" not in fig:
        fig["summary"] = summarize(fig["rounds"])


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def table(fig: dict[str, Any]) -> str:
    summary = fig.get("summary") or summarize(fig.get("rounds") or [])
    picks = ", Kueue picks the nodes" if fig.get("hostname_level") else ""
    head = (f"{fig.get('jobs')} Jobs x {fig.get('size')} pods, a rack required, {fig.get('nodes'):,} nodes "
            f"({fig.get('racks')} racks of {RACK_NODES}{picks})")
    rows = [head, "",
            "| scheduler | runs | Job created -> all pods bound, s (median / p90) | last pod ungated -> all bound, s "
            "(median / p90) | batch, first create -> last bind, s (median; each run) | CPU s (median) "
            "| Kueue CPU s (median) | assignment held |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for who, s in summary.items():
        held = "yes" if s["violations"] == 0 else f"**no ({s['violations']})**"
        if s["jobs_measured"] < s["jobs"]:
            held += f", {s['jobs_measured']:,}/{s['jobs']:,} Jobs bound"
        if s["errors"]:
            held += f", {s['errors']} runs in error"
        rows.append(f"| {who} | {s['runs']} | {_f(s['job_s_median'])} / {_f(s['job_s_p90'])} | "
                    f"{_f(s['scheduler_s_median'])} / {_f(s['scheduler_s_p90'])} | {_f(s['batch_s_median'])} "
                    f"({', '.join(_f(v) for v in s['batch_s'])}) | {_f(s['cpu_s_median'])} | "
                    f"{_f(s['kueue_cpu_s_median'])} | {held} |")
    k, ks = summary.get("koordpy"), summary.get("kube-scheduler")
    if k and ks:
        def ratio(key: str) -> str:
            return (f"{k[key] / ks[key]:.2f}x" if k.get(key) and ks.get(key) else "-")
        rows += ["", f"koordpy / kube-scheduler: per Job (median) {ratio('job_s_median')}, p90 {ratio('job_s_p90')}, "
                     f"the batch {ratio('batch_s_median')}, CPU {ratio('cpu_s_median')} (goal: at most 1x in time)"]
    return "\n".join(rows)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=50, help="Jobs a run")
    ap.add_argument("--size", type=int, default=8, help="pods a Job (one gang)")
    ap.add_argument("--nodes", type=int, default=500, help=f"KWOK nodes, rounded up to racks of {RACK_NODES}")
    ap.add_argument("--runs", type=int, default=3, help="runs of each scheduler, alternating")
    ap.add_argument("--hostname-level", action="store_true",
                    help="a hostname level under the racks in Kueue's Topology: Kueue picks each pod's node")
    ap.add_argument("--deadline", type=float, default=600.0, help="seconds any one wait may take")
    ap.add_argument("--stall", type=float, default=120.0, help="seconds a wait may go without progress")
    ap.add_argument("--skip-kube-scheduler", action="store_true")
    ap.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    return ap


def main() -> None:
    ap = parser()
    args = ap.parse_args()
    if args.runs < 1:
        ap.error("--runs must be at least 1")
    try:
        lay = layout(args.jobs, args.size, args.nodes)
    except ValueError as exc:
        ap.error(str(exc))
    run_and_report("bench_kueue", lambda state, fig: bench(args, lay, state, fig), args.json, ROOT, table)


if __name__ == "__main__":
    main()
