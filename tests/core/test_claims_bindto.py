"""The device rules bind a member's claim as ``resourceclaim.BindTo`` does (KEP-5729): to the member's
Workload PodGroup when the member's entry is identical to one of the group's, by ``resourceClaimName``
as by template, so a group's claim is reserved once for the group, however many members use it, and
the rules learn the groups through the standing view (built again when a group changes)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.dra import RESERVED_FOR_MAX, PodClaim, ResourceClaim
from koordpy.api.objects import Node, Pod
from koordpy.core.claims import DeviceRules
from koordpy.core.state import SchedulerState
from koordpy.core.txn import Txn
from koordpy.core.view import View
from koordpy.sim.simulator import World
from tests.builders import pod
from tests.sim.test_dra import channel_gang, channel_objects
from tests.sim.test_dra_bindto import allocated_for, shared_channel

ENTRY = {"name": "channel", "resourceClaimName": "shared-channel"}


def _world(members: int, group_entries: list[dict[str, Any]] | None = None) -> World:
    """The group ``train`` (its claims ``group_entries``, by default the entry naming ``shared-channel``)
    and ``members`` members t-<i> naming ``shared-channel`` under the group's entry name."""
    group, *_ = channel_gang("uid-train")
    group["spec"]["schedulingPolicy"] = {"gang": {"minCount": members}}
    if group_entries is None:
        group["spec"]["resourceClaims"] = [ENTRY]
    elif group_entries:
        group["spec"]["resourceClaims"] = group_entries
    else:
        del group["spec"]["resourceClaims"]
    bodies = []
    for i in range(members):
        body = pod(f"t-{i}", cpu="0.1", schedulingGroup={"podGroupName": "train"})
        body["metadata"]["uid"] = f"uid-t-{i}"
        body["spec"]["resourceClaims"] = [ENTRY]
        bodies.append(body)
    return World.from_objects([("t", o) for o in (*channel_objects(), shared_channel(), group, *bodies)])


def _rules(view: View, world: World) -> DeviceRules:
    view.refresh(world.snapshot(frozenset({"koordpy"})), SchedulerState())
    assert view.devices is not None
    return view.devices


def _members(world: World) -> list[Pod]:
    return sorted((p for p in world.pods.values() if p.name.startswith("t-")), key=lambda p: int(p.name[2:]))


def test_more_members_than_a_claim_may_have_consumers_all_share_the_groups_claim() -> None:
    world = _world(RESERVED_FOR_MAX + 44)
    rules = _rules(View(), world)
    nodes = [Node.from_raw(n) for n in channel_objects()[:2]]  # r1-0, r1-1: where the channel reaches
    txn = Txn()
    for i, member in enumerate(_members(world)):
        assert rules.reserve(member, nodes[i % 2], txn) is None, member.name
    held = rules.claims["default/shared-channel"]
    assert held.allocation is not None
    assert [(c.resource, c.name, c.uid) for c in held.reserved_for] == [("podgroups", "train", "uid-train")]
    # Only the first member allocates and reserves it; the others find it theirs already.
    writes = [w for b in rules.bindings.values() for w in b.claims]
    assert len(writes) == RESERVED_FOR_MAX + 44 and sum(w.allocation is not None for w in writes) == 1
    assert {(w.consumer.resource, w.consumer.name) for w in writes} == {("podgroups", "train")}


def test_a_member_whose_entry_name_differs_from_the_groups_is_its_claims_consumer() -> None:
    world = _world(2, [{"name": "other", "resourceClaimName": "shared-channel"}])
    rules = _rules(View(), world)
    found = rules.resolve(_members(world)[0])
    assert found.prefilter is None
    assert [(c.resource, c.name, c.uid) for c in found.consumers] == [("pods", "t-0", "uid-t-0")]


def test_the_rules_are_built_again_when_the_group_gains_the_members_entry() -> None:
    view = View()
    before = _rules(view, _world(2, []))  # the group names no claim: each member is its claim's consumer
    assert [c.resource for c in before.resolve(_members(_world(2, []))[0]).consumers] == ["pods"]
    world = _world(2)  # the same objects, the group now naming the members' entry
    after = _rules(view, world)
    assert after is not before and after.version != before.version
    assert [(c.resource, c.name) for c in after.resolve(_members(world)[0]).consumers] == [("podgroups", "train")]
    assert _rules(view, _world(2)) is after  # nothing changed: the rules stand


