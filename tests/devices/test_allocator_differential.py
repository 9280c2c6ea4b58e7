"""koordpy's allocator against kube-scheduler v1.37.2's own, on random DRA worlds.

Each case (``tests/devices/generate.py``: nodes, classes, slices, claims in use, one pod's claims, in
the API's wire form) goes to draref (``structured.NewAllocator`` with the scheduler's default
features, one process for the whole batch) and, parsed by ``koordpy.api.dra``'s ``from_raw``, to
``koordpy.devices.allocator.Allocator``. On every node both must give the same verdict (allocated,
unschedulable, or an error kube-scheduler reports as such), and every allocation either gives must
be valid by ``tests/devices/checker.py``, written from the API's rules. The devices chosen may
differ: the order in which candidates are tried is not part of the API.

``KOORDPY_DRA_DIFF_CASES`` (cases per feature set, default 150) and ``KOORDPY_DRA_DIFF_SEED`` widen a
run; a disagreement prints the case's name and seed, and ``KOORDPY_DRA_DIFF_DUMP`` names a folder
to write the cases that disagree to, as JSON draref reads.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from koordpy.api.dra import Allocation, DeviceClass, Devices, DeviceTaintRule, ResourceClaim, ResourceSlice
from koordpy.api.objects import Node
from koordpy.devices.allocator import Allocator
from koordpy.devices.pools import Pools
from koordpy.devices.reasons import DeviceError, Unallocatable
from koordpy.devices.state import InUse
from tests.devices import draref
from tests.devices.checker import violations
from tests.devices.generate import FEATURES, Json, case

CASES = int(os.environ.get("KOORDPY_DRA_DIFF_CASES", "150"))
SEED = int(os.environ.get("KOORDPY_DRA_DIFF_SEED", "30"))

# Disagreements known and kept as failing cases of their own (below), so that the random worlds
# look for new ones. A feature whose every use disagrees is left out of the worlds (KNOWN_FEATURES);
# a verdict that differs in a known way on one node is counted apart (KNOWN_VERDICTS). Delete an
# entry when its case passes.
KNOWN_FEATURES: dict[str, str] = {
    "fractional_range": "test_a_fractional_request_policy_range_is_whole_numbers_by_default",
    "taint_rule_no_selector": "test_a_taint_rule_without_a_device_selector_taints_no_device",
}


@dataclass(frozen=True)
class Verdict:
    kind: str  # "allocated", "unschedulable" or "error"
    message: str = ""
    allocations: tuple[Allocation, ...] = ()


KNOWN_VERDICTS: dict[str, Callable[[Verdict, Verdict], bool]] = {
    # test_all_devices_from_a_pool_being_updated_is_an_error
    "All from a pool being updated": lambda up, us: (
        up.kind == "error" and "asks for all devices" in up.message and "being updated" in up.message
        and us.message.startswith("Unallocatable(why='pool-incomplete'")),
    # test_all_devices_from_an_invalid_pool_is_an_error
    "All from an invalid pool": lambda up, us: (
        up.kind == "error" and "asks for all devices" in up.message and "currently invalid" in up.message
        and us.message.startswith("Unallocatable(why='pool-invalid'")),
}

# The feature sets the random worlds are drawn from: a narrow one (where most cases allocate, so
# the allocations themselves are compared), one per group of features, and everything at once.
# Every feature of FEATURES is switched on in some set; koordpy's allocator implements all of them.
FEATURE_SETS: dict[str, frozenset[str]] = {
    "basic": frozenset({"counts", "in_use"}),
    "selectors": frozenset({"drivers", "selectors", "counts", "in_use", "missing_class"}),
    "modes": frozenset({"counts", "all", "first_available", "admin", "in_use", "taints"}),
    "constraints": frozenset({"drivers", "counts", "constraints", "first_available", "in_use"}),
    "pools": frozenset({"counts", "pools", "network", "counters", "in_use", "all"}),
    "consumable": frozenset({"counts", "consumable", "in_use", "selectors", "fractional", "fractional_range"}),
    "hostile": frozenset({"counts", "selectors", "missing_keys", "invalid_pools", "in_use", "all"}),
    "sharing": frozenset({"counts", "in_use", "allocated_claims", "binding", "network", "drivers"}),
    "taints": frozenset({"counts", "taints", "taint_rules", "taint_rule_no_selector", "in_use", "all", "admin"}),
    # Without constraints: with them a 128-device pool's search runs into the 10 s bound on each side
    # (test_a_search_that_runs_out_of_time_is_an_error has that, with a short bound).
    "large": frozenset({"counts", "large", "all", "in_use", "selectors", "network"}),
    "everything": FEATURES,
}
assert set().union(*FEATURE_SETS.values()) == FEATURES
FEATURE_SETS = {name: features - KNOWN_FEATURES.keys() for name, features in FEATURE_SETS.items()}


@dataclass(frozen=True)
class World:
    nodes: tuple[Node, ...]
    classes: dict[str, DeviceClass]
    slices: tuple[ResourceSlice, ...]
    in_use: tuple[ResourceClaim, ...]
    claims: tuple[ResourceClaim, ...]
    taint_rules: tuple[DeviceTaintRule, ...]
    selecting_rules: tuple[DeviceTaintRule, ...]  # those with a deviceSelector: the others pick nothing
    timeout: float  # the plugin's filterTimeout (seconds)


def parse(c: Json) -> World:
    """The case as koordpy reads it: every object through its ``from_raw``."""
    classes = [DeviceClass.from_raw(x) for x in c["classes"]]
    return World(tuple(Node.from_raw(x) for x in c["nodes"]), {x.name: x for x in classes},
                 tuple(ResourceSlice.from_raw(x) for x in c["slices"]),
                 tuple(ResourceClaim.from_raw(x) for x in c["allocated"]),
                 tuple(ResourceClaim.from_raw(x) for x in c["claims"]),
                 tuple(DeviceTaintRule.from_raw(x) for x in c.get("taintRules", ())),
                 tuple(DeviceTaintRule.from_raw(x) for x in c.get("taintRules", ()) if "deviceSelector" in x["spec"]),
                 float(c.get("filterTimeout", 10.0)))


def ours(w: World) -> dict[str, Verdict]:
    devices = Devices(classes=dict(w.classes), slices={s.name: s for s in w.slices},
                      claims={c.key: c for c in (*w.in_use, *w.claims)},
                      taint_rules={r.name: r for r in w.taint_rules})
    held = [c for c in w.claims if c.allocation is not None]  # in use too, as in kube-scheduler's tracker
    allocator = Allocator(Pools.build(devices), w.classes, InUse.from_claims((*w.in_use, *held)),
                          timeout=w.timeout)
    out = {}
    for node in w.nodes:
        try:
            got = allocator.allocate(node, w.claims, time.time())
        except DeviceError as e:
            out[node.name] = Verdict("error", e.message)
            continue
        if isinstance(got, Unallocatable):
            out[node.name] = Verdict("unschedulable", repr(got))
        else:
            out[node.name] = Verdict("allocated", allocations=tuple(got))
        # fits() is allocate's verdict without the allocations: it must say the same.
        if (allocator.fits(node, w.claims, time.time()) is None) != isinstance(got, list) and not (
                isinstance(got, Unallocatable) and got.why == "timeout"):
            out[node.name] = Verdict("fits() disagrees with allocate()", repr(got))
    return out


def theirs(c: Json, answer: Json) -> dict[str, Verdict]:
    """draref's verdicts, its allocations read back through ResourceClaim.from_raw."""
    if answer.get("error"):
        return {n["metadata"]["name"]: Verdict("error", answer["error"]) for n in c["nodes"]}
    out = {}
    for name, r in answer["nodes"].items():
        allocations = []
        for claim in c["claims"]:
            key = f'{claim["metadata"]["namespace"]}/{claim["metadata"]["name"]}'
            result = (r.get("allocations") or {}).get(key)
            if result is None and claim.get("status", {}).get("allocation"):
                result = claim["status"]["allocation"]  # draref returns the claims it allocated
            if result is not None:
                parsed = ResourceClaim.from_raw({**claim, "status": {"allocation": result}})
                assert parsed.allocation is not None
                allocations.append(parsed.allocation)
        out[name] = Verdict(r["verdict"], r.get("message", ""), tuple(allocations))
    return out


