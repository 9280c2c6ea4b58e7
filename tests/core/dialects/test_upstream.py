"""Issue 20: Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``) as koordpy's fourth dialect,
rule by rule as kube-scheduler v1.37 applies it: the gang policy (quorum over bound and placed
members, waiting for ``minCount`` pods), the basic policy (pods one by one), the topology constraint
(one domain of a node label, held to the bound members' domain)."""

from __future__ import annotations

from typing import Any

from koordpy.api.kinds import snapshot_fields
from koordpy.api.workload import WorkloadPodGroup
from koordpy.core.cycle import schedule
from koordpy.core.dialects import upstream
from koordpy.core.messages import SCHEDULING_GROUP
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import node, pod, priority_class

RACK = "topology.kubernetes.io/rack"
NAMES = frozenset({"koordpy"})


def group(name: str = "train", *, min_count: int | None = None, topology: str | None = None,
          **spec: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    body: dict[str, Any] = {"schedulingPolicy": policy, **spec}
    if topology is not None:
        body["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": body}


def member(name: str, cpu: str = "8", group_name: str = "train", **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu=cpu, **kw)
    p["spec"]["schedulingGroup"] = {"podGroupName": group_name}
    return p


def racks(per_rack: int = 2, names: tuple[str, ...] = ("r1", "r2"), cpu: str = "8") -> list[dict[str, Any]]:
    return [node(f"{r}-{i}", cpu=cpu, labels={RACK: r}) for r in names for i in range(per_rack)]


def run(*objects: dict[str, Any] | list[dict[str, Any]]) -> SimulationResult:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return simulate(World.from_objects([("test", o) for o in flat]))


# -- gang policy ---------------------------------------------------------------------------------

def test_a_gang_binds_nothing_when_fewer_than_min_count_fit_and_all_when_they_do() -> None:
    pods = [member(f"t-{i}") for i in range(3)]
    out = run(node("n0"), node("n1"), group(min_count=3), *pods)
    assert out.bound == {}
    assert set(out.pending) == {"default/t-0", "default/t-1", "default/t-2"}
    assert all("GangGroup \"default/train\"" in m or "0/2 nodes" in m for m in out.pending.values())
    out = run(node("n0"), node("n1"), node("n2"), group(min_count=3), *pods)
    assert sorted(out.bound.values()) == ["n0", "n1", "n2"]


def test_a_gang_binds_every_member_that_fits_once_min_count_fits() -> None:
    out = run(node("n0"), node("n1"), node("n2"), group(min_count=2), *(member(f"t-{i}") for i in range(4)))
    assert len(out.bound) == 3  # minCount 2 met; the third that fits binds with them
    assert len(out.pending) == 1


def test_a_gang_waits_until_min_count_pods_exist() -> None:
    out = run(node("n0"), node("n1"), node("n2"), group(min_count=3), member("t-0"), member("t-1"))
    assert out.bound == {}
    # kube-scheduler's terms (a gang waits for minCount pods), not Koordinator's.
    assert out.pending["default/t-0"] == "waiting for minCount pods of PodGroup default/train to exist: 2 of " \
                                         "minCount 3 created"


def test_bound_members_count_towards_min_count() -> None:
    # Two members already run: one more pod meets minCount 3 on its own, as kube-scheduler counts the
    # assigned pods with the ones placed in the attempt.
    out = run(node("n0"), node("n1"), node("n2"), group(min_count=3), member("t-0", node_name="n0"),
              member("t-1", node_name="n1"), member("t-2"))
    assert out.bound == {"default/t-2": "n2"}


def test_a_basic_group_binds_its_pods_one_by_one() -> None:
    out = run(node("n0"), node("n1"), group(), *(member(f"t-{i}") for i in range(3)))
    assert len(out.bound) == 2 and len(out.pending) == 1


def test_a_min_count_lowered_wakes_the_waiting_gang() -> None:
    # minCount is mutable in v1.37: the standing view sees the group change (its store has no
    # Snapshot field of its own) and tries the gang again.
    world = World.from_objects([("t", o) for o in (node("n0"), node("n1"), group(min_count=3), member("t-0"),
                                                   member("t-1"))])
    state = SchedulerState()
    first = schedule(world.snapshot(NAMES), state, world.now)
    assert first.binds == []
    world.apply(first)
    world.stores[upstream.STORE]["default/train"] = WorkloadPodGroup.from_raw(group(min_count=2))
    second = schedule(world.snapshot(NAMES), state, world.now + 1)
    assert sorted(b.pod for b in second.binds) == ["default/t-0", "default/t-1"]


def test_a_podgroup_that_does_not_parse_holds_its_pods_with_the_error() -> None:
    # The live cache files such a group under the gang kinds' errors (the registry's ``errors``).
    world = World.from_objects([("t", o) for o in (node("n0"), member("t-0", cpu="1"), member("t-1", cpu="1"))])
    err = "PodGroup default/train: spec.schedulingPolicy.gang.minCount: must be at least 1, got 0"
    snapshot = Snapshot(scheduler_names=NAMES,
                        **snapshot_fields(world.stores, {("WorkloadPodGroup", "default/train"): err}))
    result = schedule(snapshot, SchedulerState(), world.now)
    assert result.binds == []
    assert result.waiting["default/t-0"] == f"PodGroup default/train is invalid: {err}"


# -- topology constraint ---------------------------------------------------------------------------

def test_a_gang_with_a_topology_key_lands_in_one_domain_of_it() -> None:
    # r1 has one free node, r2 two: a gang of 2 whole-node pods goes to r2, not across racks.
    busy = pod("busy", node_name="r1-0", scheduler="default-scheduler")
    out = run(racks(), busy, group(min_count=2, topology=RACK), member("t-0"), member("t-1"))
    assert sorted(out.bound.values()) == ["r2-0", "r2-1"]


def test_a_gang_that_fits_only_across_domains_waits() -> None:
    busy = [pod("b1", node_name="r1-0", scheduler="x"), pod("b2", node_name="r2-0", scheduler="x")]
    out = run(racks(), busy, group(min_count=2, topology=RACK), member("t-0"), member("t-1"))
    assert out.bound == {}
    assert SCHEDULING_GROUP not in out.pending["default/t-0"]  # placed and found no room, not refused


def test_nodes_without_the_label_are_not_candidates() -> None:
    out = run(node("bare-0"), node("bare-1"), node("r1-0", labels={RACK: "r1"}),
              group(min_count=2, topology=RACK), member("t-0"), member("t-1"))
    assert out.bound == {}
    out = run(node("bare-0"), group(min_count=1, topology=RACK), member("t-0"))
    assert out.pending["default/t-0"] == ("0/1 nodes are available: PodGroup default/train's topology constraint "
                                          f"needs nodes labelled {RACK}, and no node carries that label.")


def test_a_group_with_members_bound_is_held_to_their_domain() -> None:
    # t-0 runs in r1; r1 has no room left, r2 is empty: the new member waits rather than leave r1.
    out = run(racks(per_rack=1), group(min_count=1, topology=RACK), member("t-0", node_name="r1-0"),
              member("t-1"))
    assert out.bound == {}
    out = run(racks(per_rack=2), group(min_count=1, topology=RACK), member("t-0", node_name="r1-0"),
              member("t-1"))
    assert out.bound == {"default/t-1": "r1-1"}


def test_a_basic_group_with_a_topology_binds_one_by_one_inside_one_domain() -> None:
    # No quorum: the two pods that fit in one rack bind, the third waits although the other rack
    # has room, since every member shares one domain.
    out = run(racks(), group(topology=RACK), *(member(f"t-{i}") for i in range(3)))
    assert len(out.bound) == 2 and len({v[:2] for v in out.bound.values()}) == 1
    assert len(out.pending) == 1


# -- refusals --------------------------------------------------------------------------------------

def test_a_group_whose_pods_name_different_schedulers_is_refused() -> None:
    out = run(node("n0"), node("n1"), group(min_count=1), member("t-0"), member("t-1", scheduler="default-scheduler"))
    assert out.bound == {}
    assert "its pods name different schedulerNames (default-scheduler, koordpy)" in out.pending["default/t-0"]


def test_a_group_with_resource_claims_no_member_names_binds_its_members() -> None:
    # Issue 30 (KEP-5729): a group's claim is allocated only through a member's identical entry; a
    # member without one is placed as any other (tests/sim/test_dra.py has the shared claims).
    claimed = group(min_count=1, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}])
    out = run(node("n0"), claimed, member("t-0"))
    assert out.bound == {"default/t-0": "n0"}


def test_a_pod_whose_priority_differs_from_its_groups_is_refused() -> None:
    high = priority_class("high", 1000)
    out = run(node("n0"), node("n1"), high, group(min_count=2), member("t-0"), member("t-1", priority_class="high"))
    assert out.bound == {}
    assert "pod default/t-1 has priority 1000 and the group 0" in out.pending["default/t-1"]
    # The group's priority named by its class: pods of that class bind.
    out = run(node("n0"), node("n1"), high, group(min_count=2, priorityClassName="high"),
              member("t-0", priority_class="high"), member("t-1", priority_class="high"))
    assert len(out.bound) == 2


def test_a_pod_whose_group_does_not_exist_waits_for_it() -> None:
    out = run(node("n0"), member("t-0"))
    assert out.pending["default/t-0"] == ("waiting for PodGroup default/train (scheduling.k8s.io), which pod "
                                          "default/t-0 names in spec.schedulingGroup, to exist")
