"""kube-scheduler v1.37.2's PodGroupPostFilter (DynamicResources), end to end through the simulator: a
Workload PodGroup's own claim, allocated where no member can go any more and reserved for the group
alone, is deallocated when no member can be scheduled and none runs, and the next cycle allocates it
where the members fit; a member that runs keeps it (``koordpy.core.deallocation``)."""

from __future__ import annotations

from typing import Any

from koordpy.core.cycle import schedule
from koordpy.core.decisions import Deallocate
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World, simulate
from tests.sim.test_dra import channel_gang, channel_objects

GROUP = {"resource": "podgroups", "apiGroup": "scheduling.k8s.io", "name": "train", "uid": "uid-train"}


def _group_claim(rack: str, reserved: bool = True) -> dict[str, Any]:
    """``train-channel``, the group's claim from the template, allocated a channel on ``rack``'s nodes
    by an earlier cycle (its finalizer), reserved for the group."""
    status: dict[str, Any] = {"allocation": {
        "devices": {"results": [{"request": "ch", "driver": "channel.example.com", "pool": f"domain-{rack}",
                                 "device": "channel-0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "topology.kubernetes.io/rack", "operator": "In", "values": [rack]}]}]}}}
    if reserved:
        status["reservedFor"] = [GROUP]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "train-channel", "namespace": "default", "uid": "uid-claim",
                         "finalizers": ["resource.kubernetes.io/delete-protection"],
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "channel"},
                         "ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                              "name": "train", "uid": "uid-train", "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "channel"}}]}},
            "status": status}


def _world(*extra: dict[str, Any], cpu: str = "40", running: str = "") -> World:
    group, *members = channel_gang("uid-train")
    group["status"] = {"resourceClaimStatuses": [{"name": "channel", "resourceClaimName": "train-channel"}]}
    for m in members:
        m["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        m["status"] = {"resourceClaimStatuses": [{"name": "channel", "resourceClaimName": "train-channel"}]}
        if m["metadata"]["name"] == running:
            m["spec"]["nodeName"] = "r1-0"
    return World.from_objects([("t", o) for o in (*channel_objects(), group, *members, *extra)])


def test_the_groups_claim_pinned_where_no_member_can_go_is_deallocated_and_allocated_again() -> None:
    # Allocated on rack r9, whose nodes are gone, reserved for the group: every member is pinned there,
    # no pod of the group runs, so the group gives the claim up and the next cycle allocates it on r1.
    world = _world(_group_claim("r9"))
    first = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    given = [d for d in first.decisions if isinstance(d, Deallocate)]
    assert [(d.claim, d.uid, d.unreserve) for d in given] == [("default/train-channel", "uid-claim", False)]
    assert given[0].group is not None and given[0].group.name == "train"
    # kube-scheduler's PodGroupPostFilter words a group's claim apart from a pod's.
    assert all(said.endswith("deallocation of PodGroup ResourceClaim completed") for said in first.waiting.values())
    out = simulate(_world(_group_claim("r9")))
    assert sorted(out.bound.values()) == ["r1-0", "r1-1"], out.pending
    assert out.allocations == {"default/train-channel": ["channel.example.com/domain-r1/channel-0"]}


def test_a_running_member_keeps_the_groups_claim() -> None:
    # t-0 runs (its node r1-0 is not in r9): the group's claim is in use, the group releases nothing.
    out = simulate(_world(_group_claim("r9"), running="t-0"))
    assert "default/t-1" in out.pending
    assert out.allocations == {"default/train-channel": ["channel.example.com/domain-r9/channel-0"]}


def test_the_groups_reservation_is_dropped_when_the_members_wait_for_something_else() -> None:
    # The claim is available (r1), but the members ask for more CPU than any node has: no member gave up
    # a claim of its own and none runs, so the group's reservation is dropped, the allocation kept.
    world = _world(_group_claim("r1"), cpu="100")
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    given = [d for d in result.decisions if isinstance(d, Deallocate)]
    assert [(d.claim, d.unreserve) for d in given] == [("default/train-channel", True)]
    assert all(said.endswith("ResourceClaim unreserved for PodGroup") for said in result.waiting.values())
    world.apply(result)
    claim = world.devices.claims["default/train-channel"]
    assert claim.reserved_for == () and claim.allocation is not None
