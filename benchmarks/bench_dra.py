"""Dynamic Resource Allocation, live (issue 30): kube-scheduler v1.37's ``scheduler_perf/dra``
workloads, koordpy against kube-scheduler v1.37.2 on the same objects, both allocations held to one
checker.

    .venv/bin/python -m benchmarks.bench_dra [--workloads NAME,...] [--scale 1.0] [--duration 10]
        [--skip-koordpy] [--skip-kube-scheduler] [--json PATH] [--deadline S] [--stall S]

The workloads, from ``test/integration/scheduler_perf/dra`` of k8s.io/kubernetes v1.37.2 (its
``performance-config.yaml``, the subfolders' configs and ``templates/``, read in the module cache,
``$(go env GOMODCACHE)/k8s.io/kubernetes@v1.37.2``), with their objects rewritten here. Every node is
upstream's ``node-with-dra-test-driver`` (4 CPUs, 32Gi, 110 pods, label ``node-with-dra: "true"``);
the driver is ``test-driver.cdi.k8s.io``, published by the benchmark itself as upstream's
``createAny`` ops do (no driver runs: ResourceSlices are plain API objects); the DeviceClass
``test-class`` selects ``device.driver == "test-driver.cdi.k8s.io"``.

- ``SchedulingWithResourceClaimTemplate/5000pods_500nodes`` (``rct``): a slice per node of 10
  devices (``resourceslice-basic-devices``: an Intel GPU's attributes, PCI roots alternating over 2);
  2,500 claims of one device allocated before the round (upstream's ``allocResourceClaims``), then
  2,500 pods each with a claim from the template ``test-claim-template`` (one device): the cluster
  ends full. Upstream's threshold: 56 pods/s.
- ``SchedulingWithResourceClaim/5000pods_500nodes`` (``rc``): a slice per node of 2 devices; 500
  claims and 2,500 init pods sharing them five to a claim (scheduled first, not measured), then 500
  more claims and 2,500 measured pods sharing them likewise: every device taken.
- ``SharedPodGroupResourceClaimTemplate/100podgroups_5000pods`` (``workloadresourceclaims``,
  ``pgt``): 50 nodes; 100 network-attached slices of one device each (``nodeSelector:
  node-with-dra In (true)``); 100 ``scheduling.k8s.io/v1beta1`` PodGroups (``basic`` policy) each
  with the claim ``resource`` from ``test-claim-template``; 5,000 pods, member ``i`` of group
  ``i mod 100``, each naming the identical entry, so the whole group shares the one claim the
  ResourceClaim controller makes for the PodGroup (``resourceclaim.BindTo``: reserved for the
  PodGroup). Needs ``DRAWorkloadResourceClaims`` (beta, off by default) on the control plane.
- ``ExtendedResource/Explicit_25classes_5000pods_500nodes`` (``extendedresource``, ``er``): a slice
  per node of 10 devices; 25 DeviceClasses ``test-class-<k>`` with ``extendedResourceName:
  example.com/gpu-<k>``; 2,500 init pods (scheduled first, not measured) and 2,500 measured pods,
  pod ``i`` asking ``example.com/gpu-<i mod 25>: 1`` (no node publishes it: the scheduler makes the
  pod's special claim). Upstream's threshold: 120 pods/s.
- ``PartitionableBacktracking/half_500nodes`` (``partitionabledevices``, ``pbt``): per node a slice
  of shared counters (``cpu1..8`` of 1, ``mem`` of 70Gi) and a slice of 8 devices consuming them
  (device 1: cpu1 and 20Gi, devices 2-8: their cpu and 10Gi each); the template asks 7 devices, which
  only devices 2-8 give (any set with device 1 exceeds 70Gi: the allocator backtracks), so a pod
  takes a node. 250 claims of 7 allocated before the round (half the nodes); then steady state as
  upstream runs it: 10 pods created, each one seen bound is deleted (grace 0) and a new one created,
  for ``--duration`` seconds (upstream: 10); the pods bound in that window are counted.

Per workload, one scheduler at a time (koordpy, ``koordpy run`` with defaults; then kube-scheduler
v1.37.2 with the control plane's feature gates, default profile, QPS 5000), each on a fresh copy of
the per-round objects (claims, templates, PodGroups, pods; only ``schedulerName`` differs; nodes,
slices and classes are the workload's and stay): the scheduler is started and left until its CPU is
quiet; the claims (with their allocations written), templates and PodGroups are created; the init
pods are created and waited for until bound (every wait has a deadline and names what is missing);
the scheduler is left quiet again; then the measured pods are created (64 requests in flight) and
timed from the first create to the last bind seen on a watch. CPU is utime + stime of the
scheduler's process (bench_workloads' way) from just before the first measured pod until it is
quiet after the last bind (steady state: exactly the window), per 1,000 measured pods bound.

Then the final state is checked by ``tests.integration.dra_checker.dra_violations`` (written from the
API's rules, not from koordpy's code; the same for both schedulers): every bound pod's claims
allocated with devices usable on its node, reserved for it (or its PodGroup), exactly the devices
each request asks, no device allocated twice, no shared counter overdrawn; and by bench_workloads'
``constraint_violations`` (resource fit per node, host ports, PodGroups), with DRA-backed extended
resources left out of the fit (a node does not publish them; the claim holds them).

Where this differs from scheduler_perf, and why:

- ``allocResourceClaims`` picks a random node per claim and the allocator's first fit there; here
  claim ``i`` is on node ``i mod nodes`` (template workload: device ``basic-device-<i div nodes>``;
  backtracking: the even nodes, devices 2-8), the same utilisation spread evenly, so both schedulers
  start from the same state. The allocation is written as the allocator writes it (results, and a
  node selector on ``metadata.name``), without ``reservedFor``, as upstream's op does.
- Init pods (``rc``, ``er``) are scheduled by the scheduler under test, as upstream's ``createPods``
  in the init namespace does, and are not measured: a pre-bound pod cannot be had without writing
  its claim's allocation, reservation and (``er``) its special claim, which is the scheduler's work.
- Object names: nodes ``dra-node-<i>`` (upstream ``scheduler-perf-dra-<i>``), namespaces
  ``bench-dra-0`` (upstream ``test``) and ``bench-dra-1`` (``init``), pods ``<round>-<i>`` (upstream
  ``generateName``); slices, pools, classes, claims and templates keep upstream's names. Nodes carry
  ``kubernetes.io/hostname`` too, and the DeviceClass is ``resource.k8s.io/v1`` (the extended
  resource template says v1beta2; same fields).
- ``PublishResourceSlices`` and the other variants are not run; ``--scale`` multiplies nodes, claims
  and pods (at least one node; five pods a shared claim, 100 pods a node and 50 a PodGroup kept;
  steady state keeps its 10 pods and half the nodes taken).
- The ResourceClaim controller is kube-controller-manager's, whose client e2e/controlplane gives 5000
  requests/s as scheduler_perf gives its own: at the default 20/s it, not the scheduler, set the pace.

``KOORDPY_TEST_CONTROLPLANE=DIR`` reuses a control plane (run nothing else on it meanwhile);
``KOORDPY_BENCH_WRAP`` prefixes koordpy's command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient, CustomObjectsApi

from benchmarks.bench_workloads import (
    PODGROUPS,
    constraint_violations,
    empty_custom,
    empty_podgroups,
    listed,
    live,
    log_errors,
    parser,
    picked,
)
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
    empty,
    kwok_node,
    limited,
    list_names,
    quiet,
    run_and_report,
    say,
    wait_for,
)
from koordpy.controller.main import api_client
from koordpy.controller.writer import Gone
from tests.integration.checker import Obj, labels_of, name_of, namespace_of
from tests.integration.dra_checker import dra_backed, dra_violations, extended_classes

MEASURED_NS, INIT_NS = "bench-dra-0", "bench-dra-1"
NAMESPACES = (MEASURED_NS, INIT_NS)
PREFIX = "dra-node-"
HOST = "kubernetes.io/hostname"
DRIVER = "test-driver.cdi.k8s.io"
CLASS = "test-class"
TEMPLATE = "test-claim-template"
OURS = {"bench-dra": "true"}  # on the cluster-scoped objects (slices, classes), to find them again
RESOURCE = ("resource.k8s.io", "v1")
PAUSE = "registry.k8s.io/pause:3.10.1"
SHARE = 5  # SchedulingWithResourceClaim: pods per claim
BACKLOG = 10  # steady state: pods in flight


# -- the objects (upstream's templates, rewritten) ------------------------------------------------

def node_body(i: int) -> Obj:
    return kwok_node(f"{PREFIX}{i}", {"node-with-dra": "true"})


def _slice(name: str, pool: str, count: int, spec: Obj) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name, "labels": dict(OURS)},
            "spec": {"pool": {"name": pool, "generation": 1, "resourceSliceCount": count}, "driver": DRIVER, **spec}}


def basic_slice(i: int, devices: int = 10, pci_roots: int = 2) -> Obj:
    """``resourceslice-basic-devices``: node ``i``'s ``devices`` GPUs, PCI roots cycling."""
    def device(d: int) -> Obj:
        root = d % pci_roots
        return {"name": f"basic-device-{d}", "attributes": {
            "driver": {"string": "xe"}, "driverVersion": {"version": "1.2.3"},
            "resource.k8s.io/pciRoot": {"string": str(root)}, "family": {"string": "Arc Pro B-Series"},
            "health": {"string": "Healthy"}, "model": {"string": "B60"},
            "pciAddress": {"string": f"0000:0{d}:00.0"}, "pciId": {"string": "0xe211"},
            "pciRoot": {"string": f"0{root}"}, "resource.kubernetes.io/pciBusID": {"string": f"0000:0{d}:00.0"},
            "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{root}"}, "sriov": {"bool": True},
            "type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}}}

    return _slice(f"resourceslice-{i}", f"resourceslice-{i}", 1,
                  {"nodeName": f"{PREFIX}{i}", "devices": [device(d) for d in range(devices)]})


def podgroup_slice(i: int) -> Obj:
    """``resourceslice-podgroup``: one network-attached device, usable on every DRA node."""
    return _slice(f"resourceslice-podgroup-{i}", f"resourceslice-{i}", 1, {
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node-with-dra", "operator": "In", "values": ["true"]}]}]},
        "devices": [{"name": "device"}]})


BACKTRACKING_DEVICES = 8


def counter_slice(i: int) -> Obj:
    """``resourceslice-partitionable-backtracking-countersets``."""
    return _slice(f"resourceslice-countersets-{i}", f"resourceslice-{i}", 2, {
        "nodeName": f"{PREFIX}{i}", "sharedCounters": [
            {"name": "counter-set-for-cpu",
             "counters": {f"cpu{k}": {"value": "1"} for k in range(1, BACKTRACKING_DEVICES + 1)}},
            {"name": "counter-set-for-mem", "counters": {"mem": {"value": "70Gi"}}}]})


def partitioned_slice(i: int) -> Obj:
    """``resourceslice-partitionable-backtracking-devices``: device 1 takes 20Gi, the others 10Gi."""
    return _slice(f"resourceslice-devices-{i}", f"resourceslice-{i}", 2, {
        "nodeName": f"{PREFIX}{i}", "devices": [
            {"name": f"device-{k}", "consumesCounters": [
                {"counterSet": "counter-set-for-cpu", "counters": {f"cpu{k}": {"value": "1"}}},
                {"counterSet": "counter-set-for-mem", "counters": {"mem": {"value": "20Gi" if k == 1 else "10Gi"}}}]}
            for k in range(1, BACKTRACKING_DEVICES + 1)]})


def device_class(name: str = CLASS, extended: str | None = None) -> Obj:
    spec: Obj = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "labels": dict(OURS)}, "spec": spec}


