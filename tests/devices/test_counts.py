"""Issue 31 item 3: the array counts (``koordpy.devices.counts``) and the allocator's first fit
(``Allocator._first_fit``) against the allocator's own search, on random small clusters.

- ``allocate`` gives the same allocations (or the same reason) with its first fit as with the search
  alone, for plain claims and for any other (the first fit must step aside for those);
- per node not ``odd``: ``Counts.fit`` equals allocating pod after pod until the node says no, and
  ``Counts.reasons`` equals the reason the allocator gives for one more pod;
- a node whose candidates are not all plain (shares, counters, taints, a capacity policy) is ``odd``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from koordpy.api.dra import (
    Allocation,
    Capacity,
    CapacityPolicy,
    CounterConsumption,
    CounterSet,
    DeviceConstraint,
    Devices,
    DeviceTaint,
    ResourceClaim,
    ResourceSlice,
)
from koordpy.api.objects import Node
from koordpy.devices.allocator import Allocator
from koordpy.devices.counts import Counts, Kind, plain
from koordpy.devices.pools import Pools
from koordpy.devices.reasons import Unallocatable
from koordpy.devices.state import InUse
from tests.devices.helpers import CLASS_A, claim, cls, dev, node, q, req, result, slice_
from tests.devices.test_allocator_random import random_claims
from tests.devices.test_allocator_random import world as single_node_world

NODES = [node(f"n{i}") for i in range(4)]
MODEL = 'device.attributes["driver-a"].model == "{}"'


def cluster(rng: random.Random, odd: float) -> tuple[list[ResourceSlice], list[ResourceClaim]]:
    """A few nodes with a pool of 0-6 devices each (models a/b; with chance ``odd`` a device that is not
    plain), some of them allocated."""
    slices, taken = [], []
    for n in NODES:
        devices = []
        for i in range(rng.randint(0, 6)):
            kind = rng.random()
            extra: dict[str, object] = {}
            if kind < odd:
                extra = rng.choice([{"multi": True}, {"taints": [DeviceTaint(key="t", effect="NoSchedule")]},
                                    {"capacity": {"m": Capacity(q(4), CapacityPolicy(default=q(1)))}},
                                    {"counters": [CounterConsumption("cs", {"mem": q(1)})]}])
            devices.append(dev(f"d{i}", {"model": rng.choice("ab")}, **extra))  # type: ignore[arg-type]
        if any(d.consumes_counters for d in devices):  # the pool's counters in a slice of their own
            slices.append(slice_(f"{n.name}-s", devices, node=n.name, pool=n.name, count=2))
            slices.append(slice_(f"{n.name}-t", [], node=n.name, pool=n.name, count=2,
                                 counters=[CounterSet("cs", {"mem": q(rng.randint(1, 4))})]))
        else:
            slices.append(slice_(f"{n.name}-s", devices, node=n.name, pool=n.name))
        for d in devices:
            if rng.random() < 0.3 and not d.allow_multiple_allocations:
                taken.append(claim(f"taken-{n.name}-{d.name}",
                                   allocation=Allocation(results=(result("r", d.name, pool=n.name),))))
    return slices, taken


def plain_claims(rng: random.Random) -> list[ResourceClaim]:
    """One or two claims of one or two ExactCount requests, some by model."""
    out = []
    for c in range(rng.randint(1, 2)):
        requests = [req(f"r{r}", count=rng.randint(1, 3),
                        selectors=[MODEL.format(rng.choice("ab"))] if rng.random() < 0.4 else [])
                    for r in range(rng.randint(1, 2))]
        out.append(claim(f"c{c}", *requests))
    return out


def allocator(slices: list[ResourceSlice], taken: list[ResourceClaim]) -> Allocator:
    devices = Devices(classes={CLASS_A: cls()}, slices={s.name: s for s in slices}, taint_rules={})
    ids = iter(range(1, 10**6))
    return Allocator(Pools.build(devices), devices.classes, InUse.from_claims(taken),
                     share_id=lambda: f"share-{next(ids)}")


def shareless(got: object) -> object:
    """Allocations with their share ids blanked (each allocate draws new ones)."""
    if not isinstance(got, list):
        return got
    return [replace(a, results=tuple(replace(r, share_id="") for r in a.results)) for a in got]


def searched(a: Allocator, n: Node, claims: list[ResourceClaim]) -> object:
    """``allocate`` with its first fit turned off: the search alone."""
    first_fit = a._first_fit
    a._first_fit = lambda *args: None  # type: ignore[method-assign]
    try:
        return a.allocate(n, claims, 1000.0)
    finally:
        a._first_fit = first_fit  # type: ignore[method-assign]


@pytest.mark.parametrize("seed", range(300))
def test_first_fit_allocates_what_the_search_allocates(seed: int) -> None:
    rng = random.Random(seed)
    slices, taken = cluster(rng, odd=0.3)
    a = allocator(slices, taken)
    claims = plain_claims(rng) if seed % 3 else random_claims(rng)
    for n in NODES:
        assert shareless(a.allocate(n, claims, 1000.0)) == shareless(searched(a, n, claims)), (seed, n.name)


@pytest.mark.parametrize("seed", range(150))
def test_first_fit_steps_aside_for_shares_counters_and_constraints(seed: int) -> None:
    rng = random.Random(seed)
    slices, taken = single_node_world(rng, shares=True)
    a = allocator(slices, taken)
    claims = random_claims(rng, shares=True)
    assert shareless(a.allocate(node(), claims, 1000.0)) == shareless(searched(a, node(), claims)), seed


def pod_after_pod(a: Allocator, n: Node, claims: list[ResourceClaim]) -> tuple[int, object]:
    """How many pods with claims of these specs ``n`` takes, allocating one after another, and the
    allocator's reason for the next one."""
    undo: list[Callable[[], None]] = []
    count = 0
    try:
        while True:
            fresh = [ResourceClaim(namespace=c.namespace, name=c.name, spec=c.spec) for c in claims]
            got = searched(a, n, fresh)
            if isinstance(got, Unallocatable):
                return count, got
            assert isinstance(got, list)
            count += 1
            undo.extend(a.in_use.add(x) for x in got)
    finally:
        for u in reversed(undo):
            u()


