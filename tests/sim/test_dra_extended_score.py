"""Issue 30: how a node scores for a pod asking an extended resource a DeviceClass backs. kube-scheduler
v1.37.2's NodeResourcesFit, where the node's allocatable does not list the resource, scores the column
with the node's devices of the backing class (allocatable: how many reach the node; allocated: how many
of them are allocated). koordpy's binpacking (the most allocated node first) counts that column the same
way, not as the unbounded room the fit gives it there."""

from __future__ import annotations

import pytest

from tests.builders import pod, run
from tests.sim.test_dra import DRIVER, _asking_gpus, _backed, _running, claiming, gpu_nodes, gpu_slice, template


def test_the_node_whose_backing_devices_are_more_allocated_is_preferred() -> None:
    # Both nodes have 8 GPUs of the class and the same CPU; 4 of node-b's GPUs are held by a running
    # pod's claim (no extended resource request of its own: only the devices say so). By device count
    # node-b is the more allocated: binpacking puts the pod there (before, the column was unbounded room
    # on both, and node-a came first by name).
    held, busy = _running(claiming(pod("busy", cpu="1"), template_name="gpus"), "node-b")
    held["status"]["allocation"]["devices"]["results"] = held["status"]["allocation"]["devices"]["results"][:4]
    idle = pod("idle", cpu="1")  # node-a's CPU as allocated as node-b's
    idle["spec"]["nodeName"] = "node-a"
    out = run(gpu_nodes("node-a", "node-b"), _backed(), gpu_slice("node-a"), gpu_slice("node-b"),
              template(count=4), held, busy, idle, _asking_gpus("p", 1))
    assert out.bound == {"default/p": "node-b"}, out.pending


def test_the_counts_are_the_classs_devices_reaching_each_node_and_those_allocated() -> None:
    from koordpy.core.claims import DeviceRules
    from koordpy.sim.simulator import World

    # node-a: its own 8 GPUs (2 of them "a100", which the class leaves out), node-b: 4, and one shared
    # device every node reaches; 3 of node-a's h100s are allocated.
    shared = gpu_slice("shared", n=1)
    shared["spec"].pop("nodeName")
    shared["spec"]["allNodes"] = True
    a = gpu_slice("node-a")
    for d in a["spec"]["devices"][6:]:
        d["attributes"]["model"] = {"string": "a100"}
    cls = _backed()
    cls["spec"]["selectors"].append({"cel": {"expression": 'device.attributes["gpu.example.com"].model == "h100"'}})
    held, busy = _running(claiming(pod("busy", cpu="1"), template_name="gpus"), "node-a")
    held["status"]["allocation"]["devices"]["results"] = held["status"]["allocation"]["devices"]["results"][:3]
    world = World.from_objects([("t", o) for o in (*gpu_nodes("node-a", "node-b", "node-c"), cls, a,
                                                    gpu_slice("node-b", n=4), shared, held, busy)])
    snapshot = world.snapshot(frozenset({"koordpy"}))
    rules = DeviceRules(snapshot.devices)
    total, used = rules.extended_room("example.com/gpu", snapshot.nodes)
    assert [n.name for n in snapshot.nodes] == ["node-a", "node-b", "node-c"]
    assert total.tolist() == [7, 5, 1] and used.tolist() == [3, 0, 0]


def test_a_change_of_allocations_recounts_only_the_devices_it_touched(monkeypatch: pytest.MonkeyPatch) -> None:
    # The score is asked for every pod placed, and each pod's Reserve changes the allocations: the
    # counts follow the devices that changed (added, then taken back by the transaction's undo), not
    # every device of the class again (before: every device of every node was looked at per change).
    from koordpy.api.dra import Allocation, DeviceResult
    from koordpy.core.claims import DeviceRules
    from koordpy.devices.state import InUse
    from koordpy.sim.simulator import World

    names = [f"node-{i}" for i in range(20)]
    world = World.from_objects([("t", o) for o in (*gpu_nodes(*names), _backed(), *map(gpu_slice, names))])
    snapshot = world.snapshot(frozenset({"koordpy"}))
    rules = DeviceRules(snapshot.devices)
    total, used = rules.extended_room("example.com/gpu", snapshot.nodes)
    assert total.tolist() == [8] * 20 and used.tolist() == [0] * 20
    asked: list[str] = []
    real = InUse.allocated

    def allocated(self: InUse, device: str) -> bool:
        asked.append(device)
        return real(self, device)

    monkeypatch.setattr(InUse, "allocated", allocated)
    undo = rules.in_use.add(Allocation(results=tuple(DeviceResult("gpus", DRIVER, "node-3", f"gpu-{d}")
                                                     for d in range(2))))
    at = [n.name for n in snapshot.nodes].index("node-3")
    _, after = rules.extended_room("example.com/gpu", snapshot.nodes)
    assert after[at] == 2 and after.sum() == 2 and used.sum() == 0  # (what was handed out before stays)
    assert sorted(asked) == [f"{DRIVER}/node-3/gpu-0", f"{DRIVER}/node-3/gpu-1"]
    undo()
    asked.clear()
    _, back = rules.extended_room("example.com/gpu", snapshot.nodes)
    assert back.sum() == 0 and len(asked) == 2
