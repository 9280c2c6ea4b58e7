"""Issue 31 item 3 in the core's device seam: ``DeviceRules.reasons`` and ``DeviceRules.capacity`` count
plain claims on arrays (``koordpy.devices.counts``) and give, node for node, what asking the allocator
node by node gives: the same reasons in the same words, the same per-node caps, over random states of
the devices in use, with nodes no pool reaches, tainted devices (left to the allocator) and pods that
ask for a second claim."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from koordpy.api.objects import Node, Pod
from koordpy.core.claims import DeviceRules
from koordpy.devices.counts import Counts
from tests.builders import node
from tests.core.test_claims import claimer, devices
from tests.sim.test_dra import DRIVER, claim, gpu_slice

NODES = [Node.from_raw(node(f"n{i}", cpu="64")) for i in range(6)]


def held(name: str, node_name: str, gpus: list[int]) -> dict[str, Any]:
    results = [{"request": "gpus", "driver": DRIVER, "pool": node_name, "device": f"gpu-{d}"} for d in gpus]
    return claim(name, count=len(gpus), allocation={"devices": {"results": results}, "nodeSelector": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}},
        reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}])


def world(rng: random.Random, count: int, selector: str | None) -> tuple[DeviceRules, list[Pod]]:
    slices = [gpu_slice(n.name, n=rng.randint(1, 8), model=rng.choice(["h100", "a100"]), taint=rng.random() < 0.15)
              for n in NODES[:-1]]  # the last node: no slice reaches it
    used = []
    for s in slices:
        name = s["spec"]["nodeName"]
        gpus = [i for i in range(len(s["spec"]["devices"])) if rng.random() < 0.3]
        if gpus:
            used.append(held(f"held-{name}", name, gpus))
    pods = [claimer(f"p{i}", f"c{i}") for i in range(3)]
    fresh = [claim(f"c{i}", count=count, selector=selector) for i in range(3)]
    return DeviceRules(devices(*used, *fresh, slices=tuple(slices))), pods


@pytest.mark.parametrize("seed", range(120))
def test_reasons_and_caps_on_arrays_are_the_allocators_node_by_node(seed: int) -> None:
    rng = random.Random(seed)
    selector = rng.choice([None, 'device.attributes["gpu.example.com"].model == "h100"'])
    rules, pods = world(rng, rng.randint(1, 4), selector)
    found = rules.resolve(pods[0])
    assert rules.plain_kind(found) is not None
    mask = np.array([rng.random() < 0.8 for _ in NODES], dtype=np.bool_)
    arrays = rules.reasons(pods[0], NODES, mask)
    one_by_one = rules._node_reasons(found, [n for n, ok in zip(NODES, mask, strict=True) if ok], False)
    assert arrays == one_by_one, seed
    assert rules.reasons(pods[0], NODES, mask, loose=True) == rules._node_reasons(
        found, [n for n, ok in zip(NODES, mask, strict=True) if ok], True), seed
    caps = rules.capacity(pods, NODES, mask, len(pods))
    assert caps is not None
    for i, n in enumerate(NODES):
        if mask[i]:
            spec = tuple(c.spec for c in found.fresh)
            want = rules.allocator.capacity(n, spec, len(pods), 0.0) if rules.served(n) else 0
            assert int(caps[i]) == want, (seed, n.name)
        else:
            assert int(caps[i]) == 0


def test_the_array_path_is_the_one_taken() -> None:
    """Guards the test above from comparing the per-node path with itself."""
    rng = random.Random(1)
    rules, pods = world(rng, 2, None)
    asked: list[int] = []
    fit = Counts.fit

    def counting(self: Counts, *args: Any) -> Any:
        asked.append(1)
        return fit(self, *args)
    Counts.fit = counting  # type: ignore[method-assign,assignment]
    try:
        rules.reasons(pods[0], NODES, np.ones(len(NODES), dtype=np.bool_))
        rules.capacity(pods, NODES, np.ones(len(NODES), dtype=np.bool_), len(pods))
    finally:
        Counts.fit = fit  # type: ignore[method-assign]
    assert len(asked) == 2
