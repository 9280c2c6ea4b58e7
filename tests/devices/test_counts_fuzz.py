"""Issue 31 item 3, from its review: the counts and the first fit against the search on clusters with devices that
reach several nodes (slices with a node selector, allNodes, per-device selection), incomplete pools,
binding conditions, several pools per node, devices in use anywhere."""

from __future__ import annotations

import random

import pytest

from koordpy.api.dra import Allocation, NodeSelection, ResourceClaim, ResourceSlice
from koordpy.devices.allocator import Allocator
from tests.devices.helpers import claim, dev, node, region_selector, result, slice_
from tests.devices.test_counts import agrees, allocator, counted, plain_claims, searched, shareless

NODES = [node(f"n{i}", region=f"region-{i % 2}") for i in range(4)]


def cluster(rng: random.Random) -> tuple[list[ResourceSlice], list[ResourceClaim]]:
    slices: list[ResourceSlice] = []
    taken: list[ResourceClaim] = []

    def devices(prefix: str) -> list:  # type: ignore[type-arg]
        out = []
        for i in range(rng.randint(0, 4)):
            extra = {}
            if rng.random() < 0.1:
                extra["binding"] = ["ready"]
            out.append(dev(f"{prefix}{i}", {"model": rng.choice("ab")}, **extra))  # type: ignore[arg-type]
        return out

    for n in NODES:
        if rng.random() < 0.8:
            ds = devices("d")
            slices.append(slice_(f"{n.name}-s", ds, node=n.name, pool=n.name))
            for d in ds:
                if rng.random() < 0.25:
                    taken.append(claim(f"t-{n.name}-{d.name}", allocation=Allocation(results=(
                        result("r", d.name, pool=n.name),))))
    # network-attached pools
    for k in range(rng.randint(0, 3)):
        ds = devices("x")
        how = rng.random()
        pool = f"net{k}"
        if how < 0.4:
            slices.append(slice_(f"{pool}-s", ds, pool=pool, selector=region_selector(f"region-{k % 2}")))
        elif how < 0.6:
            slices.append(slice_(f"{pool}-s", ds, pool=pool, all_nodes=True))
        elif how < 0.8:
            ds = [d.__class__(**{**{f: getattr(d, f) for f in d.__dataclass_fields__},
                                 "node": NodeSelection(node_name=rng.choice(NODES).name)}) for d in ds]
            slices.append(slice_(f"{pool}-s", ds, pool=pool, per_device=True))
        else:  # incomplete: announces two slices
            slices.append(slice_(f"{pool}-s", ds, pool=pool, all_nodes=True, count=2))
        for d in ds:
            if rng.random() < 0.25:
                taken.append(claim(f"t-{pool}-{d.name}", allocation=Allocation(results=(
                    result("r", d.name, pool=pool),))))
    return slices, taken


def drawn(seed: int) -> tuple[Allocator, list[ResourceClaim]]:
    rng = random.Random(seed)
    slices, taken = cluster(rng)
    return allocator(slices, taken), plain_claims(rng)


@pytest.mark.parametrize("seed", range(300))
def test_first_fit_is_the_search(seed: int) -> None:
    a, claims = drawn(seed)
    for n in NODES:
        assert shareless(a.allocate(n, claims, 1000.0)) == shareless(searched(a, n, claims)), (seed, n.name)


@pytest.mark.parametrize("seed", range(300))
def test_counts_are_pod_after_pod(seed: int) -> None:
    a, claims = drawn(seed)
    kind, counts, got = counted(a, claims, NODES)
    if got is None:
        return
    fits, odd = got
    for i, n in enumerate(NODES):
        if not odd[i]:
            agrees(a, counts, kind, NODES, claims, fits, i, (seed, n.name))