def timed_out(v: Verdict) -> bool:
    return "timed out trying to allocate devices" in v.message or v.message.startswith("Unallocatable(why='timeout'")


def disagreements(c: Json, answer: Json, timeouts: dict[str, int] | None = None,
                  known: dict[str, int] | None = None) -> list[str]:
    """What differs on each node. A node where either side ran out of time is left out of the
    verdicts (counted in ``timeouts``): which side finishes within the bound is a matter of speed
    (a search Go ends in 0.5 s may take Python 10), and what a timeout is called has its own case
    (test_a_search_that_runs_out_of_time_is_an_error)."""
    w = parse(c)
    up, us = theirs(c, answer), ours(w)
    out = []
    for node in w.nodes:
        a, b = up[node.name], us[node.name]
        if timed_out(a) or timed_out(b):
            if timeouts is not None:
                for who, v in (("kube-scheduler", a), ("koordpy", b)):
                    if timed_out(v):
                        timeouts[who] = timeouts.get(who, 0) + 1
            continue
        seen = next((name for name, matches in KNOWN_VERDICTS.items() if matches(a, b)), None)
        if seen is not None and known is not None:
            known[seen] = known.get(seen, 0) + 1
        elif a.kind != b.kind:
            out.append(f"{c['name']} {node.name}: kube-scheduler {a.kind} ({a.message}), "
                       f"koordpy {b.kind} ({b.message})")
        for who, v in (("kube-scheduler", a), ("koordpy", b)):
            if v.kind == "allocated":
                bad = violations(node, w.slices, w.classes, w.in_use, w.claims, v.allocations,
                                 taint_rules=w.selecting_rules)
                if bad:
                    out.append(f"{c['name']} {node.name}: {who}'s allocation breaks {bad}")
    return out


