"""A gang's devices searched as a whole: an assignment of every member's claims on its node where
allocating them member by member, first fit, fails (kubernetes/kubernetes#138765: each member takes
the whole device its ``firstAvailable`` prefers and leaves the next nothing, where halves would serve
both).

Belongs here: given the members in rank order, each with its node and the claims to allocate there
(a claim several members share, such as a PodGroup's, allocated once, by the first), the search for
an assignment of all of them, and how it is bounded. Not here: which pods, nodes and claims (the
core's device seam, ``koordpy.core.claims``), laying the result over the claims (the same), words
(``koordpy.core.messages``).

The search is a depth-first search over the members in rank order. Each member's solutions on its
node are tried in the allocator's own order (``Allocator.solutions``: the first is what ``allocate``
would give), with the devices the members before it took held as in use, so each claim's
``firstAvailable`` preference, and each pod's own ``matchAttribute`` / ``distinctAttribute`` (they lie
inside one member's solution), are kept; a member without a solution sends the search back to the
member before it for its next. The first assignment found is therefore the lexicographically first in
member order, and when member-by-member allocation succeeds it is exactly that, found at the same cost.
Two prunings keep that answer: a state (the devices held, the depth, the devices of each shared claim) whose
suffix found nothing is not searched again when another order of the same choices reaches it, and a
prefix that leaves a pool fewer counters than the members after it need at least is not extended.

Decomposition: members whose usable devices cannot overlap are independent. Two members are coupled
when their nodes see a pool in common (a network-attached pool, or one node's pools when both are on
it) or they share a claim; only each coupled group is searched, one after another, and the gang's
assignment is the groups' put together (each group's lexicographically first gives the whole's).
Members on different nodes with node-local pools only, the usual case, are a group each and cost one
allocation apiece.

Worst case: within one coupled group of m members each with up to s solutions, s^m assignments
(s is itself up to the number of ways to choose a claim's devices among the node's); the prunings
cut symmetric orders and what the counters rule out, not every symmetry. The search is
bounded by a time budget per job (``GANG_BUDGET``, the setting ``deviceGangSearchSeconds``; never past
the allocator's own 10 s bound) and a step count (``GANG_STEPS``, the allocator's steps over all runs);
a search that reaches either says so (``GangStopped``) rather than that no assignment exists.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from koordpy.api.dra import Allocation, ResourceClaim
from koordpy.api.objects import Node
from koordpy.devices.allocator import Allocator, Budget, SearchStopped
from koordpy.devices.pools import Num
from koordpy.devices.reasons import DeviceError, GangStopped

# Default time budget of one job's search, seconds: the #138765 shape at 1,000 members (500 nodes
# of one partitionable device) is searched in well under it (docs/design.md, "The gang-wide device search").
GANG_BUDGET = 1.0
GANG_STEPS = 1_000_000  # the allocator's search steps one job's gang search may take


@dataclass(frozen=True)
class Member:
    """One member: its node, the claims to allocate there in its order, and each claim's identity
    (equal identities: one claim the members share, allocated by the first)."""

    node: Node
    claims: tuple[ResourceClaim, ...]
    ids: tuple[str, ...]


@dataclass
class GangAssignment:
    """The search's answer: per member, the allocations it makes, by claim identity (a shared claim's
    with the first member using it), or None when there is none (``stopped``: or it stopped early)."""

    made: list[dict[str, Allocation]] | None
    stopped: GangStopped | None = None
    steps: int = 0
    groups: list[list[int]] = field(default_factory=list)


def coupled(allocator: Allocator, members: Sequence[Member]) -> list[list[int]]:
    """The members with claims to allocate, in groups that can compete for devices (a pool their
    nodes both see, or a claim they share), each in rank order, groups by their first member."""
    parent = list(range(len(members)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, m in enumerate(members):
        if not m.claims:
            continue
        keys = [f"pool:{v.key}" for v in allocator.pools.for_node(m.node)]
        keys.extend(f"claim:{c}" for c in m.ids)
        for k in keys:
            j = owner.setdefault(k, i)
            if j != i:
                a, b = root(i), root(j)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i, m in enumerate(members):
        if m.claims:
            groups.setdefault(root(i), []).append(i)
    return [groups[k] for k in sorted(groups)]


def search(allocator: Allocator, members: Sequence[Member], now: float, budget: float = GANG_BUDGET,
           steps: int = GANG_STEPS, deadline: float = math.inf) -> GangAssignment:
    """An assignment of every member's claims (the lexicographically first in member order), or None
    with why it stopped if it did. The devices in use are as they were when it returns. Raises the
    allocator's ``DeviceError`` as ``allocate`` does. ``deadline`` (on the allocator's clock): the
    job's budget where earlier searches of the job spent part of it."""
    start = allocator.clock()
    bound = Budget(min(start + min(budget, allocator.timeout), deadline), steps)
    groups = coupled(allocator, members)
    made: list[dict[str, Allocation]] = [{} for _ in members]
    for group in groups:
        try:
            found = _group(allocator, members, group, now, bound)
        except SearchStopped as stop:
            return GangAssignment(None, GangStopped("steps" if stop.steps else "time", min(budget, allocator.timeout),
                                                    steps, len(members), len(group)),
                                  steps - bound.steps, groups)
        if found is None:
            return GangAssignment(None, None, steps - bound.steps, groups)
        for i, got in found.items():
            made[i] = got
    return GangAssignment(made, None, steps - bound.steps, groups)