def counted(a: Allocator, claims: list[ResourceClaim], nodes: list[Node]) -> tuple[Kind, Counts, Any]:
    """The claims' plain kind, the counts over ``a`` and their ``fit`` on ``nodes``."""
    kind = plain(claims, dict(a.classes))
    assert kind is not None
    counts = Counts(a)
    return kind, counts, counts.fit(kind, nodes)


def agrees(a: Allocator, counts: Counts, kind: Kind, nodes: list[Node], claims: list[ResourceClaim],
           fits: Any, i: int, label: object) -> None:
    """Node ``i``'s count is allocating pod after pod there, and its reason the allocator's."""
    want, why = pod_after_pod(a, nodes[i], claims)
    assert int(fits[i]) == want, label
    got = counts.reasons(kind, nodes, [i])
    if want:
        assert got == [None], label
    else:
        assert got == ([why] if a.pools.serves(nodes[i]) else [False]), label


@pytest.mark.parametrize("seed", range(300))
def test_counts_equal_allocating_pod_after_pod(seed: int) -> None:
    rng = random.Random(seed)
    slices, taken = cluster(rng, odd=0.15)
    a = allocator(slices, taken)
    claims = plain_claims(rng)
    kind, counts, got = counted(a, claims, NODES)
    if got is None:  # two request kinds share candidates: the allocator counts those
        assert len(kind.kinds) > 1
        return
    fits, odd = got
    for i, n in enumerate(NODES):
        devices = next(s for s in slices if s.name == f"{n.name}-s").devices
        candidates = [d for d in devices for _, x in kind.kinds.values()
                      if all(MODEL.format(d.attributes["model"]) == sel for sel in x.selectors)]
        assert bool(odd[i]) == (not all(not d.allow_multiple_allocations and not d.consumes_counters and not d.taints
                                        and not d.capacity for d in candidates)), (seed, n.name)
        if not odd[i]:
            agrees(a, counts, kind, NODES, claims, fits, i, (seed, n.name))


def test_counts_follow_the_devices_in_use_as_they_change() -> None:
    """The taken array is kept up to date from the changes (``InUse.changed_since``), not rebuilt."""
    slices = [slice_(f"{n.name}-s", [dev(f"d{i}") for i in range(4)], node=n.name, pool=n.name) for n in NODES]
    a = allocator(slices, [])
    claims = [claim("c", req("r", count=2))]
    kind, counts, got = counted(a, claims, NODES)
    assert got is not None and got[0].tolist() == [2, 2, 2, 2]
    first = a.allocate(NODES[1], claims, 1000.0)
    assert isinstance(first, list)
    undo = a.in_use.add(first[0])
    got = counts.fit(kind, NODES)
    assert got is not None and got[0].tolist() == [2, 1, 2, 2]
    assert counts.reasons(kind, NODES, [1]) == [None]
    second = a.allocate(NODES[1], claims, 1000.0)
    assert isinstance(second, list)
    a.in_use.add(second[0])
    got = counts.fit(kind, NODES)
    assert got is not None and got[0].tolist() == [2, 0, 2, 2]
    assert counts.reasons(kind, NODES, [1]) == [Unallocatable("all-taken", "default/c", "r", "0/2")]
    undo()
    got = counts.fit(kind, NODES)
    assert got is not None and got[0].tolist() == [2, 1, 2, 2]


def test_a_node_no_pool_reaches_is_told_apart() -> None:
    slices = [slice_("n0-s", [dev("d0")], node="n0", pool="n0")]
    a = allocator(slices, [])
    claims = [claim("c", req("r", count=1))]
    kind, counts, got = counted(a, claims, NODES)
    assert got is not None and got[0].tolist() == [1, 0, 0, 0]
    assert counts.reasons(kind, NODES, [1]) == [False]


def test_shapes_the_counts_leave_to_the_allocator() -> None:
    classes = {CLASS_A: cls()}
    assert plain([claim("c", req("r", count=2))], classes) is not None
    assert plain([claim("c", req("r", admin=True))], classes) is None
    assert plain([claim("c", req("r", capacity={"m": "1"}))], classes) is None
    assert plain([claim("c", req("r", mode="All"))], classes) is None
    assert plain([claim("c", req("r", cls_name="missing"))], classes) is None
    assert plain([claim("c", req("r", count=33))], classes) is None  # past an allocation's 32 results
    assert plain([claim("c", req("r"), constraints=[DeviceConstraint(match_attribute="driver-a/model")])],
                 classes) is None
