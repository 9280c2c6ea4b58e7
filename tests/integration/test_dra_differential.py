"""Differential test of DRA on the real control plane: koordpy's allocations held against the API's
rules and against kube-scheduler v1.37.2's own allocator.

A seeded random world (``tests/devices/generate.py``'s, the one the allocator's differential test
draws from) goes onto KWOK nodes: DeviceClasses with CEL selectors on attributes and capacity,
ResourceSlices of GPUs of three models (taints, partitionable devices with shared counters,
consumable capacity, pools of several slices and generations, an incomplete or invalid pool), NICs
of a second driver, network-attached pools (``allNodes``, a ``nodeSelector`` on a rack, per-device
node selection) and DeviceTaintRules. Lone pods use ResourceClaims made from templates, claims of
their own and claims shared by several pods, with ExactCount and All requests, request selectors
(some reading an attribute not every device has), ``firstAvailable``, ``matchAttribute`` /
``distinctAttribute``, tolerations, admin access and capacity requests; besides, cpu requests on
nodes of 8 or 16 cpus, node taints and a rack node selector, so that other filters rule nodes out
too. ``koordpy run`` schedules them until it is quiet; then, on the state the API server holds,

(a) every bound pod's claims are allocated, reserved for it, and their allocations valid on its
    node by ``tests/devices/checker.py`` (written from the API's rules: devices of complete pools
    usable there, selectors, counts, All, taints, constraints, counters, capacity), with every other
    allocated claim in use; no device is held whole by two claims; every allocated claim is reserved
    for, and only for, bound pods that name it;
(b) for every pod left pending and every node that passes the other filters (``tests/integration/
    checker.py``: resources against the bound pods, node selector, taints), kube-scheduler's own
    allocator (draref: ``structured.NewAllocator`` with v1.37.2's default features, as its DRA
    plugin runs it) on the final state, the claims in use as the API server has them, finds no
    allocation of the pod's claims there, or errs on one of those nodes (a CEL runtime error, All
    over a pool being updated), which fails the pod's whole cycle in kube-scheduler;
(c) kube-scheduler (the control plane's own, with its gates) schedules the same pods and claims on
    a fresh copy; both bound counts are printed (information, not the pass rule), and (a) and (b)
    are run on its result too, as a check of the checks.

Most of the generator's claims fit nowhere (it draws them to probe verdicts): the workload takes
85% of its claims from those kube-scheduler's allocator places somewhere in the empty cluster, so
devices run short by contention. The last tests feed the checks small states written by hand, one
right and some wrong, so that a check that could never fail is caught.

Why quiet means done: as in test_differential.py, 15 s with no bind and a PodScheduled condition on
every pending pod. No device here has binding conditions (nothing would ever meet them), so no
bind is held in PreBind when the cluster is quiet.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api.dra import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceSlice
from koordpy.api.objects import Node
from tests.devices import draref
from tests.devices.checker import violations
from tests.devices.generate import _node, _World
from tests.integration.checker import State, key_of
from tests.integration.kube import ControlPlane, Kube, Scheduler, fake, start_kube_scheduler, wait_for
from tests.integration.test_differential import scheduled_condition, settle_pods

# KOORDPY_DRA_LIVE_SEED / KOORDPY_DRA_LIVE_PODS draw another world (CI runs the default).
SEED = int(os.environ.get("KOORDPY_DRA_LIVE_SEED", "33"))
PODS = int(os.environ.get("KOORDPY_DRA_LIVE_PODS", "120"))
NODES = 10
NS = "dra-diff"
# Admin access is allowed only in a namespace that says so.
NS_LABELS = {"resource.kubernetes.io/admin-access": "true"}
QUIET = 15.0  # seconds without a bind: longer than the longest backoff (10 s)
SETTLE_DEADLINE = 150.0

# What the world may hold (generate.FEATURES). Left out: binding conditions (no driver here would
# ever meet them), large pools (a 10 s search each, per node), fractional capacities (without
# DRAFractionalCapacityRange, off in v1.37.2, kube-apiserver refuses validValues 250m, 500m and 1 as
# duplicates: each counts as 1), and the claims in use and pre-allocated claims of a single case
# (here the pods' own claims are in use).
FEATURES = frozenset({"drivers", "selectors", "counts", "all", "taints", "first_available", "constraints",
                      "counters", "network", "pools", "admin", "consumable", "missing_class", "missing_keys",
                      "invalid_pools", "taint_rules", "taint_rule_no_selector"})

Obj = dict[str, Any]


# -- the workload -------------------------------------------------------------------------------

@dataclass
class Workload:
    nodes: list[Obj]
    cluster_objects: list[Obj]  # DeviceClasses, ResourceSlices, DeviceTaintRules
    templates: list[Obj]
    claims: list[Obj]  # standalone ResourceClaims (a pod's own, or shared)
    pods: list[Obj]
    shared: dict[str, list[str]] = field(default_factory=dict)  # shared claim -> the pods naming it


# The generator's claims are drawn to probe verdicts, and most of them fit nowhere (taints not
# tolerated, narrow selectors, All over a pool being updated): the workload takes FITTING of its
# claims from those kube-scheduler's allocator (draref) places on some node of the empty cluster,
# and the rest from the others and from claims no node can take (a class that does not exist, a
# selector reading an attribute most devices lack: a CEL runtime error fails the pod's whole cycle
# in kube-scheduler). So devices run short through contention, not by construction.
FITTING = 0.85
CANDIDATES = 120
MILD = FEATURES - {"missing_class", "missing_keys"}


def _fits_somewhere(specs: list[Obj], nodes: list[Obj], cluster: list[Obj]) -> list[bool]:
    """Whether draref allocates each claim spec, alone, on some node of the empty cluster, and errs on
    none (an error on one node fails the pod's cycle)."""
    of = {kind: [o for o in cluster if o["kind"] == kind]
          for kind in ("DeviceClass", "ResourceSlice", "DeviceTaintRule")}
    cases = [{"name": f"spec-{i}", "nodes": nodes, "classes": of["DeviceClass"], "slices": of["ResourceSlice"],
              "allocated": [], "taintRules": of["DeviceTaintRule"],
              "claims": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": f"spec-{i}", "namespace": NS, "uid": f"uid-{i}"}, "spec": spec}]}
             for i, spec in enumerate(specs)]
    return [not answer.get("error") and "error" not in (verdicts := [v["verdict"] for v in answer["nodes"].values()])
            and "allocated" in verdicts
            for answer in draref.run(cases)["cases"]]


def _no_eviction(slices: list[Obj], rules: list[Obj]) -> None:
    """NoExecute taints become NoSchedule. kube-controller-manager's device taint eviction deletes a
    pod whose device has a NoExecute taint unless a toleration with effect NoExecute covers it,
    while the allocator lets a toleration without an effect (every effect) take the device: a pod
    either scheduler placed so would be evicted under the test (seen with seed 46). The allocators
    treat both effects alike, so nothing of theirs is lost."""
    for s in slices:
        for d in s["spec"].get("devices") or []:
            for t in d.get("taints") or []:
                if t["effect"] == "NoExecute":
                    t["effect"] = "NoSchedule"
    for r in rules:
        if r["spec"]["taint"]["effect"] == "NoExecute":
            r["spec"]["taint"]["effect"] = "NoSchedule"


def workload(seed: int = SEED, count: int = PODS) -> Workload:
    rng = random.Random(seed)
    w = _World(rng, FEATURES, "live")
    nodes = []
    for i in range(NODES):
        name = f"node-{i}"
        n = _node(name, f"r{i % 2}")
        n["status"]["allocatable"].update(cpu=rng.choice(["8", "16"]), pods=rng.choice(["110"] * 4 + ["6"]))
        n["spec"] = {}
        if i in (3, 6):
            n["spec"]["taints"] = [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]
        nodes.append(n)
        w.nodes.append(n)
        w.add_node_pools(name)
    w.add_network_pool()
    w.make_classes()
    for i in range(2):  # more classes narrowing GPUs by their attributes
        w.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                          "metadata": {"name": f"gpu-sel-{i}"},
                          "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}},
                                                 {"cel": {"expression": w.selector()}}]}})
    # Rules on one device or one pool: a rule on a whole driver or every device would taint nearly
    # all the GPUs, and leave little to allocate.
    rules = [r for r in w.taint_rules() if "device" in r["spec"].get("deviceSelector", {"device": ""})
             or "pool" in r["spec"]["deviceSelector"]]
    _no_eviction(w.slices, rules)
    cluster = [*w.classes, *w.slices, *rules]
    mild = _World(rng, MILD, "live")
    mild.classes, mild.devices = w.classes, w.devices
    specs: list[Obj] = [mild.claim("x")["spec"] for _ in range(CANDIDATES)]
    fits = _fits_somewhere(specs, nodes, cluster)
    fitting = [s for s, ok in zip(specs, fits, strict=True) if ok]
    others = [s for s, ok in zip(specs, fits, strict=True) if not ok] + [w.claim("x")["spec"] for _ in range(20)]

    def _claim_spec() -> Obj:
        return rng.choice(fitting if rng.random() < FITTING else others)

    templates: list[Obj] = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                             "metadata": {"name": f"tmpl-{k}", "namespace": NS}, "spec": {"spec": _claim_spec()}}
                            for k in range(8)]
    shared_names = [f"shared-{k}" for k in range(6)]
    claims = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": name, "namespace": NS}, "spec": _claim_spec()} for name in shared_names]
    out = Workload(fake(nodes), cluster, templates, claims, [])
    for i in range(count):
        name = f"p{i:03d}"
        entries: list[Obj] = []
        for j in range(rng.choices([0, 1, 2], weights=[1, 6, 3])[0]):
            r = rng.random()
            if r < 0.5:
                template = rng.choice(templates)["metadata"]["name"]
                entries.append({"name": f"c{j}", "resourceClaimTemplateName": template})
            elif r < 0.8:
                own = f"{name}-own-{j}"
                out.claims.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                   "metadata": {"name": own, "namespace": NS}, "spec": _claim_spec()})
                entries.append({"name": f"c{j}", "resourceClaimName": own})
            else:
                taken = {e.get("resourceClaimName") for e in entries}
                shared = rng.choice([s for s in shared_names if s not in taken])
                out.shared.setdefault(shared, []).append(name)
                entries.append({"name": f"c{j}", "resourceClaimName": shared})
        container: Obj = {"name": "main", "image": "busybox", "resources": {
            "requests": {"cpu": rng.choice(["500m", "1", "2", "2", "4"]), "memory": "1Gi"}}}
        if entries:
            container["resources"]["claims"] = [{"name": e["name"]} for e in entries]
        spec: Obj = {"schedulerName": "koordpy", "containers": [container], "terminationGracePeriodSeconds": 0}
        if entries:
            spec["resourceClaims"] = entries
        if rng.random() < 0.3:
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
        if rng.random() < 0.15:
            spec["nodeSelector"] = {"rack": rng.choice(["r0", "r1"])}
        out.pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec})
    return out


