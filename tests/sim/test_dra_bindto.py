"""KEP-5729's ``resourceclaim.BindTo`` end to end through ``koordpy simulate``: a member's claim is the
Workload PodGroup's (reserved for the group, allocated once) exactly when the member's
``spec.resourceClaims`` entry is identical to one of the group's (same name, same
``resourceClaimName``, same ``resourceClaimTemplateName``), whether it names the claim or a template;
any other entry is reserved for the pod itself."""

from __future__ import annotations

from typing import Any

from tests.sim.test_dra import channel_gang, channel_objects


def shared_channel() -> dict[str, Any]:
    """``shared-channel``, a ResourceClaim made by hand asking for ``channel_objects``' channel."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "shared-channel", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "channel"}}]}}}


def allocated_for(group_uid: str, protected: bool = False) -> dict[str, Any]:
    """``shared-channel`` allocated the channel on rack r1, reserved for the group ``train`` (uid
    ``group_uid``); ``protected``: with the delete-protection finalizer a scheduler's allocation puts on."""
    held = shared_channel()
    if protected:
        held["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    held["status"] = {
        "allocation": {"devices": {"results": [{"request": "ch", "driver": "channel.example.com",
                                                "pool": "domain-r1", "device": "channel-0"}]},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                           {"key": "topology.kubernetes.io/rack", "operator": "In", "values": ["r1"]}]}]}},
        "reservedFor": [{"resource": "podgroups", "apiGroup": "scheduling.k8s.io", "name": "train",
                         "uid": group_uid}]}
    return held


def named_gang(member_entry: str = "channel") -> list[dict[str, Any]]:
    """``channel_gang`` whose group names ``shared-channel`` by ``resourceClaimName`` under the entry
    ``channel``, and whose members name it under ``member_entry``."""
    group, *members = channel_gang("uid-train")
    group["spec"]["resourceClaims"] = [{"name": "channel", "resourceClaimName": "shared-channel"}]
    for body in members:
        body["metadata"]["uid"] = f"uid-{body['metadata']['name']}"
        body["spec"]["resourceClaims"] = [{"name": member_entry, "resourceClaimName": "shared-channel"}]
    return [group, *members]


def test_a_claim_the_group_names_by_resource_claim_name_is_reserved_for_the_group() -> None:
    from koordpy.sim.simulator import World, simulate

    world = World.from_objects([("t", o) for o in (*channel_objects(), shared_channel(), *named_gang())])
    out = simulate(world)
    assert sorted(out.bound.values()) == ["r1-0", "r1-1"]
    assert out.allocations == {"default/shared-channel": ["channel.example.com/domain-r1/channel-0"]}
    made = world.devices.claims["default/shared-channel"]
    assert [(c.resource, c.name, c.uid, c.api_group) for c in made.reserved_for] == [
        ("podgroups", "train", "uid-train", "scheduling.k8s.io")]


def test_a_member_naming_the_groups_claim_under_another_entry_name_reserves_it_for_itself() -> None:
    from koordpy.sim.simulator import World, simulate

    world = World.from_objects([("t", o) for o in (*channel_objects(), shared_channel(), *named_gang("ch"))])
    out = simulate(world)
    assert sorted(out.bound.values()) == ["r1-0", "r1-1"]
    made = world.devices.claims["default/shared-channel"]
    assert sorted((c.resource, c.name) for c in made.reserved_for) == [("pods", "t-0"), ("pods", "t-1")]


def test_a_member_whose_template_entry_differs_from_the_groups_reserves_the_groups_claim_for_itself() -> None:
    # The group made train-channel from its template; the members' entry ``ch`` names the same template
    # but is not the group's entry, and their status names the group's claim: kube-scheduler accepts the
    # claim (its controller is the pod's PodGroup) and binds it to each pod (BindTo finds no identical entry).
    from koordpy.sim.simulator import World, simulate

    group, *members = channel_gang("uid-train")
    group["status"] = {"resourceClaimStatuses": [{"name": "channel", "resourceClaimName": "train-channel"}]}
    made = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "train-channel", "namespace": "default",
                         "ownerReferences": [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                                              "name": "train", "uid": "uid-train", "controller": True}],
                         "annotations": {"resource.kubernetes.io/pod-claim-name": "channel"}},
            "spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "channel"}}]}}}
    for body in members:
        body["metadata"]["uid"] = f"uid-{body['metadata']['name']}"
        body["spec"]["resourceClaims"] = [{"name": "ch", "resourceClaimTemplateName": "channel"}]
        body["status"] = {"resourceClaimStatuses": [{"name": "ch", "resourceClaimName": "train-channel"}]}
    world = World.from_objects([("t", o) for o in (*channel_objects(), made, group, *members)])
    out = simulate(world)
    assert sorted(out.bound.values()) == ["r1-0", "r1-1"]
    got = world.devices.claims["default/train-channel"]
    assert sorted((c.resource, c.name) for c in got.reserved_for) == [("pods", "t-0"), ("pods", "t-1")]


def test_the_group_postfilter_drops_the_groups_reservation_of_a_claim_it_names() -> None:
    # shared-channel, named by the group and its members, is allocated on r1 and reserved for the group,
    # but the members ask for more CPU than any node has: none runs and none gave a claim of its own up,
    # so kube-scheduler's PodGroupPostFilter drops the group's reservation (the allocation stays).
    from koordpy.core.cycle import schedule
    from koordpy.core.decisions import Deallocate
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    held = allocated_for("uid-train")
    held["metadata"]["uid"] = "uid-claim"
    group, *members = named_gang()
    for m in members:
        m["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "100"
    world = World.from_objects([("t", o) for o in (*channel_objects(), held, group, *members)])
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    given = [d for d in result.decisions if isinstance(d, Deallocate)]
    assert [(d.claim, d.unreserve) for d in given] == [("default/shared-channel", True)]
    world.apply(result)
    claim = world.devices.claims["default/shared-channel"]
    assert claim.reserved_for == () and claim.allocation is not None
