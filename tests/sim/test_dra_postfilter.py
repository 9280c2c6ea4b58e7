"""kube-scheduler v1.37.2's DynamicResources PostFilter, end to end through the simulator: a claim
allocated where its pod can no longer go, held by nobody else, is deallocated when the pod fits no node,
and the next cycle allocates it again (``koordpy.core.deallocation``)."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod, run
from tests.sim import test_dra
from tests.sim.test_dra import allocated_on, claiming, gpu_class, gpu_nodes, gpu_slice

GONE = "node-gone"


def _stale(reserved_for: list[dict[str, str]] | None = None, where: str = GONE,
           conditions: dict[str, Any] | None = None) -> dict[str, Any]:
    """Claim ``mine`` allocated all 8 GPUs of ``where`` by a scheduler (its finalizer)."""
    results = [{"request": "gpus", "driver": test_dra.DRIVER, "pool": where, "device": f"gpu-{d}", **(conditions or {})}
               for d in range(8)]
    status: dict[str, Any] = {"allocation": {"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [where]}]}]}}}
    if reserved_for:
        status["reservedFor"] = reserved_for
    made = test_dra.claim("mine", **status)
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    return made


def _with_uid(body: dict[str, Any], uid: str) -> dict[str, Any]:
    return {**body, "metadata": {**body["metadata"], "uid": uid}}


def test_a_claim_reserved_for_its_own_pod_alone_is_deallocated() -> None:
    # A binding cycle that wrote the reservation and then lost the node: reservedFor holds the pod itself.
    me = _with_uid(claiming(pod("p", cpu="1"), claim_name="mine"), "uid-p")
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"),
              _stale([{"resource": "pods", "name": "p", "uid": "uid-p"}]), me)
    assert out.bound == {"default/p": "node-a"}, out.pending
    assert allocated_on(out, "default/mine") == {"node-a"}


def test_a_claim_another_pod_holds_is_not_deallocated() -> None:
    # Someone else's reservation: the claim is not the pod's to give up; the pod waits.
    me = _with_uid(claiming(pod("p", cpu="1"), claim_name="mine"), "uid-p")
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"),
              _stale([{"resource": "pods", "name": "other", "uid": "uid-other"}]), me)
    assert "default/p" in out.pending
    assert allocated_on(out, "default/mine") == {GONE}


def test_no_claim_is_deallocated_when_no_node_reaches_the_device_filter() -> None:
    # node-a has too little CPU for the pod: kube-scheduler's NodeResourcesFit rejects it before
    # DynamicResources' Filter looks at the claim, so no claim is found unavailable and none is freed.
    out = run(node("node-a", cpu="1"), gpu_class(), gpu_slice("node-a"), _stale(),
              claiming(pod("p", cpu="2"), claim_name="mine"))
    assert "default/p" in out.pending
    assert allocated_on(out, "default/mine") == {GONE}


def test_a_claim_whose_device_binding_failed_is_deallocated_and_allocated_again() -> None:
    # Allocated on node-a, which the pod can reach, but a binding failure condition is true: Filter finds
    # the claim available on no node; PostFilter frees it and node-b's devices (no binding conditions) serve.
    failing = _stale(where="node-a", conditions={"bindingConditions": ["Ready"],
                                                 "bindingFailureConditions": ["Failed"]})
    failing["status"]["devices"] = [{"driver": test_dra.DRIVER, "pool": "node-a", "device": f"gpu-{d}",
                                     "conditions": [{"type": "Failed", "status": "True", "reason": "Broken",
                                                     "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
                                    for d in range(8)]
    out = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-b"), failing,
              claiming(pod("p", cpu="1"), claim_name="mine"))
    assert out.bound == {"default/p": "node-b"}, out.pending
    assert allocated_on(out, "default/mine") == {"node-b"}
