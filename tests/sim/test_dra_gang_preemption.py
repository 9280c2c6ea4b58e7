"""Issue 31: job-level preemption for a gang whose members claim parts of a partitionable device, end to
end in the simulator. A low-priority pod holding half of the only GPU is the victim a gang of two
"whole else half" members needs (each then gets a half), as kube-scheduler's DefaultPreemption with
DynamicResources would find for a lone pod; a gang that no eviction can serve is told so and evicts
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod, priority_class, run
from tests.core.dialects.test_upstream import RACK, group, member
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, upstream_gang, volcano_gang
from tests.sim.test_dra_gang_search import partitionable, whole_else_half

CLASSES = [priority_class("low", 1), priority_class("high", 1000)]
HALVES = [f"{DRIVER}/node-a/gpu-0-half-0", f"{DRIVER}/node-a/gpu-0-half-1"]


def holding(name: str, node_name: str, device: str, cls: str = "low", cpu: str = "1") -> list[dict[str, Any]]:
    """Pod ``name`` running on ``node_name`` (priority class ``cls``) with its claim allocated ``device``
    there and reserved for it (kube-scheduler's delete-protection finalizer: its going frees it)."""
    body = claiming(pod(name, cpu=cpu, priority_class=cls, node_name=node_name, scheduler="other"),
                    claim_name=f"{name}-gpus")
    body["metadata"]["uid"] = f"uid-{name}"
    made = claim(f"{name}-gpus", allocation={"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device}]}},
        reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}])
    made["spec"] = whole_else_half()["spec"]["spec"]
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return [made, body]


