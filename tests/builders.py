"""Raw Kubernetes objects for tests, shaped as kubectl would send them."""

from __future__ import annotations

import json
from typing import Any

from koordpy.sim.simulator import SimulationResult, World, simulate


def node(name: str, cpu: str = "8", memory: str = "32Gi", labels: dict[str, str] | None = None,
         extra: dict[str, str] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110", **(extra or {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


def spine_block_nodes(layout: dict[str, dict[str, list[int]]], cpu: str = "8") -> list[dict[str, Any]]:
    out = []
    for spine, blocks in layout.items():
        for block, ids in blocks.items():
            for i in ids:
                out.append(node(f"node-{i}", cpu=cpu, labels={"network.topology.nvidia.com/spine": spine,
                                                             "network.topology.nvidia.com/block": block}))
    return out


SEED_12 = {"spine-0": {"block-0": [0, 1, 2], "block-1": [3, 4]},
           "spine-1": {"block-2": [5, 6], "block-3": [7, 8]},
           "spine-2": {"block-4": [9, 10, 11]}}


def cnt(*layers: tuple[str, str | None, str | None]) -> dict[str, Any]:
    """``(layer, parent, label key)`` top-down."""
    spec = []
    for layer, parent, key in layers:
        item: dict[str, Any] = {"topologyLayer": layer}
        if parent:
            item["parentTopologyLayer"] = parent
        if key:
            item["labelKey"] = [key]
        spec.append(item)
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"}, "spec": {"networkTopologySpec": spec}}


SPINE_BLOCK_CNT = cnt(("SpineLayer", None, "network.topology.nvidia.com/spine"),
                      ("BlockLayer", "SpineLayer", "network.topology.nvidia.com/block"),
                      ("NodeTopologyLayer", "BlockLayer", None))


def pod(name: str, cpu: str = "8", memory: str = "1Gi", *, group: str | None = None, index: int | None = None,
        node_name: str | None = None, annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None, scheduler: str = "koordpy", priority_class: str | None = None,
        **spec_extra: Any) -> dict[str, Any]:
    ann = dict(annotations or {})
    if index is not None:
        ann["gang.scheduling.koordinator.sh/network-topology-index"] = str(index)
    lab = dict(labels or {})
    if group:
        lab["pod-group.scheduling.sigs.k8s.io"] = group
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [
        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": lab, "annotations": ann}, "spec": spec}


def unlike_spine() -> list[dict[str, Any]]:
    """One spine s1: four 8-GPU nodes in block b1 and a CPU-only node in block b2."""
    def where(block: str) -> dict[str, str]:
        return {"network.topology.nvidia.com/spine": "s1", "network.topology.nvidia.com/block": block}

    gpu = [node(f"gpu-{i}", labels=where("b1"), extra={"nvidia.com/gpu": "8"}) for i in range(4)]
    return [*gpu, node("cpu-0", labels=where("b2"))]


def gpu_workers(n: int) -> list[dict[str, Any]]:
    """Members of gang "worker", 1 CPU and 8 GPUs each, ranked after a master at index 0."""
    workers = []
    for i in range(n):
        w = pod(f"worker-{i}", cpu="1", group="worker", index=i + 1)
        w["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "8"
        workers.append(w)
    return workers


def podgroup(name: str, min_member: int, *, gather: list[dict[str, Any]] | None = None,
             groups: list[str] | None = None, timeout: int | None = 300,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    ann = dict(annotations or {})
    if gather is not None:
        ann["gang.scheduling.koordinator.sh/network-topology-spec"] = json.dumps({"gatherStrategy": gather})
    if groups is not None:
        ann["gang.scheduling.koordinator.sh/groups"] = json.dumps(groups)
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "annotations": ann}, "spec": spec}


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority") -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name, "labels": {"koordpy-test": "true"}},
            "value": value, "preemptionPolicy": policy}


def run(*objects: dict[str, Any] | list[dict[str, Any]]) -> SimulationResult:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return simulate(World.from_objects([("test", o) for o in flat]))


class FakeApiClient:
    """Enough of an ApiClient for the generated API classes' constructors (unit tests of the shell)."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(name)
