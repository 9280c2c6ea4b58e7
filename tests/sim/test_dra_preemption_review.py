"""Review of 9803105 and 8093ca2 (preemption counting devices): the victims a job preempts for devices
when more pods hold devices than the pricing counts shares for (MAX_SHARES), and when a node has more
devices than the job needs. Each test names what it checks; kube-scheduler's DefaultPreemption is the
reference for a lone pod (the candidate whose highest-priority victim is lowest)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.builders import node, pod, priority_class, run
from tests.core.dialects.test_upstream import RACK, group, member
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, gpu_slice, template, upstream_gang
from tests.sim.test_dra_gang_preemption import high
from tests.sim.test_dra_gang_search import partitionable, whole_else_half

CLASSES = [priority_class("low", 1), priority_class("mid", 5), priority_class("third", 3),
           priority_class("high", 1000)]


def holding(name: str, node_name: str, devices: list[str], cls: str, cpu: str = "1") -> list[dict[str, Any]]:
    """Pod ``name`` running on ``node_name`` in class ``cls``, its claim (one GPU per device, as
    ``template``'s) allocated ``devices`` there and reserved for it, freed when it goes."""
    body = claiming(pod(name, cpu=cpu, priority_class=cls, node_name=node_name, scheduler="other"),
                    claim_name=f"{name}-gpus")
    body["metadata"]["uid"] = f"uid-{name}"
    made = claim(f"{name}-gpus", count=len(devices), allocation={"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": node_name, "device": d} for d in devices]}},
        reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}])
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return [made, body]


