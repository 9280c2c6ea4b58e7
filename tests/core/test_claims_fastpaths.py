"""The device seam's short cuts, held to the rules they shorten: a pod whose claims are all allocated
already goes where every allocation's node selector admits it (``admits``), whatever mix of pinned
names and label terms the allocations carry; whether a node is served by any slice (``Pools.serves``)
is what every slice's own node selection says."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.api.dra import ResourceClaim, ResourceSlice
from koordpy.api.objects import Node, Pod
from koordpy.core.claims import CLAIM_UNAVAILABLE, DeviceRules, admits
from koordpy.devices.pools import Pools, node_matches
from tests.builders import node, pod
from tests.core.test_claims import devices
from tests.sim.test_dra import DRIVER, claim, gpu_slice

NAMES = ("n0", "n1", "n2", "n3")
RACKS = {"n0": "r0", "n1": "r0", "n2": "r1", "n3": "r1"}
NODES = [Node.from_raw(node(n, cpu="64", labels={"rack": RACKS[n]})) for n in NAMES]

# A node selector as an allocation or a slice carries one: by name (pinned), by label, or both in one term.
_by_name = st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True).map(
    lambda names: {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                           "values": names}]}]})
_by_label = st.sampled_from(["r0", "r1"]).map(
    lambda rack: {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": [rack]}]}]})
_both = st.tuples(st.sampled_from(NAMES), st.sampled_from(["r0", "r1"])).map(
    lambda t: {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [t[0]]}],
                                      "matchExpressions": [{"key": "rack", "operator": "In", "values": [t[1]]}]}]})
selectors = st.one_of(st.none(), _by_name, _by_label, _both)


def _allocated(name: str, selector: dict[str, Any] | None) -> dict[str, Any]:
    allocation: dict[str, Any] = {"devices": {"results": [
        {"request": "gpus", "driver": DRIVER, "pool": "n0", "device": f"gpu-{name}"}]}}
    if selector is not None:
        allocation["nodeSelector"] = selector
    return claim(name, count=1, allocation=allocation)


def _claimer(names: list[str]) -> Pod:
    body = pod("p", cpu="1")
    body["spec"]["resourceClaims"] = [{"name": f"e{i}", "resourceClaimName": n} for i, n in enumerate(names)]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": f"e{i}"} for i in range(len(names))]
    return Pod.from_raw(body)


@settings(max_examples=200, deadline=None)
@given(st.lists(selectors, min_size=1, max_size=3))
def test_a_pod_with_allocated_claims_goes_where_every_allocation_admits_it(chosen: list[Any]) -> None:
    raws = [_allocated(f"c{i}", sel) for i, sel in enumerate(chosen)]
    rules = DeviceRules(devices(*raws, slices=tuple(gpu_slice(n) for n in NAMES)))
    allocations = [ResourceClaim.from_raw(r).allocation for r in raws]
    want = [None if all(a is not None and admits(a, n) for a in allocations) else CLAIM_UNAVAILABLE for n in NODES]
    assert rules.reasons(_claimer([f"c{i}" for i in range(len(chosen))]), NODES) == want


def _slice(i: int, how: str, selector: dict[str, Any] | None, target: str) -> dict[str, Any]:
    raw = gpu_slice(f"s{i}", n=2)
    spec = raw["spec"]
    del spec["nodeName"]
    if how == "name":
        spec["nodeName"] = target
    elif how == "all":
        spec["allNodes"] = True
    elif how == "selector":
        spec["nodeSelector"] = selector or {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    else:  # per device: one device for the target by name, the other by the selector
        spec["perDeviceNodeSelection"] = True
        spec["devices"][0]["nodeName"] = target
        if selector is not None:
            spec["devices"][1]["nodeSelector"] = selector
        else:  # a selector no node matches
            spec["devices"][1]["nodeSelector"] = {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r9"]}]}]}
    return raw


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["name", "all", "selector", "device"]), selectors,
                          st.sampled_from(NAMES)), max_size=4))
def test_a_node_is_served_exactly_when_some_slice_selects_it(made: list[Any]) -> None:
    slices = [ResourceSlice.from_raw(_slice(i, how, sel, target)) for i, (how, sel, target) in enumerate(made)]
    pools = Pools.build(devices(slices=tuple(_slice(i, how, sel, target) for i, (how, sel, target) in enumerate(made))))
    for n in NODES:
        want = any(node_matches(s.node, n) if s.node is not None
                   else any(d.node is not None and node_matches(d.node, n) for d in s.devices) for s in slices)
        assert pools.serves(n) is want, n.name
