"""Issue 30: what the allocator reports as an error (kube-scheduler's Filter error status, not a node
that does not fit) ends the pod's attempt as kube-scheduler's does: the pod's ``PodScheduled``
condition says ``SchedulerError`` with the filter's error, no "0/N nodes are available" count, and no
preemption is tried for it. Cases: "All" devices of a pool being updated, "All" devices of an invalid
pool (differential test: test_all_devices_from_a_pool_being_updated_is_an_error and
test_all_devices_from_an_invalid_pool_is_an_error)."""

from __future__ import annotations

import copy
from typing import Any

from koordpy.core.cycle import schedule
from koordpy.core.decisions import Preempt, SetPodScheduledFalse
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import pod, priority_class
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, gpu_nodes, gpu_slice, koord_gang, template


def all_devices(body: dict[str, Any]) -> dict[str, Any]:
    exactly = body["spec"]["devices"]["requests"][0]["exactly"] if body["kind"] == "ResourceClaim" \
        else body["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    exactly["allocationMode"] = "All"
    exactly.pop("count")
    return body


def conditions(*objects: dict[str, Any] | list[dict[str, Any]]) -> tuple[dict[str, SetPodScheduledFalse], bool]:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    w = World.from_objects([("t", o) for o in flat])
    result = schedule(w.snapshot(frozenset({"koordpy"})), SchedulerState(), w.now)
    return ({d.pod: d for d in result.decisions if isinstance(d, SetPodScheduledFalse)},
            any(isinstance(d, Preempt) for d in result.decisions))


def incomplete(node_name: str) -> dict[str, Any]:
    body = gpu_slice(node_name)
    body["spec"]["pool"]["resourceSliceCount"] = 2  # one of two published: being updated
    return body


def invalid(node_name: str) -> list[dict[str, Any]]:
    first = gpu_slice(node_name)
    first["spec"]["pool"]["resourceSliceCount"] = 2
    twin = copy.deepcopy(first)
    twin["metadata"]["name"] += "-twin"  # the same device names again: the pool is invalid
    return [first, twin]


def test_all_devices_of_a_pool_being_updated_is_a_scheduler_error_for_the_pod() -> None:
    said, evicted = conditions(gpu_nodes("node-a", "node-b"), gpu_class(), incomplete("node-a"), gpu_slice("node-b"),
                               all_devices(claim("c")), claiming(pod("p", cpu="1"), claim_name="c"))
    cond = said["default/p"]
    assert cond.reason == "SchedulerError"
    assert cond.message == ('running "DynamicResources" filter plugin: claim default/c, request gpus: all devices '
                            f"are asked for, but pool {DRIVER}/node-a is being updated (it has fewer ResourceSlices "
                            "than it announces)")
    assert not evicted


def test_all_devices_of_an_invalid_pool_is_a_scheduler_error_and_preempts_nobody() -> None:
    # A lower-priority pod holds node-b's GPUs: a claim for 8 of them preempts it; one for all the
    # devices meets node-a's invalid pool, an error, and preempts nobody (kube-scheduler runs no
    # PostFilter after a Filter error).
    holder = claiming(pod("holder", cpu="1", node_name="node-b"), claim_name="held")
    held = claim("held", 8, allocation=_allocation("node-b"),
                 reservedFor=[{"resource": "pods", "name": "holder", "uid": "uid-holder"}])
    held["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    world: list[dict[str, Any] | list[dict[str, Any]]] = [
        gpu_nodes("node-a", "node-b"), gpu_class(), invalid("node-a"), gpu_slice("node-b"),
        priority_class("high", 1000), held, holder, claiming(pod("p", cpu="1", priority_class="high"), claim_name="c")]
    said, evicted = conditions(*world, claim("c"))
    assert said["default/p"].reason == "Unschedulable" and evicted
    said, evicted = conditions(*world, all_devices(claim("c")))
    cond = said["default/p"]
    assert cond.reason == "SchedulerError"
    assert cond.message == ('running "DynamicResources" filter plugin: claim default/c, request gpus: all devices '
                            f"are asked for, but pool {DRIVER}/node-a is invalid (duplicate device name gpu-0)")
    assert not evicted


def test_a_gang_whose_members_meet_the_error_waits_with_it_as_scheduler_error() -> None:
    said, _ = conditions(gpu_nodes("node-a"), gpu_class(), incomplete("node-a"), all_devices(template()),
                         {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                          "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}},
                         koord_gang("g", 2))
    for key in ("default/g-0", "default/g-1"):
        assert said[key].reason == "SchedulerError"
        assert "is being updated" in said[key].message and "0/1 nodes" not in said[key].message


def _allocation(node_name: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "gpus", "driver": DRIVER, "pool": node_name, "device": f"gpu-{i}"}
                                    for i in range(8)]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}}