def _group(allocator: Allocator, members: Sequence[Member], group: list[int], now: float,
           budget: Budget) -> dict[int, dict[str, Allocation]] | None:
    """One coupled group's first assignment (member index -> its allocations by claim identity), or
    None; the depth-first search kept on explicit stacks (a gang may be thousands deep)."""
    in_use = allocator.in_use
    need, counts, usable = _least_counters(allocator, members, group)
    views = {v.key: v for i in group for v in allocator.pools.for_node(members[i].node)}

    def hopeless(depth: int) -> bool:
        """Whether the members from ``depth`` on need more devices than their candidates not allocated,
        or more of a pool's counters, added over its counter sets, than the devices in use leave
        (bounds that cannot exclude an assignment)."""
        if counts[depth] and counts[depth] > sum(1 for d in usable[depth] if not in_use.allocated(d)):
            return True
        for (pool, counter), want in need[depth].items():
            avail, overdrawn = allocator.available_counters(views[pool])
            if overdrawn or sum(v for (_, c), v in avail.items() if c == counter) < want:
                return True
        return False

    if hopeless(0):
        return None
    shared: dict[str, Allocation] = {}  # claim identity -> allocation, of the members on the path
    gens: list[Iterator[list[Allocation]]] = []
    undos: list[list[object]] = []  # per depth: the undo callables and the identities it allocated
    chosen: list[dict[str, Allocation]] = []
    # What the members on the path hold, as a multiset of (device, capacity consumed, admin): with the
    # depth and the devices of the claims members share, all a suffix's fate depends on. A state whose
    # suffix found nothing is not searched again when another order of the same choices reaches it
    # (members from one template on one node, the usual gang, reach each state in every order).
    held: dict[tuple[object, ...], int] = {}
    failed: set[tuple[object, ...]] = set()
    # Which devices a claim later members name holds matters too, not only that they are held: its
    # allocation's node selector decides which of their nodes can use it (the same devices held the
    # other way round, the shared claim on a network device and a member's own on a local one, may
    # reach a node the other cannot). The claims on the path are otherwise the depth's.
    naming = Counter(cid for i in group for cid in set(members[i].ids))
    common = {cid for cid, n in naming.items() if n > 1}

    def state(depth: int) -> tuple[object, ...]:
        return depth, frozenset(held.items()), frozenset(
            (cid, tuple(r.device_id for r in a.results)) for cid, a in shared.items() if cid in common)

    def hold(a: Allocation, sign: int) -> None:
        for r in a.results:
            t = (r.device_id, tuple(sorted((k, v.value) for k, v in r.consumed_capacity.items())), r.admin_access)
            n = held.get(t, 0) + sign
            if n:
                held[t] = n
            else:
                del held[t]

    def open_member(i: int) -> Iterator[list[Allocation]]:
        m = members[i]
        todo = []
        for claim, cid in zip(m.claims, m.ids, strict=True):
            held = shared.get(cid)
            if held is None:
                todo.append(claim)
            elif held.node_selector is not None and not any(
                    t.matches(m.node.name, m.node.labels) for t in held.node_selector):
                return iter(())  # a claim an earlier member allocated is not usable here
        if not todo:
            return iter(([],))
        return allocator.solutions(m.node, todo, now, budget)

    def undo_top() -> None:
        for u in reversed(undos.pop()):
            if isinstance(u, str):
                shared.pop(u, None)
            else:
                u()  # type: ignore[operator]
        for a in chosen.pop().values():
            hold(a, -1)

    try:
        gens.append(open_member(group[0]))
        while gens:
            d = len(gens) - 1
            if len(chosen) > d:
                undo_top()  # this depth's last solution led nowhere: the next
            got = next(gens[d], None)
            if got is None:
                gens.pop()
                failed.add(state(d))
                continue
            m = members[group[d]]
            todo_ids = [cid for cid in m.ids if cid not in shared]
            mine = dict(zip(todo_ids, got, strict=True))
            record: list[object] = []
            for cid, a in mine.items():
                record.append(in_use.add(a))
                shared[cid] = a
                record.append(cid)
            undos.append(record)
            chosen.append(mine)
            for a in mine.values():
                hold(a, 1)
            if len(gens) == len(group):
                return {group[k]: chosen[k] for k in range(len(group))}
            if state(d + 1) not in failed and not hopeless(d + 1):
                gens.append(open_member(group[d + 1]))
        return None
    finally:
        while undos:
            undo_top()


