"""Issue 30: a node whose only pool is invalid (a device name twice) says which of the pod's claims and
requests could not be met there, named as every other allocator reason names them, not an empty claim."""

from __future__ import annotations

from tests.builders import pod, run
from tests.sim.test_dra import claiming, gpu_class, gpu_nodes, gpu_slice, template


def test_the_invalid_pool_message_names_the_claim_and_request() -> None:
    # Two slices of one pool, each with gpu-0: the pool is invalid (a device name twice).
    one, two = gpu_slice("node-a", n=1), gpu_slice("node-a", n=1)
    two["metadata"]["name"] = "node-a-gpus-2"
    for s in (one, two):
        s["spec"]["pool"]["resourceSliceCount"] = 2
    out = run(gpu_nodes("node-a"), gpu_class(), one, two, template(count=1),
              claiming(pod("p", cpu="1"), template_name="gpus"))
    said = out.pending["default/p"]
    assert "resourceclaim :" not in said
    assert ("cannot allocate all claims (claim gpus, request gpus: invalid resource pool gpu.example.com/node-a: "
            in said), said
