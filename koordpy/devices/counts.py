"""How many pods' claims each node's free devices serve, counted on arrays: the topology search's
per-node device cap and DynamicResources' Filter for claims the allocator takes first fit.

Belongs here: which claims are ``plain`` (each request one ExactCount request without admin access
or capacity of its own, no constraints; each request's candidates all ``DeviceEntry.plain``, no
selector failing), each request kind's candidates on every node as arrays (made once per pools
object and node list, from the allocator's per-slice selector verdicts), the devices taken as a
boolean array (kept up to date from ``InUse.changed_since``), and from those per node: how many pods
of a plain kind fit (free candidates over what a pod asks, the least over its request kinds) and,
where none does, the allocator's own reason (``Allocator._alone`` and its first-fit competition).
Plain requests take any free candidate, so kube-scheduler's search takes the first free ones in
order (``Allocator._first_fit``) and these counts are exact. Not here: nodes where a candidate is not
plain or a pool is incomplete or invalid (``odd``: the allocator answers those one by one), claims
with ``firstAvailable``, constraints or shares, the search itself (``allocator``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.api.dra import DeviceClass, ExactRequest, ResourceClaim
from koordpy.api.objects import Node
from koordpy.devices.allocator import RESULTS_MAX, Allocator, taken_first_fit
from koordpy.devices.reasons import Unallocatable

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Selection:
    """One request kind's candidates on every node of a node list: ``dev`` the device numbers
    (``Pools.index``), ``node`` the node each is a candidate of (node by node, in the allocator's
    order), ``total`` candidates per node, ``odd`` nodes the counts cannot answer (a candidate not
    plain, a failing selector, a pool incomplete or invalid), ``served`` nodes some pool reaches."""

    dev: Ints
    node: Ints
    total: Ints
    odd: Bools
    served: Bools


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a plain claim set: the claim it belongs to, its name, its kind and count."""

    claim: str
    name: str
    kind: tuple[object, ...]
    count: int


@dataclass(frozen=True, slots=True)
class Kind:
    """A plain claim set: its requests in order, and each request kind's class and request."""

    requests: tuple[Request, ...]
    kinds: dict[tuple[object, ...], tuple[DeviceClass, ExactRequest]]
    claims: tuple[str, ...] = ()  # the keys of the claims it was made from, in order


def plain(claims: Sequence[ResourceClaim], classes: dict[str, DeviceClass]) -> Kind | None:
    """The claims as a plain kind, or None when their shape is not (the devices are looked at per
    node, ``Selection.odd``)."""
    requests: list[Request] = []
    kinds: dict[tuple[object, ...], tuple[DeviceClass, ExactRequest]] = {}
    total = 0
    for claim in claims:
        if claim.allocation is not None or claim.spec.constraints:
            return None
        for r in claim.spec.requests:
            x = r.exactly
            if x is None or not taken_first_fit(x) or not x.device_class:
                return None
            cls = classes.get(x.device_class)
            if cls is None:
                return None
            kind = (cls.name, cls.selectors, x.selectors)
            kinds.setdefault(kind, (cls, x))
            requests.append(Request(claim.key, r.name, kind, x.count))
            total += x.count
    if not requests or total > RESULTS_MAX:
        return None
    return Kind(tuple(requests), kinds, tuple(c.key for c in claims))


