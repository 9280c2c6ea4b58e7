"""DynamicResources' PostFilter in the core (``koordpy.core.deallocation``): what a cycle decides for a pod
that fits no node while claims of its are allocated where it can no longer go."""

from __future__ import annotations

from typing import Any

from koordpy.core.cycle import schedule
from koordpy.core.decisions import Deallocate
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import pod
from tests.sim import test_dra
from tests.sim.test_dra import gpu_class, gpu_nodes, gpu_slice

NAMES = frozenset({"koordpy"})


def _stale(name: str, first: int) -> dict[str, Any]:
    """Claim ``name`` allocated 4 GPUs of a node that is gone, reserved for nobody."""
    results = [{"request": "gpus", "driver": test_dra.DRIVER, "pool": "node-gone", "device": f"gpu-{d}"}
               for d in range(first, first + 4)]
    made = test_dra.claim(name, 4, allocation={"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-gone"]}]}]}})
    made["metadata"]["uid"] = f"uid-{name}"
    return made


def _world() -> World:
    p = pod("p", cpu="1")
    p["spec"]["resourceClaims"] = [{"name": "a", "resourceClaimName": "one"},
                                   {"name": "b", "resourceClaimName": "two"}]
    objs = [*gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), _stale("one", 0), _stale("two", 4), p]
    return World.from_objects([("t", o) for o in objs])


def _deallocations(world: World, state: SchedulerState, now: float,
                   preemption: bool = True) -> tuple[list[Deallocate], Any]:
    snap = world.snapshot(NAMES)
    snap.preemption = preemption
    result = schedule(snap, state, now)
    return [d for d in result.decisions if isinstance(d, Deallocate)], result


def test_one_claim_per_attempt_is_given_up_then_the_next_then_the_pod_binds() -> None:
    world, state = _world(), SchedulerState()
    first, result = _deallocations(world, state, 0.0)
    assert first == [Deallocate("default/one", "uid-one", "default/p")]  # one claim per attempt, in the pod's order
    assert result.waiting["default/p"].startswith("0/1 nodes are available: 1 resourceclaim not available")
    world.apply(result)
    second, result = _deallocations(world, state, 1.0)
    assert second == [Deallocate("default/two", "uid-two", "default/p")]
    world.apply(result)
    third, result = _deallocations(world, state, 2.0)
    assert third == [] and [(b.pod, b.node) for b in result.binds] == [("default/p", "node-a")]


def test_the_claims_are_given_up_with_preemption_off() -> None:
    # PostFilter's DynamicResources plugin is not preemption: it runs whatever the preemption setting.
    first, _ = _deallocations(_world(), SchedulerState(), 0.0, preemption=False)
    assert [d.claim for d in first] == ["default/one"]


def test_the_claim_of_extended_resources_is_not_deallocated() -> None:
    # kube-scheduler's PostFilter deletes the claim made for a pod's DRA-backed extended resources rather
    # than deallocate it: it is left alone here, and the pod's next claim is given up.
    world = _world()
    p = world.pods["default/p"]
    world.pods["default/p"] = p.model_copy(update={"extended_claim": "one"})
    first, _ = _deallocations(world, SchedulerState(), 0.0)
    assert [d.claim for d in first] == ["default/two"]


def test_the_pending_message_says_the_deallocation_completed() -> None:
    # kube-scheduler adds its PostFilter's status to the pod's message: the claim was given up this
    # attempt, so the pod is told so, with preemption on or off.
    for preemption in (True, False):
        _, result = _deallocations(_world(), SchedulerState(), 0.0, preemption=preemption)
        assert result.waiting["default/p"] == ("0/1 nodes are available: 1 resourceclaim not available on the node. "
                                               "deallocation of ResourceClaim completed")


def test_the_group_postfilter_is_for_one_workload_podgroup_of_plain_members() -> None:
    # kube-scheduler's PodGroupPostFilter: a Workload PodGroup, not a CompositePodGroup (a gang of parts);
    # its members all name the group; any member bound or held makes the group's claims in use.
    from koordpy.api.objects import Pod
    from koordpy.core.deallocation import WorkloadGroup, workload_group
    from koordpy.core.gang import Job
    from koordpy.core.model import Gang

    def member(name: str, group: str = "train", node: str | None = None) -> Pod:
        return Pod.from_raw(pod(name, cpu="1", node_name=node, schedulingGroup={"podGroupName": group}))

    def job(*pods: Pod, parts: bool = False) -> Job:
        gang = Gang("default/train", None, list(pods), 0.0,
                    parts=(1, ((frozenset(p.key for p in pods), 1),)) if parts else None)
        return Job("default/train", [gang], [p for p in pods if not p.node_name], 0, 0.0)

    assert workload_group(job(member("a"), member("b")), set()) == WorkloadGroup("train", False)
    assert workload_group(job(member("a"), member("b")), {"default/b"}) == WorkloadGroup("train", True)
    assert workload_group(job(member("a"), member("b", node="n0")), set()) == WorkloadGroup("train", True)
    assert workload_group(job(member("a"), member("b", "other")), set()) is None
    assert workload_group(job(member("a"), member("b"), parts=True), set()) is None
    assert workload_group(Job("default/p", [], [Pod.from_raw(pod("p"))], 0, 0.0), set()) is None