def test_a_member_finds_the_claim_reserved_for_its_group_by_the_groups_name() -> None:
    # kube-scheduler's IsReservedForPod matches a group's reservation by name (a pod does not know its
    # group's uid): one written for an earlier group of that name is not written again beside it.
    world = _world(2)
    world.devices.claims["default/shared-channel"] = type(world.devices.claims["default/shared-channel"]).from_raw(
        allocated_for("uid-old", protected=True))
    rules = _rules(View(), world)
    txn = Txn()
    assert rules.reserve(_members(world)[0], Node.from_raw(channel_objects()[0]), txn) is None
    assert [(c.name, c.uid) for c in rules.claims["default/shared-channel"].reserved_for] == [("train", "uid-old")]


def test_a_victim_member_leaves_its_groups_claim_allocated() -> None:
    # Preempting a member frees nothing of the group's claim: it stays reserved for the group (the
    # ResourceClaim controller drops a group's reservation only once the group is gone or replaced).
    world = _world(2)
    world.devices.claims["default/shared-channel"] = type(world.devices.claims["default/shared-channel"]).from_raw(
        allocated_for("uid-train", protected=True))
    rules = _rules(View(), world)
    rules.release(_members(world)[:1], Txn())
    held = rules.claims["default/shared-channel"]
    assert held.allocation is not None and [c.name for c in held.reserved_for] == ["train"]


def test_the_groups_are_read_when_the_first_claim_appears_after_them() -> None:
    # The view does not keep the groups while no claim exists; the claim coming later (the group and
    # its members unchanged) finds them read again.
    view = View()
    without = _world(2)
    del without.devices.claims["default/shared-channel"]
    first = _rules(view, without)
    assert first.resolve(_members(without)[0]).prefilter is not None  # the claim does not exist yet
    world = _world(2)
    after = _rules(view, world)
    assert [(c.resource, c.name) for c in after.resolve(_members(world)[0]).consumers] == [("podgroups", "train")]


def test_a_members_template_claim_made_for_someone_else_is_refused_naming_its_group() -> None:
    # kube-scheduler accepts a template's claim made for the pod or for the PodGroup it names; refusing
    # one made for neither, it names the group too.
    world = _world(2)
    rules = _rules(View(), world)
    theirs = ResourceClaim.from_raw({**shared_channel(), "metadata": {
        "name": "t-0-gpus", "namespace": "default",
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "u", "controller": True}]}})
    rules.claims[theirs.key] = theirs
    member = _members(world)[0].model_copy(update={
        "claims": (PodClaim("gpus", template="gpus"),), "claim_statuses": {"gpus": "t-0-gpus"}})
    assert rules.resolve(member).prefilter == ("ResourceClaim default/t-0-gpus was not created for Pod default/t-0 "
                                               "(neither Pod nor PodGroup train is the owner)")


def test_a_groups_object_replaced_without_a_change_to_its_claims_gives_the_same_claim_group(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The view asks for the groups again whenever a gang-declaring object changed (a PodGroup's status,
    # which the scheduler itself writes, most cycles): each group's ClaimGroup was made again and the
    # groups compared field by field, O(groups with claims) each time (4 ms at 5,000 such groups). A
    # group replaced by one that differs elsewhere keeps its ClaimGroup; one whose claims changed gets a new one.
    from koordpy.api import dra
    from koordpy.core.dialects import upstream

    made: list[object] = []

    class Counted(dra.ClaimGroup):
        __slots__ = ()

        def __init__(self, *args: Any) -> None:
            made.append(args)
            super().__init__(*args)

    monkeypatch.setattr(upstream, "ClaimGroup", Counted)
    monkeypatch.setattr(upstream, "_CLAIM_GROUPS", [{}], raising=False)  # none handed out before
    world = _world(2)
    view = View()
    first = _rules(view, world)
    assert len(made) == 1
    store = world.stores[upstream.STORE]
    key = next(iter(store))
    store[key] = store[key].model_copy(update={"min_count": 1})  # a change that is not its claims'
    assert _rules(view, world) is first and len(made) == 1
    store[key] = store[key].model_copy(update={"claim_statuses": {"channel": "other"}})
    assert _rules(view, world) is not first and len(made) == 2
