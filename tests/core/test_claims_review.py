"""Review of issue 30's device seam (R1): the topology search's device count (``DeviceRules.capacity``)
never underestimates what a node takes of a job whose members differ."""

from __future__ import annotations

from typing import Any

import numpy as np

from koordpy.api.dra import ResourceClaim
from koordpy.api.objects import Pod
from koordpy.core.claims import CLAIM_UNAVAILABLE, DeviceRules
from koordpy.core.txn import Txn
from tests.builders import pod
from tests.core.test_claims import N0, N1, claimer, devices
from tests.sim.test_dra import DRIVER, claim, gpu_slice


def _two_models() -> dict[str, Any]:
    """Node n0 with 8 a100 and 8 h100 GPUs in one pool."""
    a, h = gpu_slice("n0", model="a100"), gpu_slice("n0")
    for d in h["spec"]["devices"]:
        d["name"] = d["name"].replace("gpu", "h")
    a["spec"]["devices"] += h["spec"]["devices"]
    return a


def test_members_claiming_different_devices_of_one_node_are_counted_together() -> None:
    # Before: the count of the kind the node suits best (1), so the two members could not share it.
    a = claim("a", 8, f'device.attributes["{DRIVER}"].model == "a100"')
    h = claim("h", 8, f'device.attributes["{DRIVER}"].model == "h100"')
    rules = DeviceRules(devices(a, h, slices=(_two_models(),)))
    got = rules.capacity([claimer("p", "a"), claimer("q", "h")], [N0], np.array([True]), 2)
    assert got is not None and got.tolist() == [2]


def test_a_member_without_claims_is_counted_not_a_reason_to_count_nothing() -> None:
    # Before: None (no count at all), so the search put two 8-GPU workers on one node.
    rules = DeviceRules(devices(claim("w0"), claim("w1")))
    launcher = Pod.from_raw(pod("launcher", cpu="1"))
    got = rules.capacity([launcher, claimer("w0", "w0"), claimer("w1", "w1")], [N0], np.array([True]), 3)
    assert got is not None and got.tolist() == [2]  # one worker and the launcher


def _binding(failed: bool) -> dict[str, Any]:
    """Claim ``bound`` allocated on n0 (a device with binding conditions), reserved for nobody: its
    device's failure condition true (``failed``), else its binding conditions still unmet."""
    made = claim("bound", 1, allocation={
        "devices": {"results": [{"request": "gpus", "driver": DRIVER, "pool": "n0", "device": "gpu-0",
                                 "bindingConditions": ["Ready"], "bindingFailureConditions": ["Failed"]}]},
        "allocationTimestamp": "2026-01-01T00:00:00Z"})
    made["status"]["devices"] = [{"driver": DRIVER, "pool": "n0", "device": "gpu-0",
                                  "conditions": [{"type": "Failed", "status": "True" if failed else "False",
                                                  "reason": "R", "message": "m",
                                                  "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]
    return made


def test_an_allocated_claim_whose_binding_failed_or_timed_out_is_not_available_on_any_node() -> None:
    # kube-scheduler's Filter: a claim allocated already whose device binding failed, or whose binding
    # conditions are not met after the binding timeout, is "not available on the node". Before, only
    # the allocation's node selector was looked at, and the pod was bound to a claim whose binding failed.
    failed = DeviceRules(devices(_binding(failed=True)))
    assert failed.reasons(claimer("p", "bound"), [N0]) == [CLAIM_UNAVAILABLE]
    waiting = DeviceRules(devices(_binding(failed=False)))
    start = ResourceClaim.from_raw(_binding(failed=False)).allocation
    assert start is not None and start.timestamp is not None
    waiting.now = start.timestamp + 60
    assert waiting.reasons(claimer("p", "bound"), [N0]) == [None]  # within the timeout: it may still bind
    late = DeviceRules(devices(_binding(failed=False)))
    late.now = start.timestamp + 601
    assert late.reasons(claimer("p", "bound"), [N0]) == [CLAIM_UNAVAILABLE]
    assert late.reserve(claimer("p", "bound"), N0, Txn()) == CLAIM_UNAVAILABLE


def test_a_binding_that_times_out_while_the_device_state_stands_still_is_seen() -> None:
    # The per-node answers are cached while no device changes: the timeout is part of their key.
    rules = DeviceRules(devices(_binding(failed=False)))
    start = ResourceClaim.from_raw(_binding(failed=False)).allocation
    assert start is not None and start.timestamp is not None
    rules.now = start.timestamp + 60
    assert rules.reasons(claimer("p", "bound"), [N0]) == [None]
    rules.now = start.timestamp + 601
    assert rules.reasons(claimer("p", "bound"), [N0]) == [CLAIM_UNAVAILABLE]


def test_a_node_whose_labels_change_is_asked_again_while_the_devices_stand_still() -> None:
    # The view keeps the device rules while no DRA object changes; their answers per node were kept by
    # node name, so a node labelled into a slice's nodeSelector stayed "no devices" until a device changed.
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World
    from tests.builders import node
    from tests.sim.test_dra import claiming, gpu_class

    rack = gpu_slice("rack")
    del rack["spec"]["nodeName"]
    rack["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}

    def world(labels: dict[str, str]) -> World:
        objs = [node("n0", cpu="8", labels=labels), gpu_class(), rack, claim("c", 1),
                claiming(pod("p", cpu="1"), claim_name="c")]
        return World.from_objects([("t", o) for o in objs])

    state = SchedulerState()
    before = world({})
    assert schedule(before.snapshot(frozenset({"koordpy"})), state, before.now).binds == []
    after = world({"rack": "r1"})
    assert [b.node for b in schedule(after.snapshot(frozenset({"koordpy"})), state, after.now + 1).binds] == ["n0"]


def test_a_shared_device_taken_with_a_node_local_one_is_taken_for_every_node() -> None:
    # An allocation with a node-local device is pinned to that node by name, yet a network-attached
    # device it also took is visible from other nodes: their cached answers must expire too. Before,
    # n1 still said the channel was free after pod a took it on n0.
    from tests.sim.test_dra import gpu_class

    channel = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "fabric"},
               "spec": {"driver": DRIVER, "allNodes": True,
                        "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                        "devices": [{"name": "channel-0", "attributes": {"kind": {"string": "channel"}}}]}}

    kind = f'device.attributes["{DRIVER}"].?kind.orValue("")'

    def both(name: str) -> dict[str, Any]:
        made = claim(name, 1, f'{kind} != "channel"')
        made["spec"]["devices"]["requests"].append({"name": "channel", "exactly": {
            "deviceClassName": DRIVER, "selectors": [{"cel": {"expression": f'{kind} == "channel"'}}]}})
        return made

    rules = DeviceRules(devices(both("a"), both("b"), classes=(gpu_class(),),
                                slices=(gpu_slice("n0"), gpu_slice("n1"), channel)))
    assert rules.reasons(claimer("b", "b"), [N0, N1]) == [None, None]
    assert rules.reserve(claimer("a", "a"), N0, Txn()) is None
    assert all(r is not None for r in rules.reasons(claimer("b", "b"), [N0, N1]))