def _devices(count: int) -> Obj:
    exactly: Obj = {"deviceClassName": CLASS}
    if count != 1:
        exactly["count"] = count
    return {"devices": {"requests": [{"name": "req-0", "exactly": exactly}]}}


def claim(name: str, count: int = 1) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": _devices(count)}


def claim_template(count: int = 1) -> Obj:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": TEMPLATE},
            "spec": {"spec": _devices(count)}}


def allocation(node: int, devices: list[str]) -> Obj:
    """What the allocator writes for devices of node ``node``'s pool: the results and a node
    selector on the node's name."""
    return {"devices": {"results": [{"request": "req-0", "driver": DRIVER, "pool": f"resourceslice-{node}",
                                     "device": d} for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [f"{PREFIX}{node}"]}]}]}}


def pod(name: str, *, template: bool = False, claim_name: str | None = None, group: str | None = None,
        extended: str | None = None) -> Obj:
    """A pause pod with the claim ``resource`` (from the template or naming a claim), or asking one
    of an extended resource."""
    c: Obj = {"name": "pause", "image": PAUSE}
    spec: Obj = {"containers": [c]}
    if template or claim_name:
        c["resources"] = {"claims": [{"name": "resource"}]}
        spec["resourceClaims"] = [{"name": "resource", **({"resourceClaimTemplateName": TEMPLATE} if template
                                                          else {"resourceClaimName": claim_name})}]
    if extended:
        c["resources"] = {"requests": {extended: "1"}, "limits": {extended: "1"}}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {}}, "spec": spec}


