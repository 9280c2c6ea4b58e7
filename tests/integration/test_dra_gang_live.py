"""Issue 31's reproducer of kubernetes/kubernetes#138765 live: a gang whose members, allocated one by
one first fit, do not all get devices, where two halves of one device serve them all.

One KWOK node publishes one partitionable GPU in a pool of two ResourceSlices: one holds the shared
counter set ``gpu-0`` (2 memory units), the other the whole device ``gpu-0`` (takes 2) and its halves
``gpu-0-half-0`` / ``gpu-0-half-1`` (1 each): the shape of ``tests/sim/test_dra_gang_search.py``.
A gang of two pods, each with a claim from the template ``gpus`` whose one request is
``firstAvailable`` [whole, half], goes to the control plane as a ``scheduling.k8s.io`` PodGroup
(``minCount: 2``); koordpy also gets it as a Volcano PodGroup.

- kube-scheduler v1.37.2, started with the control plane's gates (its GangScheduling plugin on, as
  in test_dra_differential.py), places a PodGroup in one cycle (``podGroupSchedulingDefaultAlgorithm``
  in pkg/scheduler/schedule_one_podgroup.go): each member in turn through the whole pod algorithm,
  assumed and reserved before the next, DynamicResources keeping the first subrequest that fits. The
  first member takes the whole device, whose counters leave nothing for the second; the group then
  misses its minCount and every reservation of the cycle is undone. Both members stay pending and
  no claim is allocated, cycle after cycle: asserted and printed. The same gang with the preference
  the other way round ([half, whole]) is bound by kube-scheduler with a half each: the control that
  shows the objects themselves are fine and the order of choice is what fails.
- koordpy's gang-wide device search (docs/design.md, "The gang-wide device search (issue 31)")
  binds both members with a half each: every claim allocated and reserved for its pod, no device
  held twice, no counter overdrawn (``tests/integration/dra_checker.py``).

The checker understands only ``device.driver == "..."`` selectors and reports the others as not
checked; the subrequests' ``size`` selectors are checked here instead, against each allocated
device's attribute in the slice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builders import node
from tests.integration.dra_checker import dra_violations
from tests.integration.kube import (
    ControlPlane,
    Kube,
    Scheduler,
    drop_dra_objects,
    fake,
    settle,
    start_kube_scheduler,
    wait_for,
)
from tests.sim.test_dra import gpu_class, upstream_gang, volcano_gang
from tests.sim.test_dra_gang_search import partitionable, whole_else_half

Obj = dict[str, Any]
DRA = ("resourceclaims.resource.k8s.io", "resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io",
       "resourceclaimtemplates.resource.k8s.io")
MEMBERS = ("g-0", "g-1")
TIMEOUT = 90.0
# kube-scheduler's longest backoff is 10 s: quiet this long after both members were tried means
# it has had at least one more go at the gang and changed nothing.
QUIET = 12.0


@pytest.fixture(autouse=True)
def _no_claims_left(kube: Kube) -> Iterator[None]:
    """Claims keep the delete-protection finalizer until kube-controller-manager drops it: the test's DRA
    objects go, finalizers and all, so the next test (or run) starts from none."""
    yield
    drop_dra_objects(kube, DRA)


def cluster() -> list[Obj]:
    """node-a, its one GPU published whole and halved, the class, and the whole-else-half template."""
    return [*fake([node("node-a", cpu="64")]), gpu_class(), *partitionable("node-a"), whole_else_half()]


def gang(dialect: str, scheduler_name: str) -> list[Obj]:
    make: Callable[[str, int], list[Obj]] = upstream_gang if dialect == "upstream" else volcano_gang
    objs = make("g", 2)
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["schedulerName"] = scheduler_name
            o["spec"]["terminationGracePeriodSeconds"] = 0
    return objs


def scheduled_false(p: Obj) -> str | None:
    """The message of a PodScheduled=False condition, or None when there is none."""
    for c in (p.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message", ""))
    return None


def claim_of(p: Obj) -> str | None:
    """The name of the claim kube-controller-manager made from the template for the member's ``gpus``."""
    for st in (p.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == "gpus" and st.get("resourceClaimName"):
            return str(st["resourceClaimName"])
    return None


def members(kube: Kube) -> dict[str, Obj]:
    pods = kube.pods()
    return {name: pods[name] for name in MEMBERS if name in pods}


def all_tried(kube: Kube) -> dict[str, Obj] | None:
    """Both members, once each is bound or told why it waits and has its claim made; else None."""
    got = members(kube)
    if len(got) < len(MEMBERS):
        return None
    for p in got.values():
        if claim_of(p) is None or not (p["spec"].get("nodeName") or scheduled_false(p) is not None):
            return None
    return got


def missing(kube: Kube) -> str:
    """What keeps ``all_tried`` false, for a deadline's message."""
    got = members(kube)
    out = [f"{name}: not created" for name in MEMBERS if name not in got]
    for name, p in got.items():
        if claim_of(p) is None:
            out.append(f"{name}: no claim made from the template yet")
        if not p["spec"].get("nodeName") and scheduled_false(p) is None:
            out.append(f"{name}: neither bound nor PodScheduled=False")
    return "; ".join(out) or "nothing"


def wait_until_tried(kube: Kube) -> dict[str, Obj]:
    try:
        return wait_for(lambda: all_tried(kube), "both members tried", timeout=TIMEOUT)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; missing: {missing(kube)}") from None


def claims(kube: Kube) -> dict[str, Obj]:
    return {c["metadata"]["name"]: c for c in kube.get("resourceclaims")["items"]}


def held(claim: Obj) -> list[tuple[str, str]]:
    """(request, device) of each result of the claim's allocation ([] when not allocated)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return [(r["request"], r["device"]) for r in (alloc.get("devices") or {}).get("results") or []]


def state(kube: Kube) -> str:
    """Each member's node (or why it waits) and its claim's devices: what a scheduler did."""
    by_name = claims(kube)
    lines = []
    for name, p in sorted(members(kube).items()):
        where = p["spec"].get("nodeName") or f"pending ({scheduled_false(p)})"
        c = by_name.get(claim_of(p) or "")
        lines.append(f"{name}: {where}; claim {claim_of(p)}: {held(c) if c else 'none'}")
    return "\n".join(lines)


def checker_violations(kube: Kube) -> list[str]:
    """dra_checker's verdict on the whole state, less its 'not checked' lines for the size selectors
    (checked by ``size_violations``)."""
    problems = dra_violations(kube.get("nodes", namespace=None)["items"], kube.get("pods")["items"],
                              kube.get("resourceclaims")["items"], kube.everywhere("resourceslices"),
                              kube.get("deviceclasses", namespace=None)["items"],
                              kube.everywhere("podgroups.scheduling.k8s.io"))
    return [p for p in problems if "not checked (not understood by this checker)" not in p]


def size_violations(kube: Kube) -> list[str]:
    """Each result of subrequest ``gpu/<size>`` names a device whose ``size`` attribute is ``<size>``."""
    size = {d["name"]: d["attributes"]["size"]["string"]
            for s in kube.everywhere("resourceslices") for d in s["spec"].get("devices") or []}
    return [f"{c['metadata']['name']}: {request} got {device} (size {size.get(device)})"
            for c in claims(kube).values() for request, device in held(c)
            if request.split("/")[-1] != size.get(device)]


# -- kube-scheduler v1.37.2 ---------------------------------------------------------------------------

def reversed_preference() -> Obj:
    """The template asking for a half first, else the whole device."""
    out = whole_else_half()
    request = out["spec"]["spec"]["devices"]["requests"][0]
    request["firstAvailable"].reverse()
    return out


def run_kube_scheduler(kube: Kube, controlplane: ControlPlane, tmp_path: Path) -> tuple[dict[str, str], str]:
    """kube-scheduler with the control plane's gates on the upstream gang: what it bound once both
    members were tried and it has been quiet for QUIET seconds, and the state it left."""
    ks = start_kube_scheduler(controlplane, tmp_path)
    try:
        kube.apply(gang("upstream", ks.scheduler_name))
        wait_until_tried(kube)
        bound = settle(kube.bound, QUIET)
        seen = state(kube)
        ks.check()
    finally:
        ks.stop()
    return bound, seen


def test_kube_scheduler_leaves_the_whole_else_half_gang_pending(kube: Kube, controlplane: ControlPlane,
                                                                tmp_path: Path) -> None:
    kube.apply(cluster())
    bound, seen = run_kube_scheduler(kube, controlplane, tmp_path)
    print(f"\nkube-scheduler v1.37.2, firstAvailable [whole, half], upstream PodGroup minCount 2:\n{seen}")
    assert len(bound) < 2, f"kube-scheduler bound the whole gang:\n{seen}"
    assert bound == {}, f"kube-scheduler bound part of the gang:\n{seen}"
    # Why, in its words: one member found no allocation of its claim once the other took the whole
    # device, and the group counted one of two placed.
    said = [scheduled_false(p) or "" for p in members(kube).values()]
    assert any("cannot allocate all claims" in m for m in said), seen
    assert any("minCount (2) cannot be satisfied: 1 scheduled" in m for m in said), seen
    for name, c in claims(kube).items():
        assert not held(c), f"claim {name} kept an allocation of a gang that waits:\n{seen}"


def test_kube_scheduler_binds_the_gang_when_half_comes_first(kube: Kube, controlplane: ControlPlane,
                                                             tmp_path: Path) -> None:
    kube.apply([*cluster()[:-1], reversed_preference()])
    bound, seen = run_kube_scheduler(kube, controlplane, tmp_path)
    print(f"\nkube-scheduler v1.37.2, firstAvailable [half, whole], upstream PodGroup minCount 2:\n{seen}")
    assert bound == {"g-0": "node-a", "g-1": "node-a"}, seen
    assert sorted(d for c in claims(kube).values() for _, d in held(c)) == ["gpu-0-half-0", "gpu-0-half-1"], seen
    problems = checker_violations(kube) + size_violations(kube)
    assert not problems, "\n".join(problems) + f"\n{seen}"


# -- koordpy -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dialect", ["upstream", "volcano"])
def test_koordpy_binds_the_gang_with_a_half_each(kube: Kube, scheduler: Scheduler, dialect: str) -> None:
    kube.apply(cluster())
    kube.apply(gang(dialect, "koordpy"))
    try:
        wait_for(lambda: len(kube.bound()) == 2 and all_tried(kube), "both members bound", timeout=TIMEOUT)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{state(kube)}") from None
    seen = state(kube)
    print(f"\nkoordpy on the #138765 shape ({dialect} PodGroup, 2 members):\n{seen}")
    pods = members(kube)
    assert {name: p["spec"]["nodeName"] for name, p in pods.items()} == {"g-0": "node-a", "g-1": "node-a"}, seen
    by_name = claims(kube)
    devices = []
    for name, p in sorted(pods.items()):
        claim_name = claim_of(p)
        assert claim_name is not None, seen
        c = by_name[claim_name]
        [(request, device)] = held(c)
        assert request == "gpu/half", f"{name}'s claim took {request} ({device}), not a half:\n{seen}"
        devices.append(device)
        reserved = [(r["resource"], r["name"], r["uid"]) for r in c["status"].get("reservedFor") or []]
        assert reserved == [("pods", name, p["metadata"]["uid"])], \
            f"{claim_name} is reserved for {reserved}, not {name} alone:\n{seen}"
    assert sorted(devices) == ["gpu-0-half-0", "gpu-0-half-1"], seen
    problems = checker_violations(kube) + size_violations(kube)
    assert not problems, "\n".join(problems) + f"\n{seen}"
