"""Issue 31: job-level preemption for a gang whose members claim parts of a partitionable device, end to
end in the simulator. A low-priority pod holding half of the only GPU is the victim a gang of two
"whole else half" members needs (each then gets a half), as kube-scheduler's DefaultPreemption with
DynamicResources would find for a lone pod; a gang that no eviction can serve is told so and evicts
nothing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod, priority_class, run
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, upstream_gang, volcano_gang
from tests.sim.test_dra_gang_search import partitionable, whole_else_half

CLASSES = [priority_class("low", 1), priority_class("high", 1000)]
HALVES = [f"{DRIVER}/node-a/gpu-0-half-0", f"{DRIVER}/node-a/gpu-0-half-1"]


def holding(name: str, node_name: str, device: str, cls: str = "low", cpu: str = "1") -> list[dict[str, Any]]:
    """Pod ``name`` running on ``node_name`` (priority class ``cls``) with its claim allocated ``device``
    there and reserved for it (kube-scheduler's delete-protection finalizer: its going frees it)."""
    body = claiming(pod(name, cpu=cpu, priority_class=cls, node_name=node_name, scheduler="other"),
                    claim_name=f"{name}-gpus")
    body["metadata"]["uid"] = f"uid-{name}"
    made = claim(f"{name}-gpus", allocation={"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device}]}},
        reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}])
    made["spec"] = whole_else_half()["spec"]["spec"]
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return [made, body]


def high(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gang's pods (and a Kubernetes PodGroup, whose members must share its priority) in class high."""
    for o in objs:
        if o["kind"] == "Pod" or o["apiVersion"].startswith("scheduling.k8s.io"):
            o["spec"]["priorityClassName"] = "high"
    return objs


def whole_only() -> dict[str, Any]:
    body = whole_else_half()
    request = body["spec"]["spec"]["devices"]["requests"][0]
    request["firstAvailable"] = request["firstAvailable"][:1]
    return body


@pytest.mark.parametrize("make", [upstream_gang, volcano_gang])
def test_a_gang_of_two_halves_preempts_the_pod_holding_the_other_half(make: Any) -> None:
    # One GPU, published whole and as two halves over one counter set; a low-priority pod holds half-0.
    # Each member alone fits (half-1 is free), the two together do not: the count of what the node's
    # devices take stopped the second, which said nothing and looked unresolvable, so nobody preempted.
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"), *high(make("g", 2)))
    assert out.preempted == ["default/low"], out.pending
    assert out.bound == {"default/g-0": "node-a", "default/g-1": "node-a"}, out.pending
    assert out.allocations is not None
    assert sorted(d for k in ("default/g-0-gpus", "default/g-1-gpus") for d in out.allocations[k]) == HALVES
    assert "default/low-gpus" not in out.allocations


def test_a_lone_pod_wanting_the_whole_device_preempts_the_pod_holding_a_half() -> None:
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_only(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"),
              claiming(pod("solo", cpu="1", priority_class="high"), template_name="gpus"))
    assert out.preempted == ["default/low"], out.pending
    assert out.bound == {"default/solo": "node-a"}
    assert out.allocations == {"default/solo-gpus": [f"{DRIVER}/node-a/gpu-0"]}


@pytest.mark.parametrize("make", [upstream_gang, volcano_gang])
def test_a_gang_no_eviction_can_serve_evicts_nothing_and_says_why(make: Any) -> None:
    # Three members, two halves at most: evicting the low pod cannot make room for the third.
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *CLASSES,
              *holding("low", "node-a", "gpu-0-half-0"), *high(make("g", 3)))
    assert not out.preempted
    assert not out.bound
    said = out.pending["default/g-1"]
    assert said.startswith("0/1 nodes are available: 1 cannot allocate all claims (too few devices left once the "
                           "members of its job before it take theirs). preemption: not helpful"), said
