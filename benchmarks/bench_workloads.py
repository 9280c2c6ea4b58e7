"""Kubernetes' own gang API, live (issue 20): kube-scheduler v1.37's scheduler_perf workloads for
PodGroups, koordpy against kube-scheduler v1.37.2 on the same objects.

    .venv/bin/python -m benchmarks.bench_workloads [--workloads NAME,...] [--scale 1.0]
        [--skip-kube-scheduler] [--json PATH] [--deadline S] [--stall S]

The workloads, from ``test/integration/scheduler_perf`` of k8s.io/kubernetes v1.37.2 (their config
and templates read in the module cache, ``$(go env GOMODCACHE)/k8s.io/kubernetes@v1.37.2``, the
version e2e/controlplane builds), with their objects rewritten here:

- ``podgroup/gangscheduling``: ``5000Nodes_3000Gangs_9000Pods`` (3,000 PodGroups ``gang: {minCount:
  3}``, 3 pods each) and ``5000Nodes_9Gangs_9000Pods_1000PerGroup`` (9 of ``minCount: 1000``); the
  pods ask 100m CPU and 100Mi (requests only), nodes have 4 CPUs, 32Gi, 110 pods.
- ``podgroup/tas``: ``5000Nodes_750Gangs_3000Pods`` (gangs of 4) and
  ``5000Nodes_9Gangs_9000Pods_1000PerGroup``, the same pods, each PodGroup with
  ``schedulingConstraints.topology: [{key: topology.kubernetes.io/rack}]``; its node template labels
  node i with ``rack-<i/100>`` and ``zone-<i/100>``: 50 racks of 100 nodes.
- ``workload_preemption`` (100 nodes, each of its two ``performance`` sizes: one preemptor gang of
  100 pods, or ten of 10; every preemptor pod needs a node of its own):
  ``GangPreemptionBasic``: 1,000 low-priority pods (priority 0, 40m, 10 a node, told apart by host
  ports 8000-8009) and preemptor gangs (priority 8888888 on pods and PodGroup, 3970m): every low pod
  must go. ``GangPreemptionPodGroups``: low-priority PodGroups (priority 1000, 600m a pod, host port
  8000 + group index, so a group's pods are on different nodes; 5 a node) and preemptor gangs
  (priority 9999999, 3500m, host port 9000 + group index): every low group must go.
  ``GangPreemptionAffinity``: an anchor pod per node (priority 9999999, 10m, host port 7000, labels
  ``app: blue`` and ``label1..4``), the 1,000 low pods with the same labels, and preemptor gangs
  (8888888, 3970m, 500Mi) with required pod affinity to those labels per hostname in every namespace.

Per workload, one scheduler at a time (koordpy, ``koordpy run`` with defaults; then kube-scheduler
v1.37.2 with the control plane's feature gates, default profile, QPS 5000), each on its own fresh
copy of the objects (only ``schedulerName`` differs): the scheduler is started and left until its CPU
is quiet; the init pods and every PodGroup are created and the scheduler is left quiet again (as
upstream's ``createPodGroups`` waits for the informer); then the measured pods are created (64
requests in flight) and timed from the first create to the last bind seen on a watch. A group's
time is when its ``minCount``-th member was seen bound; the last group's is reported. CPU is utime +
stime of the scheduler's process from /proc/PID/stat, from just before the first measured pod until
the process is quiet again after the last bind (the figure at the last bind is kept too); RSS is
VmRSS and VmHWM then. Victims are init pods deleted or terminating at the end. Then the final state
is checked (``constraint_violations``, written from the API objects alone, not from koordpy's code):
every PodGroup with a gang policy has at least ``minCount`` members bound or none; every group with
a topology key has all its bound members on nodes sharing one value of that label; every pod named
a PodGroup that exists; and, pod by pod, resource fit, host ports and required pod affinity
(``tests.integration.checker``'s readers, as bench_rules). The victims' own groups are shown apart
(``disruptionMode: single``, their default, lets a group lose some members).

Where this differs from scheduler_perf, and why:

- Init pods (low-priority pods, anchors, low-priority groups) are created already bound
  (``spec.nodeName``) where upstream's host ports force them anyway (low pod i on node i/10 with
  port 8000 + i mod 10; anchor i on node i; member j of low group g on node (g x size + j) mod
  nodes), instead of being scheduled first: both schedulers start from the same state and no
  scheduler's time goes into them.
- Priorities are PriorityClasses (``bench-wl-<value>``, named on pods and PodGroups) instead of a
  literal ``spec.priority``: this control plane runs the Priority admission plugin, which refuses a
  pod's own priority without its class; it fills the same values in. Priority 0 is no class.
- Every node carries the tas template's labels (hostname, zone, rack), the gangscheduling ones too
  (upstream's default node has none; those groups have no constraint, so one node set serves all four).
- ``--scale`` multiplies the node and group counts, the gang size kept (racks stay 100 nodes, so
  nodes round up to whole racks); a preemption workload keeps one preemptor pod a node and its init
  pods a node.

``KOORDPY_TEST_CONTROLPLANE=DIR`` reuses a control plane (run nothing else on it meanwhile: other
nodes would take pods); ``KOORDPY_BENCH_WRAP`` prefixes koordpy's command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi

from benchmarks.bench_rules import rule_violations
from benchmarks.live_harness import (
    CALL_SECONDS,
    LIST_SECONDS,
    RETRIES,
    ROOT,
    BenchError,
    Child,
    LiveBench,
    Pods,
    call,
    control_plane,
    cpu_seconds,
    create,
    kwok_node,
    limited,
    list_names,
    quiet,
    run_and_report,
    say,
    wait_for,
)
from koordpy.controller.main import api_client
from koordpy.controller.writer import Conflict, Gone
from tests.integration.checker import Obj, host_ports, key_of, labels_of, name_of, namespace_of, ports_conflict

MEASURED_NS, INIT_NS, ANCHOR_NS = "bench-wl-0", "bench-wl-1", "bench-wl-2"
NAMESPACES = (MEASURED_NS, INIT_NS, ANCHOR_NS)
PREFIX = "wl-node-"
HOST, ZONE, RACK = "kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/rack"
NODES_PER_RACK = 100
PODGROUPS = ("scheduling.k8s.io", "v1beta1", "podgroups")
PAUSE = "registry.k8s.io/pause:3.10.1"
BLUE = {"app": "blue", "label1": "value1", "label2": "value2", "label3": "value3", "label4": "value4"}


# -- the objects (upstream's templates, rewritten) ------------------------------------------------

def node_body(i: int) -> Obj:
    return kwok_node(f"{PREFIX}{i}", {ZONE: f"zone-{i // NODES_PER_RACK}", RACK: f"rack-{i // NODES_PER_RACK}"})


def priority_class(value: int) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": f"bench-wl-{value}"}, "value": value}


def pod(name: str, cpu: str, memory: str = "100Mi", *, limits: bool = True, priority: int = 0,
        group: str | None = None, port: int | None = None, labels: dict[str, str] | None = None,
        grace: bool = False) -> Obj:
    """A pause pod; ``limits`` repeats the requests as limits (the preemption templates do),
    ``grace`` leaves terminationGracePeriodSeconds out (the gangscheduling and tas templates do)."""
    res = {"cpu": cpu, "memory": memory}
    c: Obj = {"name": "pause", "image": PAUSE, "resources": {"requests": dict(res)}}
    if limits:
        c["resources"]["limits"] = dict(res)
    if port is not None:
        c["ports"] = [{"containerPort": 80, "hostPort": port}]
    spec: Obj = {"containers": [c]}
    if not grace:
        spec["terminationGracePeriodSeconds"] = 0
    if priority:
        spec["priorityClassName"] = f"bench-wl-{priority}"
    if group is not None:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec}


def podgroup(name: str, min_count: int, *, rack: bool = False, priority: int = 0) -> Obj:
    spec: Obj = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if rack:
        spec["schedulingConstraints"] = {"topology": [{"key": RACK}]}
    if priority:
        spec["priorityClassName"] = f"bench-wl-{priority}"
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": spec}


@dataclass(frozen=True)
class Workload:
    name: str  # upstream's <test case>/<workload>
    short: str  # in pod names and round labels
    kind: str  # gang, tas, basic, podgroups, affinity
    nodes: int
    groups: int  # preemptor (measured) groups
    per_group: int


WORKLOADS = (
    Workload("GangScheduling/5000Nodes_3000Gangs_9000Pods", "g3", "gang", 5000, 3000, 3),
    Workload("GangScheduling/5000Nodes_9Gangs_9000Pods_1000PerGroup", "g1000", "gang", 5000, 9, 1000),
    Workload("TopologyAwareScheduling/5000Nodes_750Gangs_3000Pods", "t4", "tas", 5000, 750, 4),
    Workload("TopologyAwareScheduling/5000Nodes_9Gangs_9000Pods_1000PerGroup", "t1000", "tas", 5000, 9, 1000),
    Workload("GangPreemptionBasic/100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods", "pb1", "basic",
             100, 1, 100),
    Workload("GangPreemptionBasic/100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods", "pb10", "basic",
             100, 10, 10),
    Workload("GangPreemptionPodGroups/100Nodes_1PreemptorGang_100Pods_Evicting_5LowPriorityGangs", "pg1",
             "podgroups", 100, 1, 100),
    Workload("GangPreemptionPodGroups/100Nodes_10PreemptorGangs_10Pods_Evicting_50LowPriorityGangs", "pg10",
             "podgroups", 100, 10, 10),
    Workload("GangPreemptionAffinity/100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods", "pa1", "affinity",
             100, 1, 100),
    Workload("GangPreemptionAffinity/100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods", "pa10", "affinity",
             100, 10, 10),
)
LOW_PODS_A_NODE = 10  # GangPreemptionBasic and -Affinity: 1,000 init pods on 100 nodes
LOW_GROUP_PODS_A_NODE = 5  # GangPreemptionPodGroups: 5 low groups of 100, or 50 of 10, on 100 nodes


def select(names: set[str] | None) -> list[Workload]:
    """The workloads ``names`` picks: a full name, its test case (both sizes) or its short name."""
    return picked(WORKLOADS, names)


class _Named(Protocol):
    @property
    def name(self) -> str: ...  # upstream's <test case>/<workload>
    @property
    def short(self) -> str: ...


_W = TypeVar("_W", bound=_Named)


def picked(workloads: Sequence[_W], names: set[str] | None) -> list[_W]:
    """The ``workloads`` (all of them without ``names``) whose full name, test case or short name is
    among ``names`` (this benchmark's and bench_dra's command line)."""
    if not names:
        return list(workloads)
    return [w for w in workloads if names & {w.name, w.name.split("/")[0], w.short}]


@dataclass
class Plan:
    """One round's objects, for the scheduler ``scheduler``."""

    nodes: int
    classes: list[Obj] = field(default_factory=list)
    init: dict[str, list[Obj]] = field(default_factory=dict)  # namespace -> pods, bound already
    groups: dict[str, list[Obj]] = field(default_factory=dict)  # namespace -> PodGroups
    measured: list[Obj] = field(default_factory=list)  # in MEASURED_NS

    @property
    def init_pods(self) -> int:
        return sum(len(v) for v in self.init.values())