class Counts:
    """The counts over one allocator's pools and devices in use."""

    def __init__(self, allocator: Allocator) -> None:
        self.allocator = allocator
        self._held: npt.NDArray[np.int8] | None = None
        self._version = -1
        # Whether two request kinds' candidates meet, with the selections looked at.
        self._overlap: dict[tuple[object, ...], tuple[Selection, Selection, bool]] = {}

    def selection(self, kind: tuple[object, ...], cls: DeviceClass, x: ExactRequest,
                  nodes: list[Node]) -> Selection:
        """``kind``'s candidates on ``nodes``, kept with the pools while the node list is the same."""
        pools = self.allocator.pools
        held = pools.selections.get(kind)
        if held is not None and held[0] == nodes:  # node by node, identity first: a changed node is a new list
            got = held[1]
            assert isinstance(got, Selection)
            return got
        index = pools.index()
        dev: list[int] = []
        where: list[int] = []
        total = np.zeros(len(nodes), dtype=np.int64)
        odd = np.zeros(len(nodes), dtype=np.bool_)
        served = np.zeros(len(nodes), dtype=np.bool_)
        for i, node in enumerate(nodes):
            _, cands, _, ok = self.allocator.selection(node, cls, x)
            served[i] = pools.serves(node)
            if not ok or any(v.incomplete or v.invalid for v in pools.for_node(node)):
                odd[i] = True
                continue
            dev.extend(index[e.id] for e in cands)
            where.extend([i] * len(cands))
            total[i] = len(cands)
        got = Selection(np.asarray(dev, dtype=np.int64), np.asarray(where, dtype=np.int64), total, odd, served)
        pools.selections[kind] = (list(nodes), got)
        return got

    def _state(self) -> npt.NDArray[np.int8]:
        """Per device number: 0 free, 1 held exclusively, 2 held by shares only (a device that allowed
        multiple allocations when they were made: the allocator looks at those itself)."""
        in_use = self.allocator.in_use
        index = self.allocator.pools.index()
        state = self._held
        if state is not None and self._version == in_use.version:
            return state
        changed = in_use.changed_since(self._version) if state is not None else None
        if state is None or changed is None:
            in_use.track()  # the next look takes only what changed
            state = np.zeros(len(index), dtype=np.int8)
            changed = in_use.allocated_ids()
        else:
            state = state.copy()  # arrays handed out before stay as they were
        for d in changed:
            i = index.get(d)
            if i is not None:
                state[i] = 1 if in_use.exclusive(d) else 2 if in_use.allocated(d) else 0
        self._held, self._version = state, in_use.version
        return state

    def free(self, sel: Selection, n: int) -> Ints:
        """Per node, its candidates no allocation holds."""
        return np.bincount(sel.node[self._state()[sel.dev] == 0], minlength=n).astype(np.int64)

    def stale(self, sel: Selection, n: int) -> Bools:
        """Per node, whether a candidate is held by shares only."""
        return np.bincount(sel.node[self._state()[sel.dev] == 2], minlength=n) > 0

    def fit(self, kind: Kind, nodes: list[Node]) -> tuple[Ints, Bools] | None:
        """Per node, how many pods with claims of ``kind`` its free devices serve (pod after pod,
        each request's first free candidates), and the nodes to ask the allocator about instead
        (``odd``); None when two request kinds share candidates (taking for one leaves the other
        less: the allocator counts those)."""
        sels = self._selections(kind, nodes)
        if sels is None:
            return None
        n = len(nodes)
        need: dict[tuple[object, ...], int] = {}
        for r in kind.requests:
            need[r.kind] = need.get(r.kind, 0) + r.count
        fits = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        odd = np.zeros(n, dtype=np.bool_)
        for k, sel in sels.items():
            np.minimum(fits, self.free(sel, n) // need[k], out=fits)
            odd |= sel.odd | self.stale(sel, n)
        return fits, odd

    def reasons(self, kind: Kind, nodes: list[Node], at: Sequence[int]) -> list[Unallocatable | Literal[False] | None]:
        """For the nodes ``at`` (not ``odd``), why one pod with claims of ``kind`` cannot have its
        devices there, as the allocator says it (None: it can; False: no pool reaches the node)."""
        sels = self._selections(kind, nodes)
        assert sels is not None
        n = len(nodes)
        free = {k: self.free(sel, n) for k, sel in sels.items()}
        served = next(iter(sels.values())).served
        out: list[Unallocatable | Literal[False] | None] = []
        for i in at:
            if not served[i]:
                out.append(False)
                continue
            out.append(self._why(kind, sels, free, i))
        return out

    @staticmethod
    def _why(kind: Kind, sels: dict[tuple[object, ...], Selection], free: dict[tuple[object, ...], Ints],
             i: int) -> Unallocatable | None:
        # Each request alone first (matching, then free), then request after request competing
        # for the same candidates: the allocator's diagnosis, on counts.
        for r in kind.requests:
            have = int(sels[r.kind].total[i])
            if have < r.count:
                return Unallocatable("no-device-matches", r.claim, r.name, f"{have}/{r.count}")
            left = int(free[r.kind][i])
            if left < r.count:
                return Unallocatable("all-taken", r.claim, r.name, f"{left}/{r.count}")
        used: dict[tuple[object, ...], int] = {}
        for r in kind.requests:
            left = int(free[r.kind][i]) - used.get(r.kind, 0)
            if left < r.count:
                return Unallocatable("all-taken", r.claim, r.name, f"{left}/{r.count}")
            used[r.kind] = used.get(r.kind, 0) + r.count
        return None

    def _selections(self, kind: Kind, nodes: list[Node]) -> dict[tuple[object, ...], Selection] | None:
        sels = {k: self.selection(k, cls, x, nodes) for k, (cls, x) in kind.kinds.items()}
        if len(sels) > 1:
            got = list(sels.items())
            for a in range(len(got)):
                for b in range(a + 1, len(got)):
                    (ka, sa), (kb, sb) = got[a], got[b]
                    hit = self._overlap.get((ka, kb))
                    if hit is None or hit[0] is not sa or hit[1] is not sb:
                        hit = self._overlap[(ka, kb)] = (sa, sb, bool(np.intersect1d(sa.dev, sb.dev).size))
                    if hit[2]:
                        return None
        return sels
