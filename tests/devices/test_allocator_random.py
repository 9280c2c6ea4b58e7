"""The allocator on random small worlds, against a checker written from the API rules and a brute-force
search: every allocation it makes is valid, and when it says no, no valid allocation exists (its
search is exhaustive, as kube-scheduler's). Also: ``fits`` agrees with ``allocate``, and ``capacity``'s
fast path with allocating pod after pod."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from fractions import Fraction

import pytest

from koordpy.api.dra import (
    Allocation,
    AttrValue,
    Capacity,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
)
from koordpy.devices.cel import compile_selector
from koordpy.devices.reasons import Unallocatable
from tests.devices.helpers import (
    World,
    claim,
    dev,
    exact,
    first_available,
    node,
    numa_constraints,
    q,
    req,
    result,
    slice_,
)

TAINT = DeviceTaint(key="t", effect="NoSchedule")
TOLERATE = DeviceToleration(key="t", operator="Exists")


def world(rng: random.Random, shares: bool = False) -> tuple[list[ResourceSlice], list[ResourceClaim]]:
    """Pools of a few devices, some partitionable, some tainted, some in use; with ``shares``, some
    devices allow multiple allocations of a capacity "c" of 4 and some dedicated ones have it too."""
    slices = []
    for p in range(rng.randint(1, 2)):
        partitioned = rng.random() < 0.4
        devices = []
        for i in range(rng.randint(1, 4)):
            attrs: dict[str, AttrValue] = {"numa": rng.randint(0, 1), "model": rng.choice(["a", "b"])}
            uses = [CounterConsumption("cs", {"mem": q(rng.randint(1, 3))})] if partitioned else []
            kind = rng.random() if shares else 1.0
            devices.append(dev(f"d{i}", attrs, counters=uses, taints=[TAINT] if rng.random() < 0.2 else [],
                               multi=kind < 0.4, capacity={"c": Capacity(q(4))} if kind < 0.6 else None))
        slices.append(slice_(f"s{p}", devices, pool=f"p{p}", count=2 if partitioned else 1))
        if partitioned:
            slices.append(slice_(f"s{p}-counters", [], pool=f"p{p}", count=2,
                                 counters=[CounterSet("cs", {"mem": q(rng.randint(2, 5))})]))
    taken = []
    for s in slices:
        for d in s.devices:
            if rng.random() < 0.15:
                if d.allow_multiple_allocations:
                    held = result("r", d.name, pool=s.pool, share_id=f"old-{d.name}",
                                  consumed_capacity={"c": q(rng.randint(1, 4))})
                else:
                    held = result("r", d.name, pool=s.pool)
                taken.append(claim(f"taken-{s.pool}-{d.name}", allocation=Allocation(results=(held,))))
    return slices, taken


def random_claims(rng: random.Random, shares: bool = False) -> list[ResourceClaim]:
    claims = []
    for c in range(rng.randint(1, 2)):
        requests: list[DeviceRequest] = []
        for r in range(rng.randint(1, 2)):
            sel = [f'device.attributes["driver-a"].model == "{rng.choice("ab")}"'] if rng.random() < 0.4 else []
            tol = [TOLERATE] if rng.random() < 0.3 else []
            if rng.random() < 0.25:
                requests.append(first_available(f"r{r}", exact(count=2, name="big", selectors=sel, tolerations=tol),
                                                exact(count=1, name="small", tolerations=tol)))
            else:
                amount = {"c": str(rng.randint(1, 3))} if shares and rng.random() < 0.5 else None
                requests.append(req(f"r{r}", count=rng.randint(1, 2), selectors=sel, tolerations=tol,
                                    admin=rng.random() < 0.1, capacity=amount))
        constraints = numa_constraints(rng, 0.3, 0.2)
        claims.append(claim(f"c{c}", *requests, constraints=constraints))
    return claims


# -- the checker ----------------------------------------------------------------------------------


def device_of(slices: Sequence[ResourceSlice], pool: str, name: str) -> Device:
    return next(d for s in slices if s.pool == pool and not s.shared_counters for d in s.devices if d.name == name)


def valid(slices: Sequence[ResourceSlice], taken: Sequence[ResourceClaim], claims: Sequence[ResourceClaim],
          allocations: Sequence[Allocation], made: bool = True) -> str | None:
    """Why these allocations break the API's rules (None: they do not). ``made``: the allocator's
    (shares and consumed capacity written in the results are checked too)."""
    held = [r for t in taken for a in [t.allocation] if a for r in a.results]
    in_use = {(r.pool, r.device) for r in held if not r.share_id}
    shared = {(r.pool, r.device) for r in held if r.share_id}
    used: dict[tuple[str, str], Fraction] = {}
    for r in held:
        for v in r.consumed_capacity.values():
            used[(r.pool, r.device)] = used.get((r.pool, r.device), Fraction(0)) + v.value
    # Within one pod's allocation, kube-scheduler's rule is ordered: a device an earlier request took
    # (admin or not) is in use for a later request without admin access; an admin request only
    # avoids the devices its own claim took.
    exclusive: set[tuple[str, str]] = set()
    for c, a in zip(claims, allocations, strict=True):
        mine: set[tuple[str, str]] = set()
        by_request: dict[str, list[tuple[str, str]]] = {}
        for r in a.results:
            by_request.setdefault(r.request, []).append((r.pool, r.device))
            d = device_of(slices, r.pool, r.device)
            base, _, sub = r.request.partition("/")
            request = next(x for x in c.spec.requests if x.name == base)
            x = request.exactly if not sub else next(s for s in request.first_available if s.name == sub)
            assert x is not None
            for expr in ('device.driver == "driver-a"', *x.selectors):
                if not compile_selector(expr).matches("driver-a", d.attributes, d.capacity):
                    return f"{r.device} does not match {expr}"
            if any(t.effect == "NoSchedule" and not any(tol.tolerates(t) for tol in x.tolerations) for t in d.taints):
                return f"{r.device}: taint not tolerated"
            if any(name not in d.capacity for name in x.capacity):
                return f"{r.device} lacks a capacity the request asks for"
            want = {name: (x.capacity[name].value if name in x.capacity else c.value.value)
                    for name, c in d.capacity.items()}
            if any(v > d.capacity[name].value.value for name, v in want.items()):
                return f"{r.device}: more capacity asked than it has"
            if d.allow_multiple_allocations:
                key = (r.pool, r.device)
                used[key] = used.get(key, Fraction(0)) + want.get("c", Fraction(0))
                if "c" in d.capacity and used[key] > d.capacity["c"].value.value:
                    return f"{r.device}: shares consume more than its capacity"
                if made and (not r.share_id or {k: v.value for k, v in r.consumed_capacity.items()} != want):
                    return f"{r.device}: share or consumed capacity not written"
                continue
            if made and (r.share_id or r.consumed_capacity):
                return f"{r.device}: a dedicated device got a share"
            if x.admin_access:
                if (r.pool, r.device) in mine:
                    return f"{r.device} twice in one claim"
            elif (r.pool, r.device) in in_use or (r.pool, r.device) in exclusive:
                return f"{r.device} allocated twice"
            exclusive.add((r.pool, r.device))
            mine.add((r.pool, r.device))
            if r.admin_access != x.admin_access:
                return "admin access not copied"
        for request in c.spec.requests:
            names = [request.name] if request.exactly else [f"{request.name}/{s.name}" for s in request.first_available]
            got = [n for n in names if n in by_request]
            if len(got) != 1:
                return f"{request.name}: {len(got)} alternatives allocated"
            x = request.exactly or next(s for s in request.first_available if f"{request.name}/{s.name}" == got[0])
            if len(by_request[got[0]]) != x.count:
                return f"{got[0]}: {len(by_request[got[0]])} devices for {x.count}"
        for con in c.spec.constraints:
            values = [device_of(slices, p, n).attributes.get("numa") for p, n in
                      (pd for r in a.results for pd in [(r.pool, r.device)])]
            if con.match_attribute and len(set(values)) > 1:
                return "matchAttribute broken"
            if con.distinct_attribute and len(set(values)) != len(values):
                return "distinctAttribute broken"
    # Counters: what allocated devices consume, plus what each new result's device consumes (as
    # kube-scheduler charges them: per result, so an admin-access result on a device in use charges
    # its counters again).
    for s in slices:
        for cs in s.shared_counters:
            def mem(pool: str, name: str) -> Fraction:
                return sum((u.counters["mem"].value for u in device_of(slices, pool, name).consumes_counters),
                           Fraction(0))
            before = sum((mem(p, n) for p, n in in_use | shared if p == s.pool), Fraction(0))
            # A device that allows multiple allocations charges its counters once, with its first share.
            charged = set(shared)
            spent = before
            for a in allocations:
                for r in a.results:
                    if r.pool != s.pool:
                        continue
                    if device_of(slices, r.pool, r.device).allow_multiple_allocations:
                        if (r.pool, r.device) in charged:
                            continue
                        charged.add((r.pool, r.device))
                    spent += mem(r.pool, r.device)
            if spent > cs.counters["mem"].value and spent > before:
                return f"pool {s.pool}: counters overdrawn"
    return None


def exists(slices: Sequence[ResourceSlice], taken: Sequence[ResourceClaim], claims: Sequence[ResourceClaim]) -> bool:
    """Whether any valid allocation exists: every choice of alternatives and devices, brute force."""
    candidates = [(s.pool, d.name) for s in slices if not s.shared_counters for d in s.devices]
    slots = []  # (claim index, request, alternative name or "", count, admin)
    for ci, c in enumerate(claims):
        per_claim = []
        for request in c.spec.requests:
            if request.exactly is not None:
                per_claim.append([(ci, request.name, request.exactly)])
            else:
                per_claim.append([(ci, f"{request.name}/{s.name}", s) for s in request.first_available])
        slots.extend(per_claim)
    for choice in itertools.product(*slots):
        if _assign(slices, taken, claims, list(choice), candidates, 0, [[] for _ in claims]):
            return True
    return False


def _assign(slices: Sequence[ResourceSlice], taken: Sequence[ResourceClaim], claims: Sequence[ResourceClaim],
            choice: list[tuple[int, str, object]], candidates: list[tuple[str, str]], at: int,
            made: list[list[tuple[str, str, str]]]) -> bool:
    if at == len(choice):
        allocations = [Allocation(results=tuple(result(rq, d, pool=p) for rq, p, d in m)) for m in made]
        allocations = [Allocation(results=tuple(
            r if not _admin(claims[i], r.request) else result(r.request, r.device, pool=r.pool, admin_access=True)
            for r in a.results)) for i, a in enumerate(allocations)]
        return valid(slices, taken, claims, allocations, made=False) is None
    ci, name, x = choice[at]
    count = x.count  # type: ignore[attr-defined]
    for combo in itertools.combinations(candidates, count):
        made[ci].extend((name, p, d) for p, d in combo)
        if _assign(slices, taken, claims, choice, candidates, at + 1, made):
            return True
        del made[ci][-count:]
    return False


def _admin(c: ResourceClaim, request: str) -> bool:
    x = next((r.exactly for r in c.spec.requests if r.name == request), None)
    return x is not None and x.admin_access


@pytest.mark.parametrize("seed", range(100))
def test_random_worlds_valid_and_complete(seed: int) -> None:
    rng = random.Random(seed)
    slices, taken = world(rng)
    claims = random_claims(rng)
    w = World(slices, allocated=taken)
    got = w.allocate(claims)
    if isinstance(got, Unallocatable):
        assert not exists(slices, taken, claims), f"said {got} but an allocation exists"
        assert isinstance(w.allocator.fits(node(), claims, 0.0), Unallocatable)
    else:
        assert valid(slices, taken, claims, got) is None, valid(slices, taken, claims, got)
        assert w.allocator.fits(node(), claims, 0.0) is None


@pytest.mark.parametrize("seed", range(100))
def test_random_worlds_with_shared_devices_valid_and_complete(seed: int) -> None:
    rng = random.Random(5000 + seed)
    slices, taken = world(rng, shares=True)
    claims = random_claims(rng, shares=True)
    w = World(slices, allocated=taken)
    got = w.allocate(claims)
    if isinstance(got, Unallocatable):
        assert not exists(slices, taken, claims), f"said {got} but an allocation exists"
    else:
        assert valid(slices, taken, claims, got) is None, valid(slices, taken, claims, got)


@pytest.mark.parametrize("seed", range(60))
def test_random_capacity_fast_path_agrees_with_pod_after_pod(seed: int) -> None:
    rng = random.Random(1000 + seed)
    slices, taken = world(rng)
    specs = [c.spec for c in random_claims(rng)]
    w = World(slices, allocated=taken)
    counted = w.allocator.capacity(node(), specs, 10, 0.0)
    pods = 0
    while pods < 10:
        got = w.allocate([ResourceClaim(namespace="", name=f"p{pods}-{i}", spec=s) for i, s in enumerate(specs)])
        if isinstance(got, Unallocatable):
            break
        for a in got:
            w.in_use.add(a)
        pods += 1
    assert counted == pods


def test_the_checker_catches_a_broken_allocation() -> None:
    # The checker itself can fail: a device twice, a wrong count, a taint not tolerated.
    slices = [slice_("s0", [dev("d0"), dev("d1", taints=[TAINT])], pool="p0")]
    c = claim("c0", req("r0", count=1))
    assert valid(slices, [], [c, c], [Allocation(results=(result("r0", "d0", pool="p0"),))] * 2) is not None
    assert valid(slices, [], [c], [Allocation(results=())]) is not None
    assert valid(slices, [], [c], [Allocation(results=(result("r0", "d1", pool="p0"),))]) is not None
    assert exists(slices, [], [c]) and not exists(slices, [], [claim("c0", req("r0", count=2))])


def test_the_checker_catches_broken_shares() -> None:
    slices = [slice_("s0", [dev("d0", capacity={"c": Capacity(q(4))}, multi=True)], pool="p0")]
    c = claim("c0", req("r0", capacity={"c": "3"}))
    share = result("r0", "d0", pool="p0", share_id="x", consumed_capacity={"c": q(3)})
    assert valid(slices, [], [c], [Allocation(results=(share,))]) is None
    assert valid(slices, [], [c, c], [Allocation(results=(share,))] * 2) is not None  # 6 of 4
    assert valid(slices, [], [c], [Allocation(results=(result("r0", "d0", pool="p0"),))]) is not None  # no share
    assert not exists(slices, [], [c, c])