def podgroup(name: str) -> Obj:
    """``podgroup-with-claim-template``: a basic PodGroup with the claim ``resource`` from the template."""
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
            "spec": {"resourceClaims": [{"name": "resource", "resourceClaimTemplateName": TEMPLATE}],
                     "schedulingPolicy": {"basic": {}}}}


@dataclass(frozen=True)
class Workload:
    name: str  # upstream's <test case>/<workload>
    short: str  # in pod names and round labels
    kind: str  # template, claim, podgroup, extended, backtracking
    nodes: int
    init: int  # claims allocated before (template, backtracking) or init pods (claim, extended)
    measured: int  # pods (steady state: 0, pods are made while the window lasts)
    groups: int = 0  # PodGroups (podgroup); classes (extended)
    steady: bool = False
    gate: str = ""  # a feature gate the control plane must have on


WORKLOADS = (
    Workload("SchedulingWithResourceClaimTemplate/5000pods_500nodes", "rct", "template", 500, 2500, 2500),
    Workload("SchedulingWithResourceClaim/5000pods_500nodes", "rc", "claim", 500, 2500, 2500),
    Workload("SharedPodGroupResourceClaimTemplate/100podgroups_5000pods", "pgt", "podgroup", 50, 0, 5000,
             groups=100, gate="DRAWorkloadResourceClaims"),
    Workload("ExtendedResource/Explicit_25classes_5000pods_500nodes", "er", "extended", 500, 2500, 2500,
             groups=25),
    Workload("PartitionableBacktracking/half_500nodes", "pbt", "backtracking", 500, 250, 0, steady=True),
)