# -- reading the cluster ------------------------------------------------------------------------

def all_pods(kube: Kube) -> dict[str, Obj]:
    return {key_of(p): p for p in kube.get("pods", namespace=NS)["items"]}


def settle(kube: Kube, who: str, expected: set[str], deadline: float = SETTLE_DEADLINE
           ) -> tuple[dict[str, Obj], float]:
    """``settle_pods`` on the pods of NS, every pod of ``expected`` (keys) there; one that is not
    is named with its events in the error."""
    def seen(pods: dict[str, Obj]) -> str:
        gone = sorted(expected - set(pods))
        said = [f"{e['involvedObject'].get('name')}: {e.get('reason')} {e.get('message')}"
                for e in kube.events(NS) if f"{NS}/{e['involvedObject'].get('name')}" in gone]
        return f"{len(pods)}/{len(expected)} pods seen (gone: {gone[:5]}, their events: {said[:10]})"

    return settle_pods(lambda: all_pods(kube), who, lambda pods: set(pods) == expected, seen, deadline, QUIET)


@dataclass
class Final:
    """What the API server holds once a scheduler is quiet."""

    nodes: list[Obj]
    pods: dict[str, Obj]
    claims: dict[str, Obj]  # "ns/name" -> claim
    classes: list[Obj]
    slices: list[Obj]
    rules: list[Obj]

    @staticmethod
    def read(kube: Kube, pods: dict[str, Obj]) -> Final:
        return Final(kube.get("nodes", namespace=None)["items"], pods,
                     {f"{NS}/{c['metadata']['name']}": c for c in kube.get("resourceclaims", namespace=NS)["items"]},
                     kube.get("deviceclasses", namespace=None)["items"],
                     kube.get("resourceslices", namespace=None)["items"],
                     kube.get("devicetaintrules", namespace=None)["items"])

    def bound(self) -> dict[str, Obj]:
        return {k: p for k, p in self.pods.items() if p["spec"].get("nodeName")}

    def pending(self) -> dict[str, Obj]:
        return {k: p for k, p in self.pods.items() if not p["spec"].get("nodeName")}

    def claims_of(self, pod: Obj) -> tuple[list[str], list[str]]:
        """The keys of the pod's claims, and what is wrong in finding them (a template's claim not
        made, a claim that does not exist)."""
        made = {s["name"]: s.get("resourceClaimName")
                for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
        keys, missing = [], []
        for entry in pod["spec"].get("resourceClaims") or []:
            name = entry.get("resourceClaimName") or made.get(entry["name"])
            if not name or f"{NS}/{name}" not in self.claims:
                source = name or f"from template {entry.get('resourceClaimTemplateName')}"
                missing.append(f"{key_of(pod)}: claim {entry['name']} ({source}) does not exist")
            else:
                keys.append(f"{NS}/{name}")
        return keys, missing

    def allocated(self) -> dict[str, Obj]:
        return {k: c for k, c in self.claims.items() if (c.get("status") or {}).get("allocation")}


# -- the checks ---------------------------------------------------------------------------------

def audit_bound(f: Final) -> list[str]:
    """(a): the bound pods' claims, every allocated claim, and no device held twice."""
    problems: list[str] = []
    nodes = {n["metadata"]["name"]: Node.from_raw(n) for n in f.nodes}
    slices = [ResourceSlice.from_raw(s) for s in f.slices]
    classes = {c.name: c for c in (DeviceClass.from_raw(x) for x in f.classes)}
    rules = [DeviceTaintRule.from_raw(r) for r in f.rules if "deviceSelector" in r["spec"]]
    parsed = {k: ResourceClaim.from_raw(c) for k, c in f.claims.items()}
    allocated = {k for k in f.allocated()}
    bound = f.bound()
    users: dict[str, set[tuple[str, str]]] = defaultdict(set)  # claim -> (pod name, uid) naming it, bound
    for key, pod in sorted(bound.items()):
        keys, missing = f.claims_of(pod)
        problems += [f"(a) bound pod {m}" for m in missing]
        node = pod["spec"]["nodeName"]
        uid = pod["metadata"]["uid"]
        ok = True
        for ck in keys:
            users[ck].add((pod["metadata"]["name"], uid))
            claim = parsed[ck]
            if claim.allocation is None:
                problems.append(f"(a) {key} bound to {node}, its claim {ck} is not allocated")
                ok = False
            if not any(c.resource == "pods" and c.name == pod["metadata"]["name"] and c.uid == uid
                       for c in claim.reserved_for):
                problems.append(f"(a) {key} bound to {node}, its claim {ck} is not reserved for it "
                                f"(reservedFor {[c.name for c in claim.reserved_for]})")
        if not ok or not keys:
            continue
        in_use = [parsed[k] for k in allocated if k not in keys]
        mine = [parsed[k] for k in keys]
        allocations = [c.allocation for c in mine if c.allocation is not None]
        bad = violations(nodes[node], slices, classes, in_use, [replace(c, allocation=None) for c in mine],
                         allocations, taint_rules=rules)
        problems += [f"(a) {key} on {node}: {b}" for b in bad]
    for ck in sorted(allocated):
        claim = parsed[ck]
        if not claim.reserved_for:
            problems.append(f"(a) {ck} is allocated but reserved for nobody")
        for c in claim.reserved_for:
            if (c.name, c.uid) not in users[ck]:
                problems.append(f"(a) {ck} is reserved for {c.resource} {c.name}, not a bound pod naming it")
    holders: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    shares: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for ck in sorted(allocated):
        allocation = parsed[ck].allocation
        assert allocation is not None
        for r in allocation.results:
            if not r.admin_access:
                (shares if r.share_id else holders)[(r.driver, r.pool, r.device)].append(ck)
    for device, held in sorted(holders.items()):
        if len(held) > 1 or shares.get(device):
            problems.append(f"(a) {'/'.join(device)} allocated twice: whole to {held}, "
                            f"in shares to {shares.get(device, [])}")
    return problems


def audit_pending(f: Final, dump: Path | None = None) -> tuple[list[str], dict[str, int]]:
    """(b): for each pending pod, the nodes the other filters leave open, and there draref's verdict on
    its claims in the final state. kube-scheduler runs DynamicResources' Filter after every other
    filter, on the nodes they let through, and an error on any of those nodes (a CEL runtime error,
    say) fails the pod's whole cycle (findNodesThatPassFilters): such a pod rightly waits. Returns the
    problems and how many pending pods wait for which reason; the case of each pod in the wrong is
    written to ``dump`` (a folder), as JSON draref and test_allocator_differential's ``parse`` read."""
    problems: list[str] = []
    state = State(f.nodes, {NS: dict(NS_LABELS)})
    for p in f.bound().values():
        state.add(p, p["spec"]["nodeName"])
    allocated = f.allocated()
    cases: list[Obj] = []
    tally: dict[str, int] = defaultdict(int)
    for key, pod in sorted(f.pending().items()):
        keys, missing = f.claims_of(pod)
        problems += [f"(b) pending pod {m}" for m in missing]
        why = state.check(pod)
        open_nodes = [n for n in f.nodes if not why[n["metadata"]["name"]]]
        if missing:
            continue
        if not open_nodes:
            tally["no node passes the other filters"] += 1
            continue
        cases.append({"name": key, "nodes": open_nodes, "classes": f.classes, "slices": f.slices,
                      "allocated": [c for k, c in allocated.items() if k not in keys],
                      "claims": [f.claims[k] for k in keys],
                      **({"taintRules": f.rules} if f.rules else {})})
    answer = draref.run(cases) if cases else {"cases": []}
    for case, result in zip(cases, answer["cases"], strict=True):
        verdicts = result.get("nodes") or {}
        if result.get("error") or any(v["verdict"] == "error" for v in verdicts.values()):
            tally["an allocator error on a node (the cycle fails)"] += 1
            continue
        fits = {n: v for n, v in sorted(verdicts.items()) if v["verdict"] == "allocated"}
        if not fits:
            tally["claims unallocatable on every node the other filters leave"] += 1
            continue
        said = (scheduled_condition(f.pods[case["name"]]) or {}).get("message", "")
        for node, verdict in fits.items():
            alloc = {k: [f"{r['pool']}/{r['device']}" for r in a["devices"]["results"]]
                     for k, a in (verdict.get("allocations") or {}).items()}
            problems.append(f"(b) {case['name']} left pending although {node} passes the other filters and "
                            f"kube-scheduler's allocator allocates its claims there: {alloc or 'no claims'}; "
                            f"it said: {said}")
        if dump is not None:
            dump.mkdir(parents=True, exist_ok=True)
            (dump / f"{case['name'].replace('/', '_')}.json").write_text(json.dumps(case, indent=1))
    return problems, dict(tally)


# -- the test -----------------------------------------------------------------------------------

def _drop_claims(kube: Kube) -> None:
    """Every claim of the namespace gone, delete-protection and all (kube-controller-manager would take
    its time to drop the finalizer)."""
    for item in kube.get("resourceclaims", namespace=NS)["items"]:
        kube.kubectl("patch", "resourceclaims", item["metadata"]["name"], "-n", NS, "--type=merge", "-p",
                     '{"metadata": {"finalizers": null}}', check=False)
    kube.kubectl("delete", "resourceclaims", "--all", "-n", NS, "--wait=false", check=False)


@pytest.fixture
def namespace(kube: Kube) -> Iterator[None]:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": NS_LABELS}})
    yield
    kube.kubectl("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", "--wait=false", check=False)
    _drop_claims(kube)
    kube.kubectl("delete", "resourceclaimtemplates", "--all", "-n", NS, "--wait=false", check=False)


def _create(kube: Kube, objects: list[Obj]) -> None:
    kube.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(objects))


