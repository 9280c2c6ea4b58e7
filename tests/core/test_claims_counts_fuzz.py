"""Issue 31 item 3, from its review in the core: DeviceRules.reasons and capacity on arrays against the allocator node
by node, after reserves, rollbacks and preemption what-ifs (release), with network-attached GPUs."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from koordpy.api.objects import Node
from koordpy.core.claims import DeviceRules
from koordpy.core.txn import Txn
from tests.builders import node
from tests.core.test_claims import claimer, devices
from tests.core.test_claims_counts import held
from tests.sim.test_dra import claim, gpu_slice

RELEASED: list[bool] = []
NODES = [Node.from_raw(node(f"n{i}", cpu="64", labels={"rack": f"r{i % 2}"})) for i in range(5)]


def net_slice(name: str, rack: str, n: int) -> dict[str, Any]:
    s = gpu_slice(name, n=n)
    del s["spec"]["nodeName"]
    s["metadata"]["name"] = name
    s["spec"]["pool"]["name"] = name
    s["spec"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": [rack]}]}]}
    return s


@pytest.mark.parametrize("seed", range(80))
def test_after_reserves_rollbacks_and_releases(seed: int) -> None:
    rng = random.Random(seed)
    slices = [gpu_slice(n.name, n=rng.randint(1, 6)) for n in NODES[:-1]]
    if rng.random() < 0.7:
        slices.append(net_slice("net-a", "r0", rng.randint(1, 6)))
    used = []
    for s in slices[:2]:
        name = s["spec"]["pool"]["name"]
        if "nodeName" in s["spec"]:
            gpus = [i for i in range(len(s["spec"]["devices"])) if rng.random() < 0.3]
            if gpus:
                used.append(held(f"held-{name}", name, gpus))
    count = rng.randint(1, 3)
    pods = [claimer(f"p{i}", f"c{i}") for i in range(6)]
    fresh = [claim(f"c{i}", count=count) for i in range(6)]
    for c in fresh:
        c["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    rules = DeviceRules(devices(*used, *fresh, slices=tuple(slices)))
    mask = np.ones(len(NODES), dtype=np.bool_)
    txn = Txn()
    released: list[bool] = []
    for step in range(8):
        p = pods[0]
        found = rules.resolve(p)
        if found.fresh:
            assert rules.reasons(p, NODES, mask) == rules._node_reasons(found, NODES, False), (seed, step)
            assert rules.reasons(p, NODES, mask, loose=True) == rules._node_reasons(found, NODES, True), (seed, step)
        op = rng.random()
        if op < 0.6:
            q = rng.choice(pods[1:])
            rules.reserve(q, rng.choice(NODES), txn)
        elif op < 0.8:
            txn.rollback(rng.randint(0, txn.savepoint()))
        else:
            placed = [q for q in pods[1:] if rules.claims[f"default/c{q.name[1:]}"].allocation is not None]
            if placed:
                before = rules.in_use.version
                rules.release([rng.choice(placed)], txn)
                released.append(rules.in_use.version != before)
    RELEASED.extend(released)



def test_zz_the_fuzz_released_devices() -> None:
    """Guards the test above (run after it): some of its what-ifs freed devices."""
    assert any(RELEASED)