def select(names: set[str] | None) -> list[Workload]:
    """The workloads ``names`` picks: a full name, its test case or its short name."""
    return picked(WORKLOADS, names)


@dataclass
class Plan:
    """The objects of one workload: ``slices`` and ``classes`` (the workload's, for both rounds) and
    one round's: ``templates``/``claims``/``groups`` by namespace, ``allocations`` (claim name in
    INIT_NS -> the allocation written after its creation), ``init_pods`` (INIT_NS, scheduled before
    the measure) and the measured pods, ``measured`` of them made by ``make(i)``."""

    nodes: int
    slices: list[Obj] = field(default_factory=list)
    classes: list[Obj] = field(default_factory=list)
    templates: dict[str, list[Obj]] = field(default_factory=dict)
    claims: dict[str, list[Obj]] = field(default_factory=dict)
    allocations: dict[str, Obj] = field(default_factory=dict)
    groups: dict[str, list[Obj]] = field(default_factory=dict)
    init_pods: list[Obj] = field(default_factory=list)
    measured: int = 0
    make: Callable[[int], Obj] = lambda i: {}
    steady: bool = False

    def pods(self) -> list[Obj]:
        return [self.make(i) for i in range(self.measured)]


def plan(w: Workload, scale: float, scheduler: str, round_: str) -> Plan:
    """The objects of ``w`` at ``scale`` for one round: every pod names ``scheduler``; the measured
    pods are labelled ``bench-round=<round_>``, the init pods ``bench-round=<round_>-init``."""
    nodes = max(1, round(w.nodes * scale))
    p = Plan(nodes, steady=w.steady)

    def mark(body: Obj, r: str) -> Obj:
        body["metadata"]["labels"]["bench-round"] = r
        body["spec"]["schedulerName"] = scheduler
        return body

    init = f"{round_}-init"
    if w.kind == "template":
        per_node = w.init // w.nodes  # 5 of a node's 10 devices taken
        p.slices = [basic_slice(i) for i in range(nodes)]
        p.classes = [device_class()]
        p.claims[INIT_NS] = [claim(f"test-claim-{i}") for i in range(per_node * nodes)]
        p.allocations = {f"test-claim-{i}": allocation(i % nodes, [f"basic-device-{i // nodes}"])
                         for i in range(per_node * nodes)}
        p.templates[MEASURED_NS] = [claim_template()]
        p.measured = w.measured // w.nodes * nodes
        p.make = lambda i: mark(pod(f"{round_}-{i}", template=True), round_)
    elif w.kind == "claim":
        per_node = w.init // w.nodes // SHARE  # 1 of a node's 2 devices taken by the init claims
        claims = per_node * nodes
        p.slices = [basic_slice(i, devices=2) for i in range(nodes)]
        p.classes = [device_class()]
        p.claims[INIT_NS] = [claim(f"test-claim-{i}") for i in range(claims)]
        p.init_pods = [mark(pod(f"{init}-{i}", claim_name=f"test-claim-{i // SHARE}"), init)
                       for i in range(claims * SHARE)]
        p.claims[MEASURED_NS] = [claim(f"test-claim-{i}") for i in range(claims)]
        p.measured = claims * SHARE
        p.make = lambda i: mark(pod(f"{round_}-{i}", claim_name=f"test-claim-{i // SHARE}"), round_)
    elif w.kind == "podgroup":
        groups = max(1, round(w.groups * scale))
        p.slices = [podgroup_slice(g) for g in range(groups)]
        p.classes = [device_class()]
        p.templates = {INIT_NS: [claim_template()], MEASURED_NS: [claim_template()]}
        p.groups[MEASURED_NS] = [podgroup(f"test-dra-{g}") for g in range(groups)]
        p.measured = w.measured // w.nodes * nodes  # 100 pods a node
        p.make = lambda i: mark(pod(f"{round_}-{i}", template=True, group=f"test-dra-{i % groups}"), round_)
    elif w.kind == "extended":
        p.slices = [basic_slice(i) for i in range(nodes)]
        p.classes = [device_class(f"{CLASS}-{k}", f"example.com/gpu-{k}") for k in range(w.groups)]
        p.init_pods = [mark(pod(f"{init}-{i}", extended=f"example.com/gpu-{i % w.groups}"), init)
                       for i in range(w.init // w.nodes * nodes)]
        p.measured = w.measured // w.nodes * nodes
        p.make = lambda i: mark(pod(f"{round_}-{i}", extended=f"example.com/gpu-{i % w.groups}"), round_)
    elif w.kind == "backtracking":
        p.slices = [s for i in range(nodes) for s in (counter_slice(i), partitioned_slice(i))]
        p.classes = [device_class()]
        taken = nodes // 2  # half the nodes, one claim of 7 devices a node
        p.claims[INIT_NS] = [claim(f"test-claim-{i}", 7) for i in range(taken)]
        p.allocations = {f"test-claim-{i}": allocation(2 * i, [f"device-{k}" for k in range(2, 9)])
                         for i in range(taken)}
        p.templates[MEASURED_NS] = [claim_template(7)]
        p.measured = BACKLOG
        p.make = lambda i: mark(pod(f"{round_}-{i}", template=True), round_)
    else:
        raise ValueError(f"unknown workload kind {w.kind}")
    return p


# -- the final state ------------------------------------------------------------------------------

def without_dra_resources(pods: list[Obj], nodes: list[Obj], classes: list[Obj]) -> list[Obj]:
    """The pods with their DRA-backed extended resource requests left out (for the node fit check:
    the node does not publish them, the pod's special claim holds them)."""
    served = extended_classes(classes)
    if not served:
        return pods
    node_by = {name_of(n): n for n in nodes}
    out = []
    for p in pods:
        backed = dra_backed(p, node_by.get((p.get("spec") or {}).get("nodeName") or ""), served)
        if not backed:
            out.append(p)
            continue
        q = {**p, "spec": {**p["spec"], "containers": []}}
        for c in p["spec"].get("containers") or []:
            res = dict(c.get("resources") or {})
            for key in ("requests", "limits"):
                res[key] = {r: v for r, v in (res.get(key) or {}).items() if (c["name"], r) not in backed}
            q["spec"]["containers"].append({**c, "resources": res})
        out.append(q)
    return out


def state_violations(nodes: list[Obj], pods: list[Obj], claims: list[Obj], slices: list[Obj],
                     classes: list[Obj], groups: list[Obj], namespaces: dict[str, dict[str, str]]) -> list[str]:
    """Every rule this benchmark holds the final state to: the DRA checker's, then bench_workloads'
    (fit, ports, PodGroups) on the pods less their DRA-backed extended resources."""
    return (dra_violations(nodes, pods, claims, slices, classes, groups)
            + constraint_violations(nodes, without_dra_resources(pods, nodes, classes), groups, namespaces))


# -- the run --------------------------------------------------------------------------------------

class DraBench(LiveBench):
    def __init__(self, api: ApiClient, args: argparse.Namespace, env: dict[str, str], state: Path) -> None:
        super().__init__(api, env, state, "bench-dra", PREFIX, args.deadline, args.stall)
        self.args = args
        self.custom = CustomObjectsApi(api)

    # cluster-scoped objects of a workload (slices, classes)
    async def ours(self, plural: str) -> list[str]:
        return await list_names(lambda: self.custom.list_cluster_custom_object(
            *RESOURCE, plural, label_selector="bench-dra=true", _preload_content=False,
            _request_timeout=LIST_SECONDS))

    async def drop_cluster_objects(self) -> None:
        for plural in ("resourceslices", "deviceclasses"):
            await empty(plural, lambda plural=plural: self.ours(plural),  # type: ignore[misc]
                        lambda n, plural=plural: self.custom.delete_cluster_custom_object(  # type: ignore[misc]
                            *RESOURCE, plural, n, _preload_content=False, _request_timeout=CALL_SECONDS), 300.0)

    async def cluster_objects(self, p: Plan) -> None:
        t0 = time.perf_counter()
        await self.drop_cluster_objects()
        for plural, bodies in (("deviceclasses", p.classes), ("resourceslices", p.slices)):
            await create(plural, bodies, lambda b, plural=plural: self.custom.create_cluster_custom_object(  # type: ignore[misc]
                *RESOURCE, plural, b, _preload_content=False, _request_timeout=CALL_SECONDS))
        say(f"  {len(p.classes)} DeviceClasses and {len(p.slices):,} ResourceSlices created in "
            f"{time.perf_counter() - t0:.1f} s")

    async def clean_all(self) -> None:
        """Pods first (their claims' reservations go with them), then PodGroups (a PodGroup's claim
        stays reserved for it while it exists), claims, templates."""
        for ns in NAMESPACES:
            await self.clean(ns)
        for ns in NAMESPACES:
            await empty_podgroups(self.custom, ns, self.deadline)
            await empty_custom(self.custom, (*RESOURCE, "resourceclaims"), ns, self.deadline)
            await empty_custom(self.custom, (*RESOURCE, "resourceclaimtemplates"), ns, self.deadline)

    async def start(self, who: str) -> Child:
        if who == "koordpy":
            return await self.start_koordpy()
        probe = pod("probe")
        probe["metadata"]["labels"]["bench-round"] = "probe"
        return await self.start_kube_scheduler(MEASURED_NS, probe)

    async def round_objects(self, p: Plan) -> None:
        """Templates, claims (and the allocations of the init claims), PodGroups."""
        for ns, bodies in p.templates.items():
            await create(f"templates in {ns}", bodies, lambda b, ns=ns: self.custom.create_namespaced_custom_object(  # type: ignore[misc]
                *RESOURCE, ns, "resourceclaimtemplates", b, _preload_content=False, _request_timeout=CALL_SECONDS))
        for ns, bodies in p.claims.items():
            await create(f"claims in {ns}", bodies, lambda b, ns=ns: self.custom.create_namespaced_custom_object(  # type: ignore[misc]
                *RESOURCE, ns, "resourceclaims", b, _preload_content=False, _request_timeout=CALL_SECONDS))
        failed: list[str] = []

        async def allocate(name: str, body: Obj) -> None:
            try:
                await call(f"allocate {name}", lambda: self.custom.patch_namespaced_custom_object_status(
                    *RESOURCE, INIT_NS, "resourceclaims", name, {"status": {"allocation": body}},
                    _content_type="application/merge-patch+json", _preload_content=False,
                    _request_timeout=CALL_SECONDS))
            except Exception as exc:
                failed.append(f"{name}: {exc!r}"[:300])

        await limited(allocate(n, b) for n, b in p.allocations.items())
        if failed:
            raise BenchError(f"{len(failed):,} of {len(p.allocations):,} allocations not written; first: "
                             f"{'; '.join(failed[:3])}")
        for ns, bodies in p.groups.items():
            await create(f"PodGroups in {ns}", bodies, lambda b, ns=ns: self.custom.create_namespaced_custom_object(  # type: ignore[misc]
                *PODGROUPS[:2], ns, PODGROUPS[2], b, _preload_content=False, _request_timeout=CALL_SECONDS))

    async def init_pods(self, p: Plan, round_: str, c: Child) -> None:
        """The init pods, created and waited for until bound (scheduled by the scheduler under test)."""
        if not p.init_pods:
            return
        t0 = time.perf_counter()
        watch = Pods(self.api, f"{round_}-init", namespace=INIT_NS)
        await watch.start()
        try:
            created = await create("init pods", p.init_pods, lambda b: self.core.create_namespaced_pod(
                INIT_NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))
            await wait_for(f"{round_}: init pods bound", lambda: len(watch.bound_at), len(p.init_pods),
                           lambda: [n for n in created if n not in watch.bound_at], self.args.deadline,
                           self.args.stall, watch, [c])
        finally:
            await watch.stop()
        say(f"  {len(p.init_pods):,} init pods bound in {time.perf_counter() - t0:.1f} s")

    async def burst(self, p: Plan, pods: Pods, c: Child, what: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        bodies = p.pods()
        cpu0, t0 = cpu_seconds(c.proc.pid), time.perf_counter()
        created = await create("measured pods", bodies, lambda b: self.core.create_namespaced_pod(
            MEASURED_NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))
        out["create_s"] = time.perf_counter() - t0
        try:
            await wait_for(f"{what}: pods bound", lambda: len(pods.bound_at), len(bodies),
                           lambda: [n for n in created if n not in pods.bound_at], self.args.deadline,
                           self.args.stall, pods, [c])
        except BenchError as exc:  # the round is reported with what it did; the next one goes on
            out["error"] = str(exc)
            say(f"  {what}: {exc}")
        out["cpu_s_at_last_bind"] = cpu_seconds(c.proc.pid) - cpu0
        bound = dict(pods.bound_at)
        cpu_end, out["quiet_after"] = await quiet(c, "after the last bind")
        out.update({"bound": len(bound), "cpu_s": cpu_end - cpu0,
                    "total_s": (max(bound.values()) - t0) if bound else None})
        return out

    async def steady(self, p: Plan, pods: Pods, c: Child, what: str) -> dict[str, Any]:
        """Upstream's steady state: BACKLOG pods, each one seen bound deleted and replaced, for
        ``--duration`` seconds; CPU over exactly that window, per pod bound in it."""
        duration, made, handled = self.args.duration, 0, set()
        tasks: list[asyncio.Task[None]] = []
        errors: list[str] = []

        async def make(n: int) -> None:
            nonlocal made
            bodies = [p.make(made + k) for k in range(n)]
            made += n
            await create("steady pods", bodies, lambda b: self.core.create_namespaced_pod(
                MEASURED_NS, b, _preload_content=False, _request_timeout=CALL_SECONDS))

        async def replace(name: str) -> None:
            try:
                with contextlib.suppress(Gone):
                    await call(f"delete {name}", lambda: self.core.delete_namespaced_pod(
                        name, MEASURED_NS, grace_period_seconds=0, propagation_policy="Background",
                        _preload_content=False, _request_timeout=CALL_SECONDS))
                await make(1)
            except Exception as exc:
                errors.append(f"{name}: {exc!r}"[:300])

        cpu0, t0 = cpu_seconds(c.proc.pid), time.perf_counter()
        await make(BACKLOG)
        last = t0
        while (now := time.perf_counter()) < t0 + duration:
            c.check()
            fresh = [n for n, at in pods.bound_at.items() if n not in handled]
            for n in fresh:
                handled.add(n)
                tasks.append(asyncio.ensure_future(replace(n)))
            if fresh:
                last = now
            if errors:
                raise BenchError(f"{what}: steady state broke: {'; '.join(errors[:3])}")
            if now - last > self.args.stall:
                pending = [n for n in pods.state if n not in pods.bound_at]
                raise BenchError(f"{what}: no pod bound for {self.args.stall:.0f} s in steady state; "
                                 f"{await pods.describe(pending)}")
            await asyncio.sleep(0.01)
        cpu = cpu_seconds(c.proc.pid) - cpu0
        end = t0 + duration
        bound = sum(1 for at in pods.bound_at.values() if at <= end)
        await asyncio.gather(*tasks)
        _, settled = await quiet(c, "after the steady state")
        out: dict[str, Any] = {"bound": bound, "cpu_s": cpu, "cpu_s_at_last_bind": cpu, "total_s": duration,
                               "create_s": 0.0, "quiet_after": settled, "created": made}
        if not bound:  # upstream fails such a run too: the window measured nothing
            pending = [n for n in pods.state if n not in pods.bound_at]
            out["error"] = f"{what}: no pod bound in the {duration:.0f} s window; {await pods.describe(pending)}"
            say(f"  {out['error']}")
        return out

    async def measure(self, w: Workload, who: str) -> dict[str, Any]:
        round_ = f"{w.short}-{'kp' if who == 'koordpy' else 'ks'}"
        p = plan(w, self.args.scale, "koordpy" if who == "koordpy" else "default-scheduler", round_)
        await self.clean_all()
        c = await self.start(who)
        log_start = c.log.stat().st_size
        what = f"{w.name}, {who}"
        idle = False
        try:
            await quiet(c, "after its start")
            t_init = time.perf_counter()
            await self.round_objects(p)
            try:
                await self.init_pods(p, round_, c)
                _, idle = await quiet(c, "after the init objects")
                say(f"  round objects ({len(p.allocations):,} allocations written, {len(p.init_pods):,} init pods) "
                    f"ready in {time.perf_counter() - t_init:.1f} s")
                pods = Pods(self.api, round_, namespace=MEASURED_NS)
                await pods.start()
                try:
                    out = await (self.steady if p.steady else self.burst)(p, pods, c, what)
                finally:
                    await pods.stop()
            except BenchError as exc:  # the round is reported with what stopped it; the next one goes on
                say(f"  {what}: {exc}")
                out = {"error": str(exc), "bound": 0, "cpu_s": 0.0, "cpu_s_at_last_bind": 0.0, "total_s": None,
                       "create_s": 0.0}
            mem = c.memory() if c.proc.poll() is None else {"VmRSS": 0.0, "VmHWM": 0.0}  # a scheduler that died
        finally:
            self.stop(c)
        n = out["bound"]
        out.update({"pods": p.measured if not p.steady else out.get("created", 0), "nodes": p.nodes,
                    "quiet_before": idle, "rss_mib": mem["VmRSS"], "hwm_mib": mem["VmHWM"],
                    "pods_per_s": n / out["total_s"] if n and out["total_s"] else 0.0,
                    "cpu_s_per_1000": out["cpu_s"] / n * 1000 if n else None,
                    "cpu_s_per_1000_at_last_bind": out["cpu_s_at_last_bind"] / n * 1000 if n else None,
                    "log_errors": log_errors(c.log, log_start)})
        say(f"  {what}: {n:,} pods bound" + ("" if p.steady else f" of {p.measured:,}")
            + f", {out['pods_per_s']:.0f} pods/s; CPU {out['cpu_s']:.1f} s"
            + (f" = {out['cpu_s_per_1000']:.2f} s per 1,000 pods" if n else "")
            + f"; RSS {mem['VmRSS']:.0f} MiB (peak {mem['VmHWM']:.0f})")
        for line in out["log_errors"][:5]:
            say(f"    log: {line}")
        t1 = time.perf_counter()
        out.update(await self.check(p))
        say(f"  {who}: checked in {time.perf_counter() - t1:.1f} s ({out['claims_allocated']:,} claims allocated): "
            f"{out['violations']} violations" + "".join(f"\n    {line}" for line in out["violations_first"]))
        await self.clean_all()
        return out

    async def check(self, p: Plan) -> dict[str, Any]:
        nodes, pods, groups, labels = await listed(self.core, self.custom, NAMESPACES)
        # One LIST of every claim: one snapshot, so a device freed and taken again is not seen twice.
        claims = [c for c in (await call("LIST claims", lambda: self.custom.list_custom_object_for_all_namespaces(
            *RESOURCE, "resourceclaims", _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
            if namespace_of(c) in NAMESPACES]
        slices = (await call("LIST slices", lambda: self.custom.list_cluster_custom_object(
            *RESOURCE, "resourceslices", _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
        classes = (await call("LIST classes", lambda: self.custom.list_cluster_custom_object(
            *RESOURCE, "deviceclasses", _preload_content=False, _request_timeout=LIST_SECONDS))).get("items") or []
        problems = state_violations(nodes, pods, claims, slices, classes, groups, labels)
        return {"violations": len(problems), "violations_first": problems[:10],
                "claims_allocated": sum(1 for c in claims if (c.get("status") or {}).get("allocation")),
                "bound_live": sum(1 for q in pods if (q.get("spec") or {}).get("nodeName") and live(q))}


async def bench(args: argparse.Namespace, state: Path, fig: dict[str, Any]) -> None:
    t0 = time.perf_counter()
    env = control_plane(state)
    api = await api_client(env["KUBECONFIG"])
    b = DraBench(api, args, env, state)
    fig.update({"scale": args.scale, "duration": args.duration, "workloads": {}})
    who = ([] if args.skip_koordpy else ["koordpy"]) + ([] if args.skip_kube_scheduler else ["kube-scheduler"])
    try:
        await b.namespaces(NAMESPACES)
        await b.clean_all()
        for w in select(args.workloads):
            p = plan(w, args.scale, "", "x")
            f: dict[str, Any] = {"nodes": p.nodes, "pods": p.measured, "init_pods": len(p.init_pods),
                                 "init_allocations": len(p.allocations), "steady": p.steady}
            fig["workloads"][w.name] = f
            if w.gate and f"{w.gate}=true" not in env.get("FEATURE_GATES", ""):
                f["skipped"] = f"the control plane's FEATURE_GATES lack {w.gate}=true"
                say(f"{w.name}: skipped: {f['skipped']}")
                continue
            say(f"{w.name}: " + (f"steady state of {BACKLOG} pods for {args.duration:.0f} s" if p.steady
                                 else f"{p.measured:,} pods") + f" on {p.nodes:,} nodes, {len(p.slices):,} slices, "
                f"{len(p.allocations):,} claims allocated before, {len(p.init_pods):,} init pods")
            await b.nodes([node_body(i) for i in range(p.nodes)],
                          same=lambda n: labels_of(n) == labels_of(node_body(int(name_of(n)[len(PREFIX):]))))
            await b.cluster_objects(p)
            for x in who:
                f[x] = await b.measure(w, x)
        await b.drop_cluster_objects()
        await b.drop_nodes()
        say(f"done in {time.perf_counter() - t0:.0f} s; retried calls {dict(RETRIES) or 'none'}")
    finally:
        b.stop_all()
        await api.close()


def table(fig: dict[str, Any]) -> str:
    rows = ["| workload | pods/s (k / ks) | CPU s per 1,000 pods (k / ks, ratio; goal <= 0.5x) | RSS MiB (k / ks) "
            "| allocations checked (k / ks) |", "| --- | --- | --- | --- | --- |"]
    for name, f in fig["workloads"].items():
        if f.get("skipped"):
            rows.append(f"| {name} | skipped: {f['skipped']} | | | |")
            continue
        k, ks = f.get("koordpy") or {}, f.get("kube-scheduler") or {}

        def num(r: dict[str, Any], key: str, fmt: str) -> str:
            return "-" if r.get(key) is None else format(r[key], fmt)

        def held(r: dict[str, Any]) -> str:
            if not r:
                return "-"
            return (("yes" if r["violations"] == 0 else f"**no ({r['violations']})**")
                    + f", {r['bound']:,} bound" + (", error" if r.get("error") else ""))

        ratio = ""
        if k.get("cpu_s_per_1000") and ks.get("cpu_s_per_1000"):
            ratio = f", **{k['cpu_s_per_1000'] / ks['cpu_s_per_1000']:.2f}x**"
        size = f"steady, {fig.get('duration', 0):.0f} s" if f.get("steady") else f"{f['pods']:,} pods"
        rows.append(f"| {name} ({size}, {f['nodes']:,} nodes) | {num(k, 'pods_per_s', '.0f')} / "
                    f"{num(ks, 'pods_per_s', '.0f')} | {num(k, 'cpu_s_per_1000', '.2f')} / "
                    f"{num(ks, 'cpu_s_per_1000', '.2f')}{ratio} | {num(k, 'rss_mib', '.0f')} / "
                    f"{num(ks, 'rss_mib', '.0f')} | {held(k)} / {held(ks)} |")
    return "\n".join(rows)


def main() -> None:
    ap = parser(__doc__, (w.short for w in WORKLOADS), "node, claim and pod counts")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of a steady-state workload (upstream: 10)")
    args = ap.parse_args()
    if args.workloads and not select(args.workloads):
        ap.error(f"no workload matches {sorted(args.workloads)}")
    run_and_report("bench_dra", lambda state, fig: bench(args, state, fig), args.json, ROOT, table)


if __name__ == "__main__":
    main()