def test_koordpy_allocates_claims_only_as_the_api_and_kube_schedulers_allocator_allow(
        kube: Kube, controlplane: ControlPlane, namespace: None, tmp_path: Path) -> None:
    t0 = time.monotonic()
    w = workload()
    kube.apply(w.nodes)
    _create(kube, w.cluster_objects + w.templates + w.claims)
    wait_for(lambda: len(kube.get("nodes", namespace=None)["items"]) == len(w.nodes), "the nodes")

    log = tmp_path / "koordpy.log"
    koordpy = Scheduler(controlplane, log)
    koordpy.start()
    try:
        _create(kube, w.pods)
        final, k_last = settle(kube, "koordpy", {key_of(p) for p in w.pods})
        assert koordpy.alive(), f"koordpy run exited:\n{log.read_text(errors='replace')[-4000:]}"
    finally:
        koordpy.kill()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]

    f = Final.read(kube, final)
    problems = audit_bound(f)
    roomy, tally = audit_pending(f, tmp_path / "cases")
    problems += roomy
    claims = sum(len(p["spec"].get("resourceClaims") or []) for p in w.pods)
    print(f"\nworld (seed {SEED}): {len(w.nodes)} nodes, {len(f.classes)} classes, {len(f.slices)} slices, "
          f"{len(f.rules)} taint rules, {len(w.templates)} templates, {len(w.pods)} pods naming {claims} claims "
          f"({sum(len(v) for v in w.shared.values())} through {len(w.shared)} shared claims)")
    print(f"koordpy: {len(f.bound())}/{len(w.pods)} bound, {len(f.allocated())} claims allocated, "
          f"{len(f.pending())} pending, last bind {k_last:.1f}s after the pods were created; "
          f"pending: {tally}; {len(problems)} violations")
    assert not problems, f"{len(problems)} violations (cases in {tmp_path / 'cases'}):\n" + "\n".join(problems[:40])

    # (c) kube-scheduler on a fresh copy, for the record; (a) and (b) on its result check the checks.
    ks_bound, ks_last, ks_final = run_kube_scheduler(kube, controlplane, w, tmp_path)
    ks_problems = audit_bound(ks_final) + audit_pending(ks_final)[0]
    for line in ks_problems[:10]:
        print(f"  the checks disagree with kube-scheduler: {line}")
    both = set(f.bound()) & set(ks_bound)
    print(f"kube-scheduler: {len(ks_bound)}/{len(w.pods)} bound, {len(ks_final.allocated())} claims allocated, "
          f"last bind {ks_last:.1f}s after the pods were created ({len(ks_problems)} violations by the checks); "
          f"koordpy {len(f.bound())}/{len(w.pods)}; bound by both {len(both)}, only koordpy "
          f"{len(set(f.bound()) - both)}, only kube-scheduler {len(set(ks_bound) - both)}; "
          f"test took {time.monotonic() - t0:.0f}s")


