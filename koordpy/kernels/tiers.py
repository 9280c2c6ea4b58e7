"""Tier-by-tier placement inside one scope: Volcano's search for the lowest tier that fits.

``tier_place`` places ``count`` copies of one request inside the subtree of ``scope``: among the
inner domains of that subtree whose rank lies in ``[lo, hi]`` and whose offerslot takes them all,
the lowest rank wins (the tightest network tier); within a rank, the highest utilisation of the
requested resources once the pods are placed (binpack), then the smaller offerslot, then the name.
The pods are then spread top-down over the fewest children: the smallest child that takes all that
remains, else the largest child whole and again. One call places a job or one sub-group; the caller
subtracts what was placed (``free`` and ``used``) before the next sub-group, so several sub-groups of
one job never count the same room twice.

Arrays follow ``koordpy.core.tree.TopologyTree``: preorder, subtree ``[d, end[d])``, a node's leaf
``node_domain[n]`` and back ``domain_node[d]`` (-1 for inner domains). ``alloc`` and ``used`` are the
per-domain totals (D x R, floats) of ``domain_totals``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

from koordpy.kernels.offerslot import UNBOUNDED, node_slots

I64 = npt.NDArray[np.int64]
I2 = npt.NDArray[np.int64]
F2 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]


@njit(cache=True, nogil=True)
def domain_totals(values: I2, node_domain: I64, parent: I64) -> F2:
    """Per domain, the sum of ``values`` (N x R) over its nodes."""
    d_count = parent.shape[0]
    out = np.zeros((d_count, values.shape[1]), dtype=np.float64)
    for n in range(values.shape[0]):
        out[node_domain[n]] += values[n]
    for d in range(d_count - 1, 0, -1):
        out[parent[d]] += out[d]
    return out


def domain_totals_py(values: I2, node_domain: I64, parent: I64) -> F2:
    out = [[0.0] * values.shape[1] for _ in range(len(parent))]
    for row, d in zip(values.tolist(), node_domain.tolist(), strict=True):
        while d >= 0:
            out[d] = [a + b for a, b in zip(out[d], row, strict=True)]
            d = int(parent[d])
    return np.array(out, dtype=np.float64).reshape(len(parent), values.shape[1])


@njit(cache=True, nogil=True)
def _score(alloc: F2, used: F2, req: I64, d: int, count: int) -> float:
    total = 0.0
    k = 0
    for j in range(req.shape[0]):
        if req[j] > 0 and alloc[d, j] > 0:
            total += (used[d, j] + count * req[j]) / alloc[d, j]
            k += 1
    return total / k if k > 0 else 0.0


@njit(cache=True, nogil=True)
def _before(rank: I64, sums: I64, name_rank: I64, d: int, score: float, best: int, best_score: float) -> bool:
    """Whether domain ``d`` (of binpack ``score``) wins over ``best``: the lower rank, then the higher
    score, then the smaller offerslot, then the name (the twin's ``min`` key, in that order)."""
    if rank[d] != rank[best]:
        return bool(rank[d] < rank[best])
    if score != best_score:
        return score > best_score
    if sums[d] != sums[best]:
        return bool(sums[d] < sums[best])
    return bool(name_rank[d] < name_rank[best])


@njit(cache=True, nogil=True)
def tier_place(free: I2, req: I64, feasible: B, node_domain: I64, domain_node: I64, parent: I64, end: I64,
               rank: I64, name_rank: I64, alloc: F2, used: F2, scope: int, lo: int, hi: int,
               count: int) -> tuple[int, I64]:
    """The chosen domain (-1 if none fits) and the pods per node; see the module docstring."""
    n_nodes = free.shape[0]
    out = np.zeros(n_nodes, dtype=np.int64)
    sums = np.zeros(parent.shape[0], dtype=np.int64)
    for d in range(end[scope] - 1, scope - 1, -1):
        n = domain_node[d]
        if n >= 0:
            sums[d] += node_slots(free, req, feasible, n)
        if d > scope:
            sums[parent[d]] += sums[d]
    best = -1
    best_score = 0.0
    for d in range(scope, end[scope]):
        if domain_node[d] >= 0 or rank[d] < lo or rank[d] > hi or sums[d] < count:
            continue
        s = _score(alloc, used, req, d, count)
        if best < 0 or _before(rank, sums, name_rank, d, s, best, best_score):
            best, best_score = d, s
    if best < 0:
        return -1, out
    d = best
    need = count
    while need > 0:
        n = domain_node[d]
        if n >= 0:
            out[n] += need
            break
        fit = -1
        big = -1
        c = d + 1
        while c < end[d]:
            if sums[c] >= need and (fit < 0 or sums[c] < sums[fit]
                                    or (sums[c] == sums[fit] and name_rank[c] < name_rank[fit])):
                fit = c
            if sums[c] > 0 and (big < 0 or sums[c] > sums[big]
                                or (sums[c] == sums[big] and name_rank[c] < name_rank[big])):
                big = c
            c = end[c]
        if fit >= 0:
            d = fit
            continue
        # No child takes what remains: the largest is filled whole and the rest placed beside it.
        for e in range(big, end[big]):
            m = domain_node[e]
            if m >= 0:
                out[m] += node_slots(free, req, feasible, m)
        need -= sums[big]
        sums[d] -= sums[big]
        sums[big] = 0
    return best, out


def tier_place_py(free: I2, req: I64, feasible: B, node_domain: I64, domain_node: I64, parent: I64, end: I64,
                  rank: I64, name_rank: I64, alloc: F2, used: F2, scope: int, lo: int, hi: int,
                  count: int) -> tuple[int, I64]:
    def slots(n: int) -> int:
        if not feasible[n]:
            return 0
        fits = [max(int(f), 0) // int(q) for f, q in zip(free[n], req, strict=True) if q > 0]
        return min(fits) if fits else int(UNBOUNDED)

    subtree = range(scope, int(end[scope]))
    sums = {d: sum(slots(int(domain_node[e])) for e in range(d, int(end[d])) if domain_node[e] >= 0)
            for d in subtree}

    def score(d: int) -> float:
        parts = [(float(used[d, j]) + count * float(req[j])) / float(alloc[d, j])
                 for j in range(len(req)) if req[j] > 0 and alloc[d, j] > 0]
        total = 0.0
        for p in parts:
            total += p
        return total / len(parts) if parts else 0.0

    fits = [d for d in subtree if domain_node[d] < 0 and lo <= rank[d] <= hi and sums[d] >= count]
    out = np.zeros(free.shape[0], dtype=np.int64)
    if not fits:
        return -1, out
    best = min(fits, key=lambda d: (int(rank[d]), -score(d), sums[d], int(name_rank[d])))

    def children(d: int) -> list[int]:
        kids, c = [], d + 1
        while c < end[d]:
            kids.append(c)
            c = int(end[c])
        return kids

    d, need = best, count
    while need > 0:
        if domain_node[d] >= 0:
            out[domain_node[d]] += need
            break
        kids = children(d)
        takers = [c for c in kids if sums[c] >= need]
        if takers:
            d = min(takers, key=lambda c: (sums[c], int(name_rank[c])))
            continue
        big = min((c for c in kids if sums[c] > 0), key=lambda c: (-sums[c], int(name_rank[c])))
        for e in range(big, int(end[big])):
            if domain_node[e] >= 0:
                out[domain_node[e]] += slots(int(domain_node[e]))
        need -= sums[big]
        sums[d] -= sums[big]
        sums[big] = 0
    return best, out


@njit(cache=True, nogil=True)
def add_usage(used: F2, per_node: I64, req: I64, node_domain: I64, parent: I64) -> None:
    """Adds ``per_node[n]`` copies of ``req`` to the totals of every domain above node n."""
    for n in range(per_node.shape[0]):
        k = per_node[n]
        if k == 0:
            continue
        d = node_domain[n]
        while d >= 0:
            for j in range(req.shape[0]):
                used[d, j] += k * req[j]
            d = parent[d]