def one_gpu_nodes(prefix: str, n: int, cls: str) -> list[dict[str, Any]]:
    """``n`` nodes of one GPU each, the GPU held by a pod of class ``cls``."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        name = f"{prefix}-{i:02d}"
        out += [node(name, cpu="64"), gpu_slice(name, 1), *holding(f"{prefix}-{cls}-{i:02d}", name, ["gpu-0"], cls)]
    return out


def test_a_lone_pod_among_more_holders_than_are_priced_evicts_a_lowest_priority_one() -> None:
    # 64 nodes whose GPU a priority-1 pod holds, 6 whose GPU a priority-5 pod holds; a lone pod wanting
    # one GPU. kube-scheduler (70 nodes: every one a candidate) evicts a priority-1 pod, and so did
    # koordpy before 8093ca2 (all priced alike, verified by name). With shares counted for the first 64
    # holders only, each priority-1 node costs its victim while the six others were priced as evicting
    # nothing: they were verified first and a priority-5 pod went.
    solo = claiming(pod("solo", cpu="1", priority_class="high"), template_name="gpus")
    out = run(gpu_class(), template(count=1), *CLASSES, *one_gpu_nodes("a", 64, "low"), *one_gpu_nodes("z", 6, "mid"),
              solo)
    assert len(out.preempted) == 1 and out.preempted[0].startswith("default/a-low-"), out.preempted
    assert out.bound["default/solo"].startswith("a-")


def test_a_gang_among_many_gpu_holders_evicts_only_the_two_it_needs() -> None:
    # 100 nodes of one GPU each, every GPU held by a priority-1 pod; a gang of two, one GPU each (no
    # topology: the cluster is the one candidate). Two evictions serve it. Priced without the shares of
    # the holders past the 64th, the pricing evicted nobody, the plan of every victim in the cluster was
    # verified and only its first 64 were reprieved: 36 pods were evicted.
    out = run(gpu_class(), template(count=1), *CLASSES, *one_gpu_nodes("n", 100, "low"),
              *high(upstream_gang("g", 2)))
    assert len(out.preempted) == 2, (len(out.preempted), out.preempted[:4])
    assert sorted(out.bound) == ["default/g-0", "default/g-1"]


def test_a_rack_gang_is_priced_by_its_victims_devices_where_a_node_has_more_gpus_than_it_needs() -> None:
    # The shape of test_dra_gang_preemption's priced racks with 3 GPUs a node in racks r0..r3, each held by
    # a priority-5 pod, beside a priority-1 pod using 4 CPUs; rack rz has 2 GPUs, both held by one
    # priority-3 pod using 5 CPUs. A rack gang of two (4 CPUs and one GPU each). The device room of an
    # r-node is counted up to the job's size (2 of 3), so each priority-5 holder's share counted with it
    # alone staying (2 - 2) is 0: the r-racks were priced at their priority-1 pod and r0 evicted two
    # priority-5 pods where one priority-3 pod serves the gang.
    objs: list[Any] = [gpu_class(), template(count=1), *CLASSES]
    for i in range(4):
        name = f"r{i}-0"
        objs += [node(name, cpu="9", labels={RACK: f"r{i}"}), gpu_slice(name, 3),
                 pod(f"hog-{i}", cpu="4", priority_class="low", node_name=name, scheduler="other")]
        for d in range(3):
            objs += holding(f"mid-{i}-{d}", name, [f"gpu-{d}"], "mid", cpu="10m")
    objs += [node("rz-0", cpu="9", labels={RACK: "rz"}), gpu_slice("rz-0", 2),
             *holding("third", "rz-0", ["gpu-0", "gpu-1"], "third", cpu="5")]
    gang = [group("g", min_count=2, topology=RACK, priorityClassName="high"),
            *(claiming(member(f"g-{i}", cpu="4", group_name="g", priority_class="high"), template_name="gpus")
              for i in range(2))]
    out = run(*objs, *gang)
    assert out.preempted == ["default/third"], out.preempted
    assert out.bound == {"default/g-0": "rz-0", "default/g-1": "rz-0"}


def test_a_slow_count_of_the_device_room_leaves_the_verifying_placements_their_search_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Three nodes of one partitionable GPU, each held whole by a priority-1 pod; a gang of two "whole
    # else half": one eviction serves it (two halves on one node, found by the gang search at Reserve).
    # The count of the device room over the job's nodes is made to take the job's whole search budget
    # (as it does on a loaded machine with 3,000 such nodes). It was charged to the budget, so the
    # verifying placement's search had no time left, the one-victim plan failed, and the plan of every
    # victim in the cluster was verified instead: two pods went (2,936 of 3,000 on the large cluster).
    from koordpy.core import preemption
    from koordpy.core.claims import DeviceRules
    from koordpy.devices.allocator import Allocator

    skew = [0.0]
    init = Allocator.__init__

    def skewed(self: Allocator, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.clock = lambda: time.monotonic() + skew[0]
    monkeypatch.setattr(Allocator, "__init__", skewed)
    capacity = DeviceRules.capacity
    pricing = [False]

    def slow(self: DeviceRules, pods: Any, nodes: Any, mask: Any, *args: Any, **kwargs: Any) -> Any:
        if pricing[0] and int(mask.sum()) > 1:  # the room over the job's nodes, not a share's one node
            skew[0] += self.gang_budget
        return capacity(self, pods, nodes, mask, *args, **kwargs)
    monkeypatch.setattr(DeviceRules, "capacity", slow)
    room = preemption.Preemptor._device_room

    def flagged(self: preemption.Preemptor, *args: Any) -> Any:
        pricing[0] = True
        try:
            return room(self, *args)
        finally:
            pricing[0] = False
    monkeypatch.setattr(preemption.Preemptor, "_device_room", flagged)
    objs: list[Any] = [gpu_class(), whole_else_half(), *CLASSES]
    for i in range(3):
        name = f"n-{i}"
        body = claiming(pod(f"v-{i}", cpu="1", priority_class="low", node_name=name, scheduler="other"),
                        claim_name=f"v-{i}-gpus")
        body["metadata"]["uid"] = f"uid-v-{i}"
        made = claim(f"v-{i}-gpus", allocation={"devices": {"results": [
            {"request": "gpu", "driver": DRIVER, "pool": name, "device": "gpu-0"}]}},
            reservedFor=[{"resource": "pods", "name": f"v-{i}", "uid": f"uid-v-{i}"}])
        made["spec"] = whole_else_half()["spec"]["spec"]
        made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        objs += [node(name, cpu="64"), *partitionable(name), made, body]
    out = run(*objs, *high(upstream_gang("g", 2)))
    assert len(out.preempted) == 1, out.preempted
    assert len(set(out.bound.values())) == 1 and len(out.bound) == 2, out.bound


def test_victims_sharing_a_claim_are_each_priced_as_freeing_its_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    # One GPU whose claim is reserved for two priority-1 pods; a lone pod wanting a GPU. Either pod
    # staying keeps the GPU: each is priced as freeing it (counted with the first put back alone, the
    # second would have cost nothing, the claim held by the first).
    from koordpy.core import preemption

    seen: list[list[int]] = []
    room = preemption.Preemptor._device_room

    def captured(self: preemption.Preemptor, *args: Any) -> Any:
        got = room(self, *args)
        if got is not None:
            seen.append(sorted(got[1].tolist()))
        return got
    monkeypatch.setattr(preemption.Preemptor, "_device_room", captured)
    made = claim("both-gpus", count=1, allocation={"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": "n-0", "device": "gpu-0"}]}},
        reservedFor=[{"resource": "pods", "name": n, "uid": f"uid-{n}"} for n in ("a", "b")])
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    users = []
    for name in ("a", "b"):
        body = claiming(pod(name, cpu="1", priority_class="low", node_name="n-0", scheduler="other"),
                        claim_name="both-gpus")
        body["metadata"]["uid"] = f"uid-{name}"
        users.append(body)
    solo = claiming(pod("solo", cpu="1", priority_class="high"), template_name="gpus")
    out = run(gpu_class(), template(count=1), *CLASSES, node("n-0", cpu="64"), gpu_slice("n-0", 1), made, *users, solo)
    assert seen and seen[0] == [1, 1], seen
    assert sorted(out.preempted) == ["default/a", "default/b"]