def run_kube_scheduler(kube: Kube, controlplane: ControlPlane, w: Workload, tmp_path: Path
                       ) -> tuple[dict[str, Obj], float, Final]:
    kube.kubectl("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: not all_pods(kube), "koordpy's pods deleted", timeout=60)
    _drop_claims(kube)
    wait_for(lambda: not kube.get("resourceclaims", namespace=NS)["items"], "koordpy's claims deleted", timeout=60)
    _create(kube, w.claims)
    theirs = [{**p, "spec": {**p["spec"], "schedulerName": "default-scheduler"}} for p in w.pods]
    ks = start_kube_scheduler(controlplane, tmp_path)  # with the control plane's gates
    try:
        _create(kube, theirs)
        try:
            final, last = settle(kube, "kube-scheduler", {key_of(p) for p in theirs})
        except AssertionError as exc:  # information only: judge what there is
            print(f"kube-scheduler: {exc}\n{ks.log.read_text(errors='replace')[-2000:]}")
            final, last = all_pods(kube), float("nan")
    finally:
        ks.stop()
    f = Final.read(kube, final)
    return f.bound(), last, f


# -- the checks can fail (no cluster: a final state written by hand) ----------------------------

def _tiny_claim(name: str, device: str = "", user: str = "") -> Obj:
    """A claim for one GPU; allocated ``device`` of node-a's pool when given, reserved for ``user``."""
    out: Obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}
    if device:
        out["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": device}]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}}
        out["status"]["reservedFor"] = [{"resource": "pods", "name": user, "uid": f"uid-{user}"}] if user else []
    return out