def _least_counters(allocator: Allocator, members: Sequence[Member], group: list[int]) -> tuple[
        list[dict[tuple[str, str], Num]], list[int], list[frozenset[str]]]:
    """Per depth of ``group``, the least the members from there on consume of each pool's counters,
    by (pool, counter) added over the pool's counter sets: per request, the cheapest alternative's
    count times its cheapest candidate device's consumption (a device that allows multiple
    allocations, a request for all devices or with admin access, and a claim another member also
    names count nothing); and the fewest devices they take (per request, the smallest count, none
    where a candidate allows multiple allocations) with the devices they may take. Each member needs
    at least its own, whatever the others take: a prefix that leaves less cannot be completed
    (``firstAvailable``'s halves after a whole: 17 members on 16 halves are refused at once, not
    after an exponential search)."""
    named: dict[str, int] = {}
    for i in group:
        for cid in set(members[i].ids):
            named[cid] = named.get(cid, 0) + 1
    own: list[dict[tuple[str, str], Num]] = []
    own_count: list[int] = []
    own_ids: list[set[str]] = []
    for i in group:
        m = members[i]
        total: dict[tuple[str, str], Num] = {}
        fewest = 0
        ids: set[str] = set()
        for claim, cid in zip(m.claims, m.ids, strict=True):
            if named[cid] > 1:
                continue
            for r in claim.spec.requests:
                alts = (r.exactly,) if r.exactly is not None else r.first_available
                least: dict[tuple[str, str], Num] | None = None
                few: int | None = None
                for x in alts:
                    cls = allocator.classes.get(x.device_class) if x is not None else None
                    if x is None or cls is None or x.mode != "ExactCount" or x.admin_access:
                        least, few = {}, 0
                        break
                    try:
                        cands, _ = allocator._candidates(m.node, cls, x, claim.key)
                    except DeviceError:  # the search reports it
                        least, few = {}, 0
                        break
                    ids.update(e.id for e in cands)
                    few = 0 if any(e.allow_multiple for e in cands) else x.count if few is None else min(few, x.count)
                    per: dict[tuple[str, str], Num] | None = None
                    for e in cands:
                        used: dict[tuple[str, str], Num] = {}
                        if not e.allow_multiple:
                            for (_, counter), v in e.uses:
                                k = (f"{e.driver}/{e.pool}", counter)
                                used[k] = used.get(k, 0) + v
                        per = used if per is None else {k: min(v, used[k]) for k, v in per.items() if k in used}
                    alt = {k: v * x.count for k, v in (per or {}).items()}
                    least = alt if least is None else {k: min(v, alt[k]) for k, v in least.items() if k in alt}
                for k, v in (least or {}).items():
                    total[k] = total.get(k, 0) + v
                fewest += few or 0
        own.append(total)
        own_count.append(fewest)
        own_ids.append(ids)
    out: list[dict[tuple[str, str], Num]] = [{} for _ in range(len(group) + 1)]
    counts = [0] * (len(group) + 1)
    usable: list[frozenset[str]] = [frozenset()] * (len(group) + 1)
    for d in range(len(group) - 1, -1, -1):
        acc = dict(out[d + 1])
        for k, v in own[d].items():
            acc[k] = acc.get(k, 0) + v
        out[d] = {k: v for k, v in acc.items() if v}
        counts[d] = counts[d + 1] + own_count[d]
        # Members of one template share their candidates: one set for them all.
        usable[d] = usable[d + 1] if own_ids[d] <= usable[d + 1] else usable[d + 1] | own_ids[d]
    return out, counts, usable
