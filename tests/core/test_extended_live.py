"""A DeviceClass that backs an extended resource, added after a pod asking for it waited: the arrays are
built again (the resource is no longer the allocatable's on nodes that do not list it) and the pod is
placed through its special claim (issue 30)."""

from __future__ import annotations

from tests.builders import node
from tests.core.test_victims_wake import Live
from tests.sim.test_dra import _asking_gpus, _backed, gpu_slice


def test_a_class_backing_the_resource_added_later_lets_the_waiting_pod_be_placed() -> None:
    live = Live()
    live.add("Node", node("node-a", cpu="8"))
    asking = _asking_gpus("p", 2)
    asking["spec"]["schedulerName"] = "koordpy"
    live.add("Pod", asking)
    first = live.cycle()
    assert not first.binds and "Insufficient example.com/gpu" in first.waiting["default/p"], first.waiting
    live.add("ResourceSlice", gpu_slice("node-a"))
    live.add("DeviceClass", _backed())
    second = live.cycle(after=30.0)
    assert [(b.pod, b.node) for b in second.binds] == [("default/p", "node-a")], second.waiting
    [bind] = second.binds
    assert bind.devices is not None and bind.devices.extended is not None
    assert len(bind.devices.extended.allocation.results) == 2