def compare(cases: Sequence[Json]) -> tuple[list[str], dict[str, int]]:
    """The disagreements over a batch, and a tally of kube-scheduler's verdicts per node (with
    "timed out <side>": nodes left out because that side ran out of time, and "known: <name>":
    nodes whose verdicts differ as a KNOWN_VERDICTS case does)."""
    answer = draref.run(list(cases))
    problems: list[str] = []
    tally: dict[str, int] = {}
    timeouts: dict[str, int] = {}
    known: dict[str, int] = {}
    dump = os.environ.get("KOORDPY_DRA_DIFF_DUMP")
    for c, a in zip(cases, answer["cases"], strict=True):
        found = disagreements(c, a, timeouts, known)
        problems += found
        for r in a.get("nodes", {}).values():
            tally[r["verdict"]] = tally.get(r["verdict"], 0) + 1
        if found and dump:
            Path(dump).mkdir(parents=True, exist_ok=True)
            (Path(dump) / f"{c['name']}.json").write_text(json.dumps([c], indent=1))
    tally.update({f"timed out {who}": n for who, n in timeouts.items()})
    tally.update({f"known: {name}": n for name, n in known.items()})
    return problems, tally


def test_draref_runs_the_scheduler_default_features() -> None:
    # kube-scheduler v1.37.2 started without flags: emulation 1.37, min compatibility 1.36. Beta
    # DRAFractionalCapacityRange defaults on only from min compatibility 1.37, so it is off.
    features = draref.run([])["features"]
    assert features == {"AdminAccess": True, "CompatibilityGroups": False, "ConsumableCapacity": True,
                        "DerivedAttributes": False, "DeviceBindingAndStatus": True, "DeviceTaints": True,
                        "FractionalCapacityRange": False, "ListTypeAttributes": False,
                        "OptionalNodeOperations": False, "PartitionableDevices": True, "PrioritizedList": True}


def test_random_mixes_of_features_get_kube_schedulers_verdicts() -> None:
    """Each case with its own few features, drawn from all of them."""
    rng = random.Random(f"{SEED}-mixed")
    features = sorted(FEATURES - KNOWN_FEATURES.keys())
    cases = [case(rng, frozenset(rng.sample(features, rng.randint(2, 6))), f"mixed-{SEED}-{i}") for i in range(CASES)]
    problems, tally = compare(cases)
    print(f"mixed: {len(cases)} cases, verdicts per node {tally}")
    assert tally.get("allocated", 0) >= len(cases) // 5, tally
    assert problems == [], "\n".join(problems[:30]) + f"\n({len(problems)} in all)"