def plan(w: Workload, scale: float, scheduler: str, round_: str) -> Plan:
    """The objects of ``w`` at ``scale`` for one round: every pod names ``scheduler``; the measured
    pods are labelled ``bench-round=<round_>``, the init pods ``bench-round=<round_>-init``."""
    preemption = w.kind not in ("gang", "tas")
    if preemption:
        nodes = max(2, round(w.nodes * scale))
        groups = max(1, round(w.groups * scale))
        size = nodes // groups  # upstream: groups x size = nodes, a preemptor pod a node
    else:
        nodes = max(NODES_PER_RACK, math.ceil(w.nodes * scale / NODES_PER_RACK) * NODES_PER_RACK)
        groups, size = max(1, round(w.groups * scale)), w.per_group
    p = Plan(nodes)

    def mark(body: Obj, r: str, node: str | None = None) -> Obj:
        body["metadata"]["labels"]["bench-round"] = r
        body["spec"]["schedulerName"] = scheduler
        if node is not None:
            body["spec"]["nodeName"] = node
        return body

    init = f"{round_}-init"
    if w.kind in ("gang", "tas"):
        p.groups[MEASURED_NS] = [podgroup(f"gang-{g}", size, rack=w.kind == "tas") for g in range(groups)]
        p.measured = [mark(pod(f"{round_}-{i}", "100m", limits=False, group=f"gang-{i // size}", grace=True),
                           round_) for i in range(groups * size)]
    elif w.kind in ("basic", "affinity"):
        p.classes = [priority_class(8888888)] + ([priority_class(9999999)] if w.kind == "affinity" else [])
        low = LOW_PODS_A_NODE * nodes
        p.init[INIT_NS] = [mark(pod(f"{init}-low-{i}", "40m", port=8000 + i % LOW_PODS_A_NODE, labels=BLUE),
                                init, f"{PREFIX}{i // LOW_PODS_A_NODE}") for i in range(low)]
        if w.kind == "affinity":
            p.init[ANCHOR_NS] = [mark(pod(f"{init}-anchor-{i}", "10m", priority=9999999, port=7000, labels=BLUE),
                                      init, f"{PREFIX}{i}") for i in range(nodes)]
        p.groups[MEASURED_NS] = [podgroup(f"gang-{g}", size, priority=8888888) for g in range(groups)]
        for i in range(groups * size):
            if w.kind == "basic":
                body = pod(f"{round_}-{i}", "3970m", priority=8888888, group=f"gang-{i // size}")
            else:
                body = pod(f"{round_}-{i}", "3970m", "500Mi", priority=8888888, group=f"gang-{i // size}")
                body["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": dict(BLUE)}, "topologyKey": HOST, "namespaceSelector": {}}]}}
            p.measured.append(mark(body, round_))
    elif w.kind == "podgroups":
        p.classes = [priority_class(1000), priority_class(9999999)]
        lows = LOW_GROUP_PODS_A_NODE * nodes // size
        p.groups[INIT_NS] = [podgroup(f"gang-{g}", size, priority=1000) for g in range(lows)]
        p.init[INIT_NS] = [mark(pod(f"{init}-{g * size + j}", "600m", priority=1000, group=f"gang-{g}",
                                    port=8000 + g), init, f"{PREFIX}{(g * size + j) % nodes}")
                           for g in range(lows) for j in range(size)]
        p.groups[MEASURED_NS] = [podgroup(f"gang-{g}", size, priority=9999999) for g in range(groups)]
        p.measured = [mark(pod(f"{round_}-{i}", "3500m", priority=9999999, group=f"gang-{i // size}",
                               port=9000 + i // size), round_) for i in range(groups * size)]
    else:
        raise ValueError(f"unknown workload kind {w.kind}")
    return p


# -- the constraints, checked on the final state ----------------------------------------------------

def live(p: Obj) -> bool:
    return (not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def gang_violations(nodes: list[Obj], pods: list[Obj], groups: list[Obj],
                    evicted: frozenset[str] = frozenset()) -> list[str]:
    """What the bound ``pods`` break of their PodGroups (``scheduling.k8s.io/v1beta1``), one line per
    violation: a group with a gang policy holding some members bound but fewer than ``minCount``
    (all or nothing), unless it is one of the groups that lost members to preemption (``evicted``,
    ``namespace/name``) and its ``disruptionMode`` is not ``all`` (such a group loses members one by
    one); an ``evicted`` group with ``disruptionMode: all`` that kept members; a group with
    ``schedulingConstraints.topology`` whose bound members are on nodes lacking the key or in more
    than one of its values; a pod bound while naming a PodGroup that does not exist. Terminating and
    finished pods count as gone."""
    node_labels = {name_of(n): labels_of(n) for n in nodes}
    members: dict[str, list[Obj]] = defaultdict(list)
    for p in pods:
        g = ((p.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        if g and (p.get("spec") or {}).get("nodeName") and live(p):
            members[f"{namespace_of(p)}/{g}"].append(p)
    problems = []
    known = set()
    for g in groups:
        key = f"{namespace_of(g)}/{name_of(g)}"
        known.add(key)
        spec = g.get("spec") or {}
        bound = members.get(key, [])
        gang = (spec.get("schedulingPolicy") or {}).get("gang")
        whole = "all" in (spec.get("disruptionMode") or {})
        if bound and key in evicted and whole:
            problems.append(f"group {key} (disruptionMode all) lost members to eviction yet keeps {len(bound)} bound")
        elif gang is not None and 0 < len(bound) < int(gang.get("minCount") or 0) and key not in evicted:
            problems.append(f"group {key}: {len(bound)} members bound, fewer than its minCount "
                            f"{gang['minCount']} (all or nothing): {', '.join(sorted(name_of(p) for p in bound)[:5])}")
        for t in (spec.get("schedulingConstraints") or {}).get("topology") or []:
            values: dict[str, list[str]] = defaultdict(list)
            for p in bound:
                values[node_labels.get(p["spec"]["nodeName"], {}).get(t["key"], "<no label>")].append(name_of(p))
            if len(values) > 1 or "<no label>" in values:
                problems.append(f"group {key}: bound members span {t['key']} values "
                                f"{ {v: len(ps) for v, ps in sorted(values.items())} }, not one")
    problems += [f"{key_of(p)} is bound though its PodGroup {k} does not exist"
                 for k, ps in members.items() if k not in known for p in ps]
    return problems


def port_violations(pods: list[Obj]) -> list[str]:
    """Two live pods on one node asking for the same host port."""
    by_node: dict[str, list[Obj]] = defaultdict(list)
    for p in pods:
        if (p.get("spec") or {}).get("nodeName") and live(p) and host_ports(p):
            by_node[p["spec"]["nodeName"]].append(p)
    problems = []
    for node, here in by_node.items():
        for i, a in enumerate(here):
            for b in here[i + 1:]:
                if any(ports_conflict(x, y) for x in host_ports(a) for y in host_ports(b)):
                    problems.append(f"{key_of(a)} and {key_of(b)} on {node} ask for the same host port")
    return problems


def constraint_violations(nodes: list[Obj], pods: list[Obj], groups: list[Obj],
                          namespaces: dict[str, dict[str, str]], evicted: frozenset[str] = frozenset()) -> list[str]:
    """Every rule this benchmark holds the final state to: the PodGroups' (``gang_violations``), host
    ports, and bench_rules' ``rule_violations`` (resource fit per node, pod affinity)."""
    live_pods = [p for p in pods if live(p)]
    return (gang_violations(nodes, pods, groups, evicted) + port_violations(pods)
            + rule_violations(nodes, live_pods, namespaces))


# -- the run --------------------------------------------------------------------------------------

async def empty_podgroups(custom: CustomObjectsApi, ns: str, deadline: float) -> int:
    """Every ``scheduling.k8s.io`` PodGroup of ``ns`` gone; returns how many were asked to go. A
    PodGroup waits for its ``scheduling.k8s.io/podgroup-protection`` finalizer, which
    kube-controller-manager lifts once its pods are gone (so empty the pods first)."""
    return await empty_custom(custom, PODGROUPS, ns, deadline, "PodGroups")


async def empty_custom(custom: CustomObjectsApi, kind: tuple[str, str, str], ns: str, deadline: float,
                       what: str = "") -> int:
    """Every object of ``kind`` (group, version, plural) in ``ns`` gone; returns how many were asked
    to go. Each is deleted once and waited for (a finalizer may hold it), at most ``deadline``
    seconds in all; ``what`` names them in messages (default: the plural)."""
    what = what or kind[2]
    t0, asked = time.perf_counter(), set()
    while True:
        left = await list_names(lambda: custom.list_namespaced_custom_object(
            *kind[:2], ns, kind[2], _preload_content=False, _request_timeout=LIST_SECONDS))
        if not left:
            break
        if time.perf_counter() - t0 > deadline:
            raise BenchError(f"{len(left):,} {what} of {ns} still there {deadline:.0f} s after their "
                             f"delete (a finalizer nobody lifts?); first: {', '.join(left[:5])}")

        async def drop(name: str) -> None:
            with contextlib.suppress(Gone):
                await call(f"delete {what} {name}", lambda: custom.delete_namespaced_custom_object(
                    *kind[:2], ns, kind[2], name, _preload_content=False, _request_timeout=CALL_SECONDS))

        await limited(drop(n) for n in left if n not in asked)
        asked |= set(left)
        await asyncio.sleep(1.0)
    if asked:
        say(f"  {ns} emptied of {len(asked):,} {what} in {time.perf_counter() - t0:.1f} s")
    return len(asked)


async def listed(core: CoreV1Api, custom: CustomObjectsApi, namespaces: Iterable[str]
                 ) -> tuple[list[Obj], list[Obj], list[Obj], dict[str, dict[str, str]]]:
    """What the final state is checked on: the nodes, the pods and PodGroups of ``namespaces``, and
    every namespace's labels (by name)."""
    nodes = (await call("LIST nodes", lambda: core.list_node(
        _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
    pods: list[Obj] = []
    groups: list[Obj] = []
    for ns in namespaces:
        pods += (await call(f"LIST pods {ns}", lambda ns=ns: core.list_namespaced_pod(  # type: ignore[misc]
            ns, _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
        groups += (await call(f"LIST PodGroups {ns}", lambda ns=ns: custom.list_namespaced_custom_object(  # type: ignore[misc]
            *PODGROUPS[:2], ns, PODGROUPS[2], _preload_content=False, _request_timeout=LIST_SECONDS))
            ).get("items") or []
    nss = await call("LIST namespaces", lambda: core.list_namespace(
        _preload_content=False, _request_timeout=LIST_SECONDS))
    labels = {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in nss.get("items") or []}
    return nodes, pods, groups, labels


class WorkloadBench(LiveBench):
    def __init__(self, api: ApiClient, args: argparse.Namespace, env: dict[str, str], state: Path) -> None:
        super().__init__(api, env, state, "bench-workloads", PREFIX, args.deadline, args.stall)
        self.args = args
        self.custom = CustomObjectsApi(api)

    async def clean_all(self) -> None:
        """Every pod, then every PodGroup (``empty_podgroups``), of the benchmark's namespaces gone."""
        for ns in NAMESPACES:
            await self.clean(ns)
        for ns in NAMESPACES:
            await empty_podgroups(self.custom, ns, self.deadline)

    async def classes(self, bodies: list[Obj]) -> None:
        for b in bodies:
            with contextlib.suppress(Conflict):
                await call(f"create {b['metadata']['name']}", lambda b=b: self.custom.create_cluster_custom_object(  # type: ignore[misc]
                    "scheduling.k8s.io", "v1", "priorityclasses", b, _preload_content=False,
                    _request_timeout=CALL_SECONDS))

    async def start(self, who: str) -> Child:
        if who == "koordpy":
            return await self.start_koordpy()
        probe = pod("probe", "100m", limits=False)
        probe["metadata"]["labels"]["bench-round"] = "probe"
        return await self.start_kube_scheduler(MEASURED_NS, probe)

    async def measure(self, w: Workload, who: str) -> dict[str, Any]:
        a = self.args
        round_ = f"{w.short}-{'kp' if who == 'koordpy' else 'ks'}"
        p = plan(w, a.scale, "koordpy" if who == "koordpy" else "default-scheduler", round_)
        await self.clean_all()
        c = await self.start(who)
        out: dict[str, Any] = {"pods": len(p.measured)}
        log_start = c.log.stat().st_size
        try:
            await quiet(c, "after its start")
            t_init = time.perf_counter()
            await self.classes(p.classes)
            for ns, groups in p.groups.items():
                await create(f"PodGroups in {ns}", groups, lambda b, ns=ns: self.custom.create_namespaced_custom_object(  # type: ignore[misc]
                    *PODGROUPS[:2], ns, PODGROUPS[2], b, _preload_content=False, _request_timeout=CALL_SECONDS))
            for ns, bodies in p.init.items():
                await create(f"init pods in {ns}", bodies, lambda b, ns=ns: self.core.create_namespaced_pod(  # type: ignore[misc]
                    ns, b, _preload_content=False, _request_timeout=CALL_SECONDS))
            _, idle = await quiet(c, "after the init objects")
            say(f"  {p.init_pods:,} init pods and {sum(len(g) for g in p.groups.values()):,} PodGroups created in "
                f"{time.perf_counter() - t_init:.1f} s")
            members = {b["metadata"]["name"]: b["spec"]["schedulingGroup"]["podGroupName"] for b in p.measured}
            pods = Pods(self.api, round_, namespace=MEASURED_NS)
            await pods.start()
            try:
                cpu0, t0 = cpu_seconds(c.proc.pid), time.perf_counter()
                created = await create("measured pods", p.measured, lambda b: self.core.create_namespaced_pod(
                    MEASURED_NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))
                out["create_s"] = time.perf_counter() - t0
                try:
                    await wait_for(f"{w.name}, {who}: pods bound", lambda: len(pods.bound_at), len(p.measured),
                                   lambda: [n for n in created if n not in pods.bound_at], a.deadline, a.stall,
                                   pods, [c])
                except BenchError as exc:  # the round is reported with what it did; the next one goes on
                    out["error"] = str(exc)
                    say(f"  {w.name}, {who}: {exc}")
                cpu_bind = cpu_seconds(c.proc.pid) - cpu0
                bound_at = dict(pods.bound_at)
            finally:
                await pods.stop()
            cpu_end, settled = await quiet(c, "after the last bind")
            mem = c.memory()
        finally:
            self.stop(c)
        n = len(bound_at)
        by_group: dict[str, list[float]] = defaultdict(list)
        for name, at in bound_at.items():
            by_group[members[name]].append(at)
        need = {g["metadata"]["name"]: g["spec"]["schedulingPolicy"]["gang"]["minCount"]
                for g in p.groups.get(MEASURED_NS, [])}
        done = [sorted(ats)[need[g] - 1] for g, ats in by_group.items() if len(ats) >= need[g]]
        cpu = cpu_end - cpu0
        out.update({
            "nodes": p.nodes, "groups": len(need), "init_pods": p.init_pods, "bound": n,
            "groups_bound": len(done), "last_group_bound_s": (max(done) - t0) if done else None,
            "total_s": (max(bound_at.values()) - t0) if bound_at else None,
            "cpu_s": cpu, "cpu_s_at_last_bind": cpu_bind, "quiet_before": idle, "quiet_after": settled,
            "rss_mib": mem["VmRSS"], "hwm_mib": mem["VmHWM"]})
        out["pods_per_s"] = n / out["total_s"] if n else 0.0
        out["cpu_s_per_1000"] = cpu / n * 1000 if n else None
        out["cpu_s_per_1000_at_last_bind"] = cpu_bind / n * 1000 if n else None
        out["log_errors"] = log_errors(c.log, log_start)
        say(f"  {w.name}, {who}: {n:,} of {len(p.measured):,} pods bound, {len(done):,} of {len(need):,} groups; "
            + (f"the last group after {out['last_group_bound_s']:.1f} s, " if done else "")
            + f"{out['pods_per_s']:.0f} pods/s (created in {out['create_s']:.1f} s); CPU {cpu:.1f} s"
            + (f" = {out['cpu_s_per_1000']:.2f} s per 1,000 pods" if n else "")
            + f"; RSS {mem['VmRSS']:.0f} MiB (peak {mem['VmHWM']:.0f})")
        for line in out["log_errors"][:5]:
            say(f"    log: {line}")
        await self.settle_victims(round_, p)
        t1 = time.perf_counter()
        out.update(await self.check(p))
        say(f"  {who}: victims {out['victims']:,} (by namespace {out['victims_by_ns']}); checked in "
            f"{time.perf_counter() - t1:.1f} s: {out['violations']} violations"
            + "".join(f"\n    {line}" for line in out["violations_first"])
            + (f"\n  victims' groups left with fewer than minCount: {out['victim_groups_partial']}"
               if out["victim_groups_partial"] else ""))
        await self.clean_all()
        return out

    async def settle_victims(self, round_: str, p: Plan) -> None:
        """Waits (up to the stall limit) until no init pod is terminating: kwok finishes a victim's
        deletion, and the check must see the state after it."""
        if not p.init:
            return
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < self.args.stall:
            terminating = 0
            for ns in p.init:
                data = await call(f"LIST pods {ns}", lambda ns=ns: self.core.list_namespaced_pod(  # type: ignore[misc]
                    ns, label_selector=f"bench-round={round_}-init", _preload_content=False,
                    _request_timeout=LIST_SECONDS))
                terminating += sum(1 for q in data.get("items") or [] if q["metadata"].get("deletionTimestamp"))
            if not terminating:
                return
            await asyncio.sleep(1.0)
        say(f"  {terminating} init pods still terminating after {self.args.stall:.0f} s")

    async def check(self, p: Plan) -> dict[str, Any]:
        nodes, pods, groups, labels = await listed(self.core, self.custom, NAMESPACES)
        measured_groups = [g for g in groups if namespace_of(g) == MEASURED_NS]
        alive = {key_of(q) for q in pods if live(q)}
        gone = {ns: [f"{ns}/{b['metadata']['name']}" for b in bodies if f"{ns}/{b['metadata']['name']}" not in alive]
                for ns, bodies in p.init.items()}
        victims = {ns: len(v) for ns, v in gone.items()}
        lost = {k for v in gone.values() for k in v}
        # The victims' groups, from the bodies created (an evicted pod may be gone from the listing).
        evicted = frozenset(f"{ns}/{b['spec']['schedulingGroup']['podGroupName']}" for ns, bodies in p.init.items()
                            for b in bodies if f"{ns}/{b['metadata']['name']}" in lost
                            and b["spec"].get("schedulingGroup"))
        problems = constraint_violations(nodes, pods, groups, labels, evicted)
        partial = sum(1 for g in groups if namespace_of(g) != MEASURED_NS and f"{namespace_of(g)}/{name_of(g)}"
                      in evicted and any(((q.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
                                         == name_of(g) and namespace_of(q) == namespace_of(g) and live(q)
                                         for q in pods))
        scheduled = sum(1 for g in measured_groups if any(
            c.get("type") == "PodGroupInitiallyScheduled" and c.get("status") == "True"
            for c in (g.get("status") or {}).get("conditions") or []))
        return {"violations": len(problems), "violations_first": problems[:10], "victims": sum(victims.values()),
                "victims_by_ns": victims, "victim_groups_partial": partial,
                "groups_initially_scheduled": scheduled}


def log_errors(log: Path, start: int) -> list[str]:
    """The lines of a scheduler's log past ``start`` that say error or carry a traceback (koordpy's
    JSON lines at level error, kube-scheduler's klog E lines)."""
    with open(log, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    out = []
    for line in text.splitlines():
        # kube-scheduler says these at every start (no static pod manifest) and stop (SIGINT), not about pods.
        if "finished without leader elect" in line or "manifest file is empty" in line:
            continue
        if '"level": "error"' in line or "Traceback" in line or line.startswith("E"):
            out.append(line[:400])
    return out[:20]


async def bench(args: argparse.Namespace, state: Path, fig: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    env = control_plane(state)
    api = await api_client(env["KUBECONFIG"])
    b = WorkloadBench(api, args, env, state)
    fig.update({"scale": args.scale, "workloads": {}})
    who = ([] if args.skip_koordpy else ["koordpy"]) + ([] if args.skip_kube_scheduler else ["kube-scheduler"])
    try:
        await b.namespaces(NAMESPACES)
        await b.clean_all()
        for w in select(args.workloads):
            p = plan(w, args.scale, "", "x")
            say(f"{w.name}: {len(p.measured):,} pods in {len(p.groups.get(MEASURED_NS, [])):,} groups on "
                f"{p.nodes:,} nodes, {p.init_pods:,} init pods")
            await b.nodes([node_body(i) for i in range(p.nodes)],
                          same=lambda n: labels_of(n) == labels_of(node_body(int(name_of(n)[len(PREFIX):]))))
            f: dict[str, Any] = {"nodes": p.nodes, "groups": len(p.groups.get(MEASURED_NS, [])),
                                 "pods": len(p.measured), "init_pods": p.init_pods}
            fig["workloads"][w.name] = f
            for x in who:
                f[x] = await b.measure(w, x)
        await b.drop_nodes()
        say(f"done in {time.perf_counter() - t0:.0f} s; retried calls {dict(RETRIES) or 'none'}")
    finally:
        b.stop_all()
        await api.close()


def _pair(f: dict[str, Any], key: str, fmt: str) -> str:
    vals = []
    for x in ("koordpy", "kube-scheduler"):
        v = (f.get(x) or {}).get(key)
        vals.append("-" if v is None else format(v, fmt))
    return " / ".join(vals)


def table(fig: dict[str, Any]) -> str:
    rows = ["| workload | koordpy pods/s | kube-scheduler pods/s | time to last group bound, s (k / ks) "
            "| CPU s per 1,000 pods (k / ks, ratio; goal <= 0.5x) | RSS MiB (k / ks) | victims (k / ks) "
            "| constraints held (k / ks) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, f in fig["workloads"].items():
        k, ks = f.get("koordpy") or {}, f.get("kube-scheduler") or {}
        ratio = ""
        if k.get("cpu_s_per_1000") and ks.get("cpu_s_per_1000"):
            ratio = f", **{k['cpu_s_per_1000'] / ks['cpu_s_per_1000']:.2f}x**"

        def held(r: dict[str, Any]) -> str:
            if not r:
                return "-"
            bound = f"{r['bound']:,}/{r['pods']:,} bound"
            return (("yes" if r["violations"] == 0 else f"**no ({r['violations']})**")
                    + ("" if r["bound"] == r["pods"] else f", {bound}") + (", error" if r.get("error") else ""))

        rows.append(f"| {name} ({f['pods']:,} pods, {f['groups']:,} groups, {f['nodes']:,} nodes) | "
                    f"{_pair({'koordpy': k}, 'pods_per_s', '.0f').split(' / ')[0]} | "
                    f"{_pair({'kube-scheduler': ks}, 'pods_per_s', '.0f').split(' / ')[1]} | "
                    f"{_pair(f, 'last_group_bound_s', '.1f')} | {_pair(f, 'cpu_s_per_1000', '.2f')}{ratio} | "
                    f"{_pair(f, 'rss_mib', '.0f')} | {_pair(f, 'victims', ',')} | {held(k)} / {held(ks)} |")
    return "\n".join(rows)


def parser(doc: str | None, shorts: Iterable[str], scale: str) -> argparse.ArgumentParser:
    """The command line of a benchmark of upstream's scheduler_perf workloads (this one's, bench_dra's):
    ``shorts`` the workloads' short names, ``scale`` what ``--scale`` multiplies."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=lambda s: set(s.split(",")), default=None,
                    help=f"comma-separated: full names, test cases or short names ({', '.join(shorts)}); default all")
    ap.add_argument("--scale", type=float, default=1.0, help=f"multiplies {scale}")
    ap.add_argument("--deadline", type=float, default=900.0, help="seconds any one wait may take")
    ap.add_argument("--stall", type=float, default=180.0, help="seconds a wait may go without progress")
    ap.add_argument("--skip-kube-scheduler", action="store_true")
    ap.add_argument("--skip-koordpy", action="store_true")
    ap.add_argument("--json", metavar="PATH", help="write every figure here as JSON")
    return ap


def main() -> None:
    ap = parser(__doc__, (w.short for w in WORKLOADS), "node and group counts")
    args = ap.parse_args()
    if args.workloads and not select(args.workloads):
        ap.error(f"no workload matches {sorted(args.workloads)}")
    run_and_report("bench_workloads", lambda state, fig: bench(args, state, fig), args.json, ROOT, table)


if __name__ == "__main__":
    main()
