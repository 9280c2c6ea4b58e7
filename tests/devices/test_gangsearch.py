"""The gang-wide device search (``koordpy.devices.gangsearch``, issue 31 item 1) on random small
worlds, against brute force: over every combination of each member's own solutions (each enumerated
alone, in the allocator's order), the first whose allocations the API checker finds valid together.
The search finds an assignment whenever brute force does, and it is that first one (each claim's
``firstAvailable`` preference kept wherever the gang still fits); what it returns breaks no claim's
constraints and hands no device out twice; when member-by-member allocation succeeds it returns
exactly that. Also: the enumeration's first solution is ``allocate``'s, a shared claim is allocated
once, members that cannot compete are searched apart, and a pathological search stops and says so."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordpy.api.dra import (
    Allocation,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceRequest,
    ResourceClaim,
    ResourceSlice,
)
from koordpy.devices import gangsearch
from koordpy.devices.allocator import Budget
from koordpy.devices.gangsearch import Member
from koordpy.devices.reasons import Unallocatable
from tests.devices.checker import violations
from tests.devices.helpers import World, claim, cls, dev, exact, first_available, node, numa_constraints, q, req, slice_

NOW = 1000.0
WHOLE = 'device.attributes["driver-a"].size == "whole"'
HALF = 'device.attributes["driver-a"].size == "half"'
NODES = ("node-1", "node-2")


def gpus(rng: random.Random, on: str) -> list[ResourceSlice]:
    """A node's pool: partitionable GPUs (the whole device and its two halves on a counter of 2) and
    plain devices, with a "numa" attribute for constraints."""
    devices: list[Device] = []
    counters: list[CounterSet] = []
    for g in range(rng.randint(0, 2)):
        counters.append(CounterSet(f"gpu-{g}", {"mem": q(2)}))
        for part, size, used in ((f"gpu-{g}", "whole", 2), (f"gpu-{g}-a", "half", 1), (f"gpu-{g}-b", "half", 1)):
            devices.append(dev(part, {"size": size, "numa": g % 2},
                               counters=[CounterConsumption(f"gpu-{g}", {"mem": q(used)})]))
    for p in range(rng.randint(0 if devices else 1, 2)):
        devices.append(dev(f"plain-{p}", {"size": "plain", "numa": rng.randint(0, 1)}))
    pool = f"pool-{on}"
    if not counters:
        return [slice_(f"{on}-devices", devices, node=on, pool=pool)]
    return [slice_(f"{on}-devices", devices, node=on, pool=pool, count=2),
            slice_(f"{on}-counters", [], node=on, pool=pool, count=2, counters=counters)]


def member_claims(rng: random.Random, m: int) -> tuple[ResourceClaim, ...]:
    out = []
    for c in range(rng.randint(1, 2) if rng.random() < 0.3 else 1):
        requests: list[DeviceRequest] = []
        for r in range(rng.randint(1, 2)):
            kind = rng.random()
            if kind < 0.5:
                requests.append(first_available(f"r{r}", exact(name="whole", selectors=[WHOLE]),
                                                exact(name="half", count=rng.randint(1, 2), selectors=[HALF])))
            elif kind < 0.75:
                requests.append(req(f"r{r}", count=rng.randint(1, 2), selectors=[HALF]))
            else:
                requests.append(req(f"r{r}", count=1))
        constraints = numa_constraints(rng, 0.25, 0.15)
        out.append(claim(f"m{m}-c{c}", *requests, constraints=constraints))
    return tuple(out)


def gang_world(rng: random.Random) -> tuple[list[ResourceSlice], list[Member]]:
    slices = [s for n in NODES for s in gpus(rng, n)]
    one_node = rng.random() < 0.5  # most often the members compete on one node
    members = []
    for m in range(rng.randint(2, 4)):
        on = node(NODES[0] if one_node else rng.choice(NODES))
        claims = member_claims(rng, m)
        members.append(Member(on, claims, tuple(c.key for c in claims)))
    return slices, members


def shape(made: Sequence[dict[str, Allocation]]) -> list[list[tuple[str, str, str, str]]]:
    return [[(k, r.request, r.pool, r.device) for k in sorted(d) for r in d[k].results] for d in made]


def valid_after(w: World, slices: Sequence[ResourceSlice], members: Sequence[Member],
                made: Sequence[dict[str, Allocation]]) -> list[str]:
    """What the members' allocations break, each checked with the earlier members' holding their devices."""
    held: list[ResourceClaim] = []
    for m, got in zip(members, made, strict=True):
        allocations = [got[c.key] for c in m.claims]
        bad = violations(m.node, slices, w.devices.classes, held, m.claims, allocations)
        if bad:
            return bad
        held.extend(ResourceClaim(c.namespace, c.name, spec=c.spec, allocation=a)
                    for c, a in zip(m.claims, allocations, strict=True))
    return []


def brute_force(w: World, slices: Sequence[ResourceSlice],
                members: Sequence[Member]) -> list[dict[str, Allocation]] | None:
    """The first combination, in member order, of each member's own solutions (enumerated alone) that
    is valid together; a prefix that is not valid already is not extended."""
    alone = [list(w.allocator.solutions(m.node, m.claims, NOW, Budget(math.inf, 10**9))) for m in members]

    def go(i: int, chosen: list[dict[str, Allocation]]) -> list[dict[str, Allocation]] | None:
        if i == len(members):
            return chosen
        for sol in alone[i]:
            trial = [*chosen, dict(zip(members[i].ids, sol, strict=True))]
            if not valid_after(w, slices, members[:i + 1], trial):
                got = go(i + 1, trial)
                if got is not None:
                    return got
        return None
    return go(0, [])


def member_by_member(w: World, members: Sequence[Member]) -> list[dict[str, Allocation]] | None:
    undo: list[Callable[[], None]] = []
    out: list[dict[str, Allocation]] = []
    try:
        for m in members:
            got = w.allocator.allocate(m.node, m.claims, NOW)
            if isinstance(got, Unallocatable):
                return None
            undo.extend(w.in_use.add(a) for a in got)
            out.append(dict(zip(m.ids, got, strict=True)))
    finally:
        for u in reversed(undo):
            u()
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_the_gang_search_finds_brute_forces_first_assignment(rng: random.Random) -> None:
    slices, members = gang_world(rng)
    w = World(slices, classes=(cls(),))
    before = w.in_use.allocated_ids()
    got = gangsearch.search(w.allocator, members, NOW, budget=60.0, steps=10**8)
    assert w.in_use.allocated_ids() == before  # the devices in use are as they were
    assert got.stopped is None
    expected = brute_force(w, slices, members)
    if expected is None:
        assert got.made is None
        return
    assert got.made is not None, "brute force found an assignment the search missed"
    assert valid_after(w, slices, members, got.made) == []
    assert shape(got.made) == shape(expected)
    mbm = member_by_member(w, members)
    if mbm is not None:
        assert shape(got.made) == shape(mbm)


def test_the_enumerations_first_solution_is_allocates_and_each_is_distinct() -> None:
    w = World([slice_("s", [dev(f"d{i}") for i in range(4)])])
    claims = [claim("c", req(count=2))]
    sols = list(w.allocator.solutions(node(), claims, NOW, Budget(math.inf, 10**6)))
    first = w.allocate(claims)
    assert not isinstance(first, Unallocatable)
    assert [r.device for r in sols[0][0].results] == [r.device for r in first[0].results]
    assert [[r.device for r in s[0].results] for s in sols] == [
        ["d0", "d1"], ["d0", "d2"], ["d0", "d3"], ["d1", "d2"], ["d1", "d3"], ["d2", "d3"]]


def test_a_claim_members_share_is_allocated_once_by_the_first() -> None:
    w = World([slice_("s", [dev("d0"), dev("d1"), dev("d2")])])  # three: the shared claim's taken once
    shared = claim("shared", req())
    own = [claim(f"own-{i}", req()) for i in range(2)]
    members = [Member(node(), (shared, own[i]), (shared.key, own[i].key)) for i in range(2)]
    got = gangsearch.search(w.allocator, members, NOW)
    assert got.made is not None
    assert sorted(got.made[0]) == sorted([shared.key, own[0].key]) and list(got.made[1]) == [own[1].key]
    assert sorted(r.device for d in got.made for a in d.values() for r in a.results) == ["d0", "d1", "d2"]


def test_members_on_nodes_that_see_no_pool_in_common_are_searched_apart() -> None:
    slices = [slice_("a", [dev("d0")], node="node-1", pool="p1"), slice_("b", [dev("d0")], node="node-2", pool="p2"),
              slice_("net", [dev("n0")], node=None, pool="net", all_nodes=True)]
    w = World(slices)
    local = [Member(node(n), (claim(f"c{i}", req()),), (f"default/c{i}",)) for i, n in enumerate(NODES * 2)]
    assert gangsearch.coupled(w.allocator, local) == [[0, 1, 2, 3]]  # the network pool couples them all
    w2 = World(slices[:2])
    assert gangsearch.coupled(w2.allocator, local) == [[0, 2], [1, 3]]


def partitioned(gpus: int, members: int, names: bool = False) -> tuple[World, list[Member]]:
    """``members`` members, each a whole GPU else a half, on a node of ``gpus`` partitionable GPUs;
    ``names``: each GPU's counter named apart (the counters' lower bound then sees nothing to add up)."""
    devices: list[Device] = []
    counters = []
    for g in range(gpus):
        name = f"mem{g}" if names else "mem"
        counters.append(CounterSet(f"gpu-{g}", {name: q(2)}))
        for part, size, used in ((f"gpu-{g}", "whole", 2), (f"gpu-{g}-a", "half", 1), (f"gpu-{g}-b", "half", 1)):
            devices.append(dev(part, {"size": size}, counters=[CounterConsumption(f"gpu-{g}", {name: q(used)})]))
    w = World([slice_("d", devices, count=2), slice_("c", [], count=2, counters=counters)])
    out = []
    for i in range(members):
        c = claim(f"c{i}", first_available("gpu", exact(name="whole", selectors=[WHOLE]),
                                           exact(name="half", selectors=[HALF])))
        out.append(Member(node(), (c,), (c.key,)))
    return w, out


def pathological() -> tuple[World, list[Member]]:
    """Seventeen such members on eight GPUs whose counters are named apart: no assignment (sixteen
    halves), and proving it from the members' preferences (the first whole, ...) visits a number of
    states exponential in the GPUs, even with states seen once."""
    return partitioned(8, 17, names=True)


def test_sixteen_members_on_eight_gpus_get_a_half_each_at_once() -> None:
    w, members = partitioned(8, 16)
    got = gangsearch.search(w.allocator, members, NOW)
    assert got.made is not None and got.stopped is None and got.steps < 5_000
    assert sorted(r.device for d in got.made for a in d.values() for r in a.results) == sorted(
        f"gpu-{g}-{h}" for g in range(8) for h in "ab")


def test_a_seventeenth_member_is_refused_by_the_counters_bound_without_a_search() -> None:
    w, members = partitioned(8, 17)
    got = gangsearch.search(w.allocator, members, NOW, steps=10**9)
    assert got.made is None and got.stopped is None and got.steps == 0


def test_a_pathological_search_stops_at_its_step_bound_and_says_so() -> None:
    from koordpy.core.messages import gang_stopped

    w, members = pathological()
    got = gangsearch.search(w.allocator, members, NOW, budget=60.0, steps=5_000)
    assert got.made is None and got.stopped is not None
    assert got.stopped.bound == "steps" and got.stopped.group == 17
    assert w.in_use.allocated_ids() == set()
    assert gang_stopped(got.stopped) == ("The search of the gang's devices as a whole stopped at its bound of 5000 "
                                         "search steps before finding an assignment (a coupled group of 17 of its 17 "
                                         "members sharing devices).")


def test_a_pathological_search_stops_at_its_time_budget_and_says_so() -> None:
    w, members = pathological()
    ticks = iter(range(10**9))
    w.allocator.clock = lambda: float(next(ticks))  # each look at the clock: a second
    got = gangsearch.search(w.allocator, members, NOW, budget=5.0, steps=10**9)
    assert got.made is None and got.stopped is not None and got.stopped.bound == "time"
    assert got.stopped.seconds == 5.0


def test_the_budget_never_passes_the_allocators_own_bound() -> None:
    w, members = pathological()
    ticks = iter(range(10**9))
    w.allocator.clock = lambda: float(next(ticks))
    got = gangsearch.search(w.allocator, members, NOW, budget=1e6, steps=10**9)
    assert got.stopped is not None and got.stopped.seconds == w.allocator.timeout


def test_members_wanting_more_devices_than_their_candidates_are_refused_without_a_search() -> None:
    # Three members of four devices each on a node of eight: placement's count may overestimate
    # (kinds drawing on the same devices); the devices' bound says no before any member is tried.
    w = World([slice_("s", [dev(f"d{i}") for i in range(8)])])
    members = [Member(node(), (claim(f"c{i}", req(count=4)),), (f"default/c{i}",)) for i in range(3)]
    got = gangsearch.search(w.allocator, members, NOW)
    assert got.made is None and got.stopped is None and got.steps == 0
    assert gangsearch.search(w.allocator, members[:2], NOW).made is not None


def test_a_state_is_told_apart_by_which_devices_a_shared_claim_holds() -> None:
    # node-1 has a local device, every node sees three network devices. The first member's shared
    # claim on the local device cannot reach the third member on node-2; the same devices held the
    # other way round (the shared claim on a network device, the member's own on the local one) can.
    # A state whose suffix failed must not stand for the other: the memo keys on what the shared
    # claims hold, not only on the devices held altogether.
    slices = [slice_("local", [dev("d")], node="node-1", pool="local"),
              slice_("net", [dev("e"), dev("f"), dev("g")], node=None, pool="net", all_nodes=True)]
    w = World(slices)
    shared = claim("shared", req())
    own = [claim(f"own-{i}", req()) for i in range(3)]
    members = [Member(node("node-1"), (shared, own[0]), (shared.key, own[0].key)),
               Member(node("node-1"), (own[1],), (own[1].key,)),
               Member(node("node-2"), (shared, own[2]), (shared.key, own[2].key))]
    got = gangsearch.search(w.allocator, members, NOW)
    assert got.made is not None, "an assignment exists: the shared claim on a network device"
    assert [r.pool for r in got.made[0][shared.key].results] == ["net"]
    assert sorted(r.device for d in got.made for a in d.values() for r in a.results) == ["d", "e", "f", "g"]