@pytest.mark.parametrize("name", sorted(FEATURE_SETS))
def test_random_worlds_get_kube_schedulers_verdicts(name: str) -> None:
    rng = random.Random(f"{SEED}-{name}")
    cases = [case(rng, FEATURE_SETS[name], f"{name}-{SEED}-{i}") for i in range(CASES)]
    problems, tally = compare(cases)
    print(f"{name}: {len(cases)} cases, verdicts per node {tally}")
    # A generator that never allocates would compare nothing but refusals. With every feature at
    # once most pods meet one refusal or error or another: "mixed" is where combinations allocate.
    assert tally.get("allocated", 0) >= len(cases) // {"everything": 30, "hostile": 10}.get(name, 5), tally
    assert problems == [], "\n".join(problems[:30]) + f"\n({len(problems)} in all)"


def capacity_disagreements(c: Json, answer: Json, limit: int) -> list[str]:
    """Allocator.capacity against kube-scheduler allocating the pods one after another (draref's
    capacityLimit), on every node where neither side errs or runs out of time."""
    w = parse(c)
    devices = Devices(classes=dict(w.classes), slices={s.name: s for s in w.slices},
                      claims={x.key: x for x in w.in_use}, taint_rules={r.name: r for r in w.taint_rules})
    allocator = Allocator(Pools.build(devices), w.classes, InUse.from_claims(w.in_use), timeout=w.timeout)
    out = []
    for node in w.nodes:
        r = answer["nodes"][node.name]
        if r["verdict"] == "error" or r.get("capacity", -1) < 0:
            continue
        start = time.monotonic()
        try:
            ours = allocator.capacity(node, [x.spec for x in w.claims], limit, time.time())
        except DeviceError:
            continue
        if time.monotonic() - start >= w.timeout:
            continue  # koordpy's count ran into the bound: a matter of speed, as for allocate
        if ours != r["capacity"]:
            out.append(f"{c['name']} {node.name}: kube-scheduler takes {r['capacity']} pods, koordpy counts {ours}")
    return out


@pytest.mark.parametrize("name", ["basic", "selectors", "modes", "consumable", "pools", "taints", "large"])
def test_random_worlds_count_the_pods_a_node_takes_as_kube_scheduler(name: str) -> None:
    """What the topology search counts (Allocator.capacity: how many pods with fresh claims of
    these specs a node takes) against kube-scheduler allocating them one after another."""
    limit = 6
    rng = random.Random(f"{SEED}-capacity-{name}")
    cases = [case(rng, FEATURE_SETS[name], f"capacity-{name}-{SEED}-{i}") for i in range(CASES // 3)]
    for c in cases:
        c["capacityLimit"] = limit
    answer = draref.run(cases)
    problems = [p for c, a in zip(cases, answer["cases"], strict=True) if not a.get("error")
                for p in capacity_disagreements(c, a, limit)]
    counts = [r.get("capacity") for a in answer["cases"] for r in a.get("nodes", {}).values()]
    print(f"capacity {name}: pods per node {sorted(set(counts), key=str)}")
    assert any(n is not None and n > 1 for n in counts)  # some node takes several pods
    assert problems == [], "\n".join(problems[:30]) + f"\n({len(problems)} in all)"


# -- disagreements found, kept as the smallest cases that show them -------------------------------

def _claim(name: str, requests: list[Json], constraints: list[Json] | None = None) -> Json:
    devices: Json = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": {"devices": devices}}


def _gpu_world(devices: list[Json], claims: list[Json], **extra: Any) -> Json:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0", "labels": {"rack": "r0"}}}
    return {"name": extra.pop("name", "minimal"), "nodes": [node],
            "classes": [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}],
            "slices": [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
                        "spec": {"driver": "gpu.example.com", "nodeName": "node-0",
                                 "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                                 "devices": devices}}],
            "allocated": extra.pop("allocated", []), "claims": claims}


def _verdicts(c: Json) -> tuple[str, str]:
    answer = draref.run([c])["cases"][0]
    up, us = theirs(c, answer), ours(parse(c))
    return up["node-0"].kind, us["node-0"].kind


def test_a_minimal_case_agrees() -> None:
    """The harness itself on a case both allocate: one GPU for a claim of one."""
    c = _gpu_world([{"name": "gpu-0"}], [_claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu"}}])])
    assert _verdicts(c) == ("allocated", "allocated")
    assert disagreements(c, draref.run([c])["cases"][0]) == []


def test_all_devices_from_a_pool_being_updated_is_an_error() -> None:
    """Found by the random worlds (pools-30-9 and others): a request for All devices on a node whose
    pool is incomplete (one of its two slices published). kube-scheduler's allocator returns a plain
    error ("asks for all devices, but resource pool ... is currently being updated"), which the
    plugin reports as an error status (the pod's attempt fails, retried with backoff), not as the
    node being unschedulable; koordpy said Unallocatable(pool-incomplete)."""
    c = _gpu_world([{"name": "gpu-0"}],
                   [_claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}])])
    c["slices"][0]["spec"]["pool"]["resourceSliceCount"] = 2
    assert _verdicts(c) == ("error", "error")


def test_all_devices_from_an_invalid_pool_is_an_error() -> None:
    """Found by the random worlds (hostile-1-6 and others): as above for a pool that is invalid (a
    device name twice in its newest generation): kube-scheduler's "asks for all devices, but
    resource pool ... is currently invalid" is an error status; koordpy said
    Unallocatable(pool-invalid)."""
    c = _gpu_world([{"name": "gpu-0"}],
                   [_claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}])])
    twin = json.loads(json.dumps(c["slices"][0]))
    twin["metadata"]["name"] = "s-twin"
    c["slices"][0]["spec"]["pool"]["resourceSliceCount"] = twin["spec"]["pool"]["resourceSliceCount"] = 2
    c["slices"].append(twin)
    assert _verdicts(c) == ("error", "error")