def _tiny(devices: int, *, second_pod: str, second_claim: Obj | None) -> Final:
    """node-a (4 cpus) with ``devices`` GPUs, node-b (4 cpus) with none; p1 bound to node-a with
    claim c1 holding gpu-0; p2 (1 cpu, claim c2: ``second_claim``, or one not allocated) bound to
    ``second_pod`` ("" pending)."""
    def node(name: str) -> Obj:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name}}, "spec": {}, "status": {"allocatable": {
                "cpu": "4", "memory": "8Gi", "pods": "110"}}}

    def pod(name: str, on: str) -> Obj:
        spec: Obj = {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{name[-1]}"}]}
        if on:
            spec["nodeName"] = on
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
                "spec": spec, "status": {}}

    gpu = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "node-a-gpu"},
              "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
                       "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}
    claims = [_tiny_claim("c1", "gpu-0", "p1"), second_claim or _tiny_claim("c2")]
    return Final([node("node-a"), node("node-b")], {f"{NS}/p1": pod("p1", "node-a"), f"{NS}/p2": pod("p2", second_pod)},
                 {f"{NS}/{c['metadata']['name']}": c for c in claims}, [gpu], [slice_], [])


def test_the_checks_pass_a_right_state() -> None:
    assert audit_bound(_tiny(2, second_pod="node-a", second_claim=_tiny_claim("c2", "gpu-1", "p2"))) == []
    assert audit_pending(_tiny(1, second_pod="", second_claim=None)) == (
        [], {"claims unallocatable on every node the other filters leave": 1})


