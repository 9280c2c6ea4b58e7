"""Review of issue 30's device seam (R1): the topology search's device count (``DeviceRules.capacity``)
never underestimates what a node takes of a job whose members differ."""

from __future__ import annotations

from typing import Any

import numpy as np

from koordpy.api.objects import Pod
from koordpy.core.claims import DeviceRules
from tests.builders import pod
from tests.core.test_claims import N0, claimer, devices
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