def test_a_fractional_request_policy_range_is_whole_numbers_by_default() -> None:
    """Found by the random worlds (consumable-1-20 and others): DRAFractionalCapacityRange is off in
    kube-scheduler v1.37.2 by default (beta, default true only with --min-compatibility-version
    1.37), so a range of min 500m, step 250m, max 1500m is computed in whole numbers: a request of
    1100m becomes 1 + 1*1 = 2 > 1.5, and the device cannot serve it. koordpy computed in milli units
    (1250m) and allocated."""
    cores = {"value": "4", "requestPolicy": {"default": "500m",
                                             "validRange": {"min": "500m", "max": "1500m", "step": "250m"}}}
    c = _gpu_world([{"name": "gpu-0", "allowMultipleAllocations": True, "capacity": {"cores": cores}}],
                   [_claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu",
                                                           "capacity": {"requests": {"cores": "1100m"}}}}])])
    assert _verdicts(c) == ("unschedulable", "unschedulable")


def test_a_taint_rule_without_a_device_selector_taints_no_device() -> None:
    """Found by the random worlds (taints-1-231 and others): a DeviceTaintRule without
    spec.deviceSelector selects no device (the API: "Without a selector, no devices are matched";
    kube-scheduler's ResourceSlice tracker leaves the slices as they are), so a claim that tolerates
    nothing gets the one GPU. koordpy read the rule as tainting every device and said
    Unallocatable(taint-not-tolerated). An empty selector ({}) does select every device."""
    c = _gpu_world([{"name": "gpu-0"}], [_claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu"}}])])
    spec: Json = {"taint": {"key": "rule", "effect": "NoSchedule"}}
    rule: Json = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "rule"},
                  "spec": spec}
    c["taintRules"] = [rule]
    assert _verdicts(c) == ("allocated", "allocated")
    c["taintRules"] = [{**rule, "spec": {**spec, "deviceSelector": {}}}]
    assert _verdicts(c) == ("unschedulable", "unschedulable")


def test_a_search_that_runs_out_of_time_is_an_error() -> None:
    """Found by the random worlds (large-1-85 and others, with constraints, on the 10 s bound): a
    search that runs past the plugin's filterTimeout (here 0.3 s: 128 devices on four NUMA nodes,
    five of them asked with distinct NUMA nodes, which no choice meets). kube-scheduler reports
    "node ...: timed out trying to allocate devices" as an error status ("potentially transient",
    retried with backoff, and an error on one node ends the pod's attempt on every node); koordpy
    said Unallocatable(timeout) for the node."""
    devices = [{"name": f"vf-{i}", "attributes": {"numa": {"int": i % 4}}} for i in range(128)]
    c = _gpu_world(devices, [_claim("c", [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 5}}],
                                    [{"distinctAttribute": "gpu.example.com/numa"}])])
    c["filterTimeout"] = 0.3
    assert _verdicts(c) == ("error", "error")
