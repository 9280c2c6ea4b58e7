"""Review of issue 30's DRA work (R1), end to end through the simulator: defects found against
kube-scheduler v1.37.2 and the ResourceClaim controller, each with the test that showed it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import pod, podgroup, priority_class, run
from tests.sim import test_dra
from tests.sim.test_dra import (
    SPINE_BLOCK,
    _running,
    claiming,
    gpu_class,
    gpu_nodes,
    gpu_slice,
    koord_gang,
    template,
    topology_cluster,
)


def _driver_allocated(body: dict[str, Any], node_name: str) -> list[dict[str, Any]]:
    """``body`` running on ``node_name`` with a claim of its own name (not made for it from a template,
    so not deleted with it) that a driver allocated: no delete-protection finalizer."""
    made, running = _running(body, node_name)
    name = body["metadata"]["name"]
    del made["metadata"]["ownerReferences"]
    made["metadata"]["finalizers"] = []
    running["spec"] = {**running["spec"], "resourceClaims": [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]}
    running["status"] = {}
    return [made, running]


def test_preemption_does_not_evict_a_pod_whose_claim_stays_allocated_when_it_goes() -> None:
    # The ResourceClaim controller clears only an allocation a scheduler made (its finalizer); a claim
    # not made for the victim is not deleted with it: its devices stay taken, the eviction frees nothing.
    low = claiming(pod("low", cpu="1", priority_class="low"), template_name="gpus")
    high = claiming(pod("high", cpu="1", priority_class="high"), template_name="gpus")
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), template(), priority_class("low", 1),
              priority_class("high", 1000), *_driver_allocated(low, "node-a"), high)
    assert out.preempted == []
    assert "default/high" not in out.bound


def test_a_gang_with_a_launcher_and_gpu_workers_binds_where_each_worker_has_a_node() -> None:
    # A gang whose members are not all claimers gets no device count in the placement
    # (DeviceRules.capacity): both workers went on one node, Reserve failed the second and the gang
    # waited for ever where kube-scheduler, member by member, binds it. Reserve now places such a
    # job again member by member, each after the devices the ones before it took.
    for gang in (upstream_gang, koordinator_gang):
        objs = [*gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a"), gpu_slice("node-b"), template()]
        out = run(*objs, *gang())
        assert sorted(out.bound) == ["default/g-0", "default/g-1", "default/g-launcher"], (gang.__name__, out.pending)
        assert {out.bound["default/g-0"], out.bound["default/g-1"]} == {"node-a", "node-b"}


def test_a_gang_with_a_launcher_gathers_in_the_block_whose_gpus_are_free() -> None:
    # The search now counts the launcher beside the workers' devices (it packed all three on one node).
    gang = podgroup("g", 3, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    out = run(topology_cluster(), SPINE_BLOCK, gang, pod("g-launcher", cpu="1", group="g"), *koord_gang("g", 2))
    assert {out.bound.get("default/g-0"), out.bound.get("default/g-1")} == {"n2", "n3"}, out.pending


def test_a_gang_whose_members_claim_different_devices_goes_where_each_finds_them() -> None:
    # The device count was taken over the first member's nodes only: node-b, the only one with h100s,
    # was capped at no pod, and the gang waited for ever.
    a100 = template("a", 8, f'device.attributes["{test_dra.DRIVER}"].model == "a100"')
    h100 = template("h", 8, f'device.attributes["{test_dra.DRIVER}"].model == "h100"')
    out = run(*gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a", model="a100"), gpu_slice("node-b"),
              a100, h100, podgroup("g", 2), claiming(pod("g-0", cpu="1", group="g"), template_name="a"),
              claiming(pod("g-1", cpu="1", group="g"), template_name="h"))
    assert out.bound == {"default/g-0": "node-a", "default/g-1": "node-b"}, out.pending


def test_members_whose_claims_draw_on_the_same_gpus_are_placed_again_member_by_member() -> None:
    # One member asks any 8 GPUs, the other 8 h100s: each kind alone fits one per node, so the count
    # lets both on node-a; Reserve failed the second and the gang waited. It is now placed again member
    # by member, each after the devices the ones before it took (kube-scheduler's order).
    anyg = template("any", 8)
    h100 = template("h", 8, f'device.attributes["{test_dra.DRIVER}"].model == "h100"')
    out = run(*gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a"), gpu_slice("node-b"), anyg, h100,
              podgroup("g", 2), claiming(pod("g-0", cpu="1", group="g"), template_name="any"),
              claiming(pod("g-1", cpu="1", group="g"), template_name="h"))
    assert sorted(out.bound.values()) == ["node-a", "node-b"], out.pending


def upstream_gang() -> list[dict[str, Any]]:
    made = test_dra.upstream_gang("g", 2)
    made[0]["spec"]["schedulingPolicy"]["gang"]["minCount"] = 3
    return [*made, pod("g-launcher", cpu="1", schedulingGroup={"podGroupName": "g"})]


def koordinator_gang() -> list[dict[str, Any]]:
    return [podgroup("g", 3), pod("g-launcher", cpu="1", group="g"), *koord_gang("g", 2)]


@pytest.mark.xfail(strict=True, reason="no DynamicResources PostFilter: a claim allocated where the pod can no "
                   "longer go (its node gone), reserved for nobody, is never deallocated, so the pod waits for ever; "
                   "kube-scheduler's PostFilter clears such an allocation (reservedFor empty or only the pod) and "
                   "the next cycle allocates it again")
def test_a_claim_allocated_on_a_node_that_is_gone_is_deallocated_and_allocated_again() -> None:
    results = [{"request": "gpus", "driver": "gpu.example.com", "pool": "node-gone", "device": f"gpu-{d}"}
               for d in range(8)]
    stale = test_dra.claim("mine", allocation={"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-gone"]}]}]}})
    stale["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), stale,
              claiming(pod("p", cpu="1"), claim_name="mine"))
    assert out.bound == {"default/p": "node-a"}, out.pending
