"""Issue 31 item 3, from its review: cases where the array counts or the first fit part from what
the allocator, asked node by node, gives."""

from __future__ import annotations

import numpy as np

from koordpy.api.objects import Node
from koordpy.core.claims import DeviceRules
from koordpy.core.verdicts import PreFilterReason
from tests.builders import node
from tests.core.test_claims import claimer, devices
from tests.sim.test_dra import DRIVER, claim, gpu_slice
from tests.sim.test_dra_counts_review import bare_slice

NODES = [Node.from_raw(node(f"n{i}", cpu="64")) for i in range(3)]
ALL = np.ones(len(NODES), dtype=np.bool_)


def test_second_pod_of_a_template_is_named_as_the_pod_names_its_claim() -> None:
    """Two pods whose claims have the same spec and entry name share one PodClaims key, so one plain
    Kind; its requests carry the first pod's claim key, and the second pod's reason names that
    claim (``default/c0``) instead of its own entry (``gpus``)."""
    slices = tuple(gpu_slice(n.name, n=2) for n in NODES)
    rules = DeviceRules(devices(claim("c0", count=4), claim("c1", count=4), slices=slices))
    p0, p1 = claimer("p0", "c0"), claimer("p1", "c1")
    assert rules.key(p0) == rules.key(p1)
    rules.reasons(p0, NODES, ALL)
    got = rules.reasons(p1, NODES, ALL)
    want = rules._node_reasons(rules.resolve(p1), NODES, False)
    assert got == want


def test_a_cel_error_on_one_node_ends_the_attempt_on_every_node() -> None:
    """kube-scheduler: a Filter error on any node ends the pod's attempt (the old path gave every node
    the FilterError). With the counts, only the odd node gets it and the others fit."""
    selector = f'device.attributes["{DRIVER}"].model == "h100"'
    slices = (gpu_slice("n0", n=2), bare_slice("n1", 2), gpu_slice("n2", n=2))
    rules = DeviceRules(devices(claim("c0", count=1, selector=selector), slices=slices))
    p0 = claimer("p0", "c0")
    want = rules._node_reasons(rules.resolve(p0), NODES, False)
    assert all(isinstance(w, PreFilterReason) for w in want), want  # the node-by-node answer
    got = rules.reasons(p0, NODES, ALL)
    assert got == want


def test_a_device_a_stale_share_holds_is_free_for_the_filter_as_for_the_allocator() -> None:
    """gpu-0 does not allow multiple allocations, yet an allocation holds it with a shareID (made while
    it did): kube-scheduler's deviceInUse (AllocatedDevices) and koordpy's search (``InUse.exclusive``)
    count it free, so a claim for both GPUs is allocated on n0; the counts' taken array
    (``InUse.allocated``) says one GPU is free."""
    results = [{"request": "gpus", "driver": DRIVER, "pool": "n0", "device": "gpu-0",
                "shareID": "6f1e9e8a-2b9a-4c1e-9a51-3c3b7a1d2e4f"}]
    shared = claim("old", count=1, allocation={"devices": {"results": results}},
                   reservedFor=[{"resource": "pods", "name": "old", "uid": "uid-old"}])
    rules = DeviceRules(devices(shared, claim("c0", count=2), slices=(gpu_slice("n0", n=2),)))
    p0 = claimer("p0", "c0")
    got = rules.allocator.allocate(NODES[0], rules.resolve(p0).fresh, 0.0)
    assert isinstance(got, list), got
    assert rules.reasons(p0, [NODES[0]]) == [None]
