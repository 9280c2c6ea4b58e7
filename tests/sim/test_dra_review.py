"""Review of issue 30's DRA work (R1), end to end through the simulator: defects found against
kube-scheduler v1.37.2 and the ResourceClaim controller, each with the test that showed it."""

from __future__ import annotations

from typing import Any

from tests.builders import pod, priority_class, run
from tests.sim.test_dra import _running, claiming, gpu_class, gpu_nodes, gpu_slice, template


def _driver_allocated(body: dict[str, Any], node_name: str) -> list[dict[str, Any]]:
    """``body`` running on ``node_name`` with a claim of its own name (not made for it from a template,
    so not deleted with it) that a driver allocated: no delete-protection finalizer."""
    made, running = _running(body, node_name)
    name = body["metadata"]["name"]
    del made["metadata"]["ownerReferences"]
    made["metadata"]["finalizers"] = []
    running["spec"] = {**running["spec"], "resourceClaims": [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]}
    running["status"] = {}
    return [made, running]


def test_preemption_does_not_evict_a_pod_whose_claim_stays_allocated_when_it_goes() -> None:
    # The ResourceClaim controller clears only an allocation a scheduler made (its finalizer); a claim
    # not made for the victim is not deleted with it: its devices stay taken, the eviction frees nothing.
    low = claiming(pod("low", cpu="1", priority_class="low"), template_name="gpus")
    high = claiming(pod("high", cpu="1", priority_class="high"), template_name="gpus")
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), template(), priority_class("low", 1),
              priority_class("high", 1000), *_driver_allocated(low, "node-a"), high)
    assert out.preempted == []
    assert "default/high" not in out.bound
