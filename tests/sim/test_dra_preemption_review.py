"""Review of 9803105 and 8093ca2 (preemption counting devices): the victims a job preempts for devices
when more pods hold devices than the pricing counts shares for (MAX_SHARES), and when a node has more
devices than the job needs. Each test names what it checks; kube-scheduler's DefaultPreemption is the
reference for a lone pod (the candidate whose highest-priority victim is lowest)."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod, priority_class, run
from tests.core.dialects.test_upstream import RACK, group, member
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, gpu_slice, template, upstream_gang
from tests.sim.test_dra_gang_preemption import high

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
    # r-node is counted up to the job's size (2 of 3), so each priority-5 holder's share (2 - 2 while it
    # alone stays) is 0: the r-racks were priced at their priority-1 pod and r0 evicted two priority-5
    # pods where one priority-3 pod serves the gang.
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