def high(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gang's pods (and a Kubernetes PodGroup, whose members must share its priority) in class high."""
    for o in objs:
        if o["kind"] == "Pod" or o["apiVersion"].startswith("scheduling.k8s.io"):
            o["spec"]["priorityClassName"] = "high"
    return objs


def whole_only() -> dict[str, Any]:
    body = whole_else_half()
    request = body["spec"]["spec"]["devices"]["requests"][0]
    request["firstAvailable"] = request["firstAvailable"][:1]
    return body


@pytest.mark.parametrize("make", [upstream_gang, volcano_gang])
def test_a_gang_of_two_halves_preempts_the_pod_holding_the_other_half(make: Any) -> None:
    # One GPU, published whole and as two halves over one counter set; a low-priority pod holds half-0.
    # Each member alone fits (half-1 is free), the two together do not: the count of what the node's
    # devices take stopped the second, which said nothing and looked unresolvable, so nobody preempted.
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"), *high(make("g", 2)))
    assert out.preempted == ["default/low"], out.pending
    assert out.bound == {"default/g-0": "node-a", "default/g-1": "node-a"}, out.pending
    assert out.allocations is not None
    assert sorted(d for k in ("default/g-0-gpus", "default/g-1-gpus") for d in out.allocations[k]) == HALVES
    assert "default/low-gpus" not in out.allocations


def test_a_lone_pod_wanting_the_whole_device_preempts_the_pod_holding_a_half() -> None:
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_only(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"),
              claiming(pod("solo", cpu="1", priority_class="high"), template_name="gpus"))
    assert out.preempted == ["default/low"], out.pending
    assert out.bound == {"default/solo": "node-a"}
    assert out.allocations == {"default/solo-gpus": [f"{DRIVER}/node-a/gpu-0"]}


@pytest.mark.parametrize("make", [upstream_gang, volcano_gang])
def test_a_gang_no_eviction_can_serve_evicts_nothing_and_says_why(make: Any) -> None:
    # Three members, two halves at most: evicting the low pod cannot make room for the third.
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"), *high(make("g", 3)))
    assert not out.preempted
    assert not out.bound
    said = out.pending["default/g-1"]
    assert said.startswith("0/1 nodes are available: 1 cannot allocate all claims (too few devices left once the "
                           "members of its job before it take theirs). preemption: not helpful"), said


# -- victims chosen counting devices --------------------------------------------------------------------------

def test_a_gang_told_no_eviction_helps_hears_how_many_pods_the_devices_could_take() -> None:
    # Priced counting devices, no candidate is proposed: the most any takes is 2 of the 3.
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"), *high(upstream_gang("g", 3)))
    assert not out.preempted and not out.bound
    assert out.pending["default/g-1"].endswith(
        "preemption: not helpful: even without every lower-priority pod, no candidate can take all 3 pods "
        "(the most is 2, in the cluster)."), out.pending["default/g-1"]


def racked(rack: str, *objs: dict[str, Any]) -> list[dict[str, Any]]:
    return [node(f"{rack}-0", cpu="9", labels={RACK: rack}), *partitionable(f"{rack}-0"), *objs]


def test_a_rack_gang_preempts_where_its_victim_frees_the_gpu_half_not_where_victims_free_only_cpu() -> None:
    # A gang of two (4 CPUs and "a whole GPU else half" each) required in one rack. Racks r0..r7 each have
    # one node of 9 CPUs whose GPU has half taken by a pod of the gang's own priority (never a victim) and
    # a low-priority pod without claims using 4 CPUs: evicting it frees the CPUs but one half serves one
    # member only. Rack rz's low-priority pod holds a half and 5 CPUs: evicting it frees both halves.
    # Priced without devices the nine racks cost the same and rz comes last by name, past the eight
    # candidates verified, so the gang waited though one eviction serves it.
    objs: list[Any] = [gpu_class(), whole_else_half(), *CLASSES]
    for i in range(8):
        rack = f"r{i}"
        objs += racked(rack, *holding(f"keep-{i}", f"{rack}-0", "gpu-0-half-0", cls="high"),
                       pod(f"hog-{i}", cpu="4", priority_class="low", node_name=f"{rack}-0", scheduler="other"))
    objs += racked("rz", *holding("holder", "rz-0", "gpu-0-half-0", cpu="5"))
    gang = [group("g", min_count=2, topology=RACK, priorityClassName="high"),
            *(claiming(member(f"g-{i}", cpu="4", group_name="g", priority_class="high"), template_name="gpus")
              for i in range(2))]
    out = run(*objs, *gang)
    assert out.preempted == ["default/holder"], (out.preempted, out.pending.get("default/g-0"))
    assert out.bound == {"default/g-0": "rz-0", "default/g-1": "rz-0"}
    assert out.allocations is not None
    assert sorted(d for k in ("default/g-0-gpus", "default/g-1-gpus") for d in out.allocations[k]) == [
        f"{DRIVER}/rz-0/gpu-0-half-0", f"{DRIVER}/rz-0/gpu-0-half-1"]


def priced_racks() -> list[Any]:
    """Racks r0..r3: a node of 9 CPUs whose low pod (priority 1) uses 4 CPUs and whose mid pod (priority
    5) uses 1 CPU and holds a GPU half; rack rz: a node of 9 CPUs whose pod of priority 3 uses 5 CPUs and
    holds a GPU half. A rack gang of two, 4 CPUs and "a whole GPU else half" each, fits any rack once its
    pods are gone."""
    objs: list[Any] = [gpu_class(), whole_else_half(), *CLASSES, priority_class("mid", 5), priority_class("third", 3)]
    for i in range(4):
        rack = f"r{i}"
        objs += racked(rack, *holding(f"mid-{i}", f"{rack}-0", "gpu-0-half-0", cls="mid"),
                       pod(f"hog-{i}", cpu="4", priority_class="low", node_name=f"{rack}-0", scheduler="other"))
    objs += racked("rz", *holding("third", "rz-0", "gpu-0-half-0", cls="third", cpu="5"))
    return [*objs, group("g", min_count=2, topology=RACK, priorityClassName="high"),
            *(claiming(member(f"g-{i}", cpu="4", group_name="g", priority_class="high"), template_name="gpus")
              for i in range(2))]


def test_a_rack_whose_victims_free_the_devices_is_priced_by_them_and_the_lower_priority_victim_goes() -> None:
    # Priced without devices, each of r0..r3 costs its priority-1 pod (the mid pod's CPU is not needed)
    # and rz its priority-3 pod; verified, each r-rack needs its priority-5 pod too (for its half), and
    # after four such plans the search stopped with r0's: a priority-5 victim where a priority-3 one does.
    out = run(*priced_racks())
    assert out.preempted == ["default/third"], (out.preempted, out.pending.get("default/g-0"))
    assert out.bound == {"default/g-0": "rz-0", "default/g-1": "rz-0"}


def test_victims_past_the_bound_on_shares_are_priced_as_keeping_their_nodes_devices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # No share counted (the bound): one count of the device room and no other, each holder priced as
    # keeping its node's whole device room (never as freeing nothing, which would make its node look
    # cheapest); here that prices the racks as the shares do, and rz's one victim goes.
    from koordpy.core import preemption
    from koordpy.core.claims import DeviceRules

    monkeypatch.setattr(preemption, "MAX_SHARES", 0)
    counts: list[int] = []
    capacity = DeviceRules.capacity

    def counted(self: DeviceRules, *args: Any, **kwargs: Any) -> Any:
        counts.append(int(args[2].sum()))  # the nodes counted
        return capacity(self, *args, **kwargs)

    room = preemption.Preemptor._device_room

    def pricing(self: preemption.Preemptor, *args: Any) -> Any:
        counts.clear()
        try:
            return room(self, *args)
        finally:
            assert len(counts) == 1, counts  # the room once, no share
    monkeypatch.setattr(DeviceRules, "capacity", counted)
    monkeypatch.setattr(preemption.Preemptor, "_device_room", pricing)
    out = run(*priced_racks())
    assert out.preempted == ["default/third"], out.preempted