def test_the_checks_find_a_device_allocated_twice() -> None:
    problems = audit_bound(_tiny(2, second_pod="node-a", second_claim=_tiny_claim("c2", "gpu-0", "p2")))
    assert any("gpu-0 allocated twice" in p for p in problems), problems


def test_the_checks_find_an_allocation_nobody_bound_holds() -> None:
    problems = audit_bound(_tiny(2, second_pod="", second_claim=_tiny_claim("c2", "gpu-1", "p2")))
    assert problems == [f"(a) {NS}/c2 is reserved for pods p2, not a bound pod naming it"], problems
    problems = audit_bound(_tiny(2, second_pod="node-a", second_claim=_tiny_claim("c2", "gpu-1")))
    assert f"(a) {NS}/p2 bound to node-a, its claim {NS}/c2 is not reserved for it (reservedFor [])" in problems
    assert f"(a) {NS}/c2 is allocated but reserved for nobody" in problems


def test_the_checks_find_a_device_of_another_node() -> None:
    problems = audit_bound(_tiny(2, second_pod="node-b", second_claim=_tiny_claim("c2", "gpu-1", "p2")))
    assert any("cannot be used on node-b" in p for p in problems), problems


def test_the_checks_find_a_pod_left_pending_with_a_free_device(tmp_path: Path) -> None:
    problems, _ = audit_pending(_tiny(2, second_pod="", second_claim=None), tmp_path)
    assert len(problems) == 1 and problems[0].startswith(f"(b) {NS}/p2 left pending although node-a"), problems
    assert "node-a/gpu-1" in problems[0]
    assert (tmp_path / f"{NS}_p2.json").exists()
