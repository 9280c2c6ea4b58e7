"""Offerslot kernels: how many of a job's pods each node and each topology domain can take.

Array conventions (see ``koordpy.core.tree.TopologyTree``): domains are indexed in
depth-first preorder, so a domain's subtree is the contiguous range ``[d, end[d])`` and
walking the indexes backwards visits every child before its parent.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

# The most pods a node may be offered; the pods resource bounds it far below in practice,
# this only guards a pod that requests nothing at all.
UNBOUNDED = 1 << 40


@njit(cache=True, nogil=True)
def node_slots(free: I64, req: I64, feasible: B, i: int) -> int:
    """How many copies of ``req`` fit in node i's ``free`` row; 0 where not feasible."""
    if not feasible[i]:
        return 0
    best: int = UNBOUNDED
    for j in range(req.shape[0]):
        q = req[j]
        if q > 0:
            f = free[i, j]
            k = f // q if f > 0 else 0
            if k < best:
                best = k
    return best


@njit(cache=True, nogil=True)
def node_offerslots(free: I64, req: I64, feasible: B) -> I64:
    """Per node, how many copies of ``req`` fit in ``free`` (N x R); 0 where not feasible."""
    out = np.zeros(free.shape[0], dtype=np.int64)
    for i in range(free.shape[0]):
        out[i] = node_slots(free, req, feasible, i)
    return out


def node_offerslots_py(free: I64, req: I64, feasible: B) -> I64:
    out = []
    for row, ok in zip(free.tolist(), feasible.tolist(), strict=True):
        if not ok:
            out.append(0)
            continue
        fits = [max(f, 0) // q for f, q in zip(row, req.tolist(), strict=True) if q > 0]
        out.append(min(fits) if fits else int(UNBOUNDED))
    return np.array(out, dtype=np.int64)


@njit(cache=True, nogil=True)
def subtree_sums(node_slots: I64, node_domain: I64, parent: I64, multiple: I64) -> I64:
    """Bottom-up offerslots of every domain; a domain with ``multiple[d] > 1`` only offers
    whole multiples of it (the gather rule's podCountMultiple for its layer)."""
    d_count = parent.shape[0]
    sums = np.zeros(d_count, dtype=np.int64)
    for i in range(node_slots.shape[0]):
        sums[node_domain[i]] += node_slots[i]
    for d in range(d_count - 1, -1, -1):
        m = multiple[d]
        if m > 1:
            sums[d] = (sums[d] // m) * m
        p = parent[d]
        if p >= 0:
            sums[p] += sums[d]
    return sums


def subtree_sums_py(node_slots: I64, node_domain: I64, parent: I64, multiple: I64) -> I64:
    children: dict[int, list[int]] = {}
    for d, p in enumerate(parent.tolist()):
        children.setdefault(p, []).append(d)
    own = dict.fromkeys(range(len(parent)), 0)
    for slots, d in zip(node_slots.tolist(), node_domain.tolist(), strict=True):
        own[d] += slots
    out = [0] * len(parent)

    def visit(d: int) -> int:
        total = own[d] + sum(visit(c) for c in children.get(d, []))
        m = int(multiple[d])
        out[d] = total - total % m if m > 1 else total
        return out[d]

    for root in children.get(-1, []):
        visit(root)
    return np.array(out, dtype=np.int64)


@njit(cache=True, nogil=True)
def _ancestors_first_smaller(sums: I64, parent: I64, a: int, b: int) -> int:
    """Compares two domains' ancestor chains layer by layer from their parents up: -1 when ``a``'s
    first differing ancestor offers less, 1 when more, 0 when the chains meet tied. A chain that ends
    first (a node hanging higher for a missing label has fewer ancestors at the same depth) comes
    first, as a shorter tuple does."""
    pa = parent[a]
    pb = parent[b]
    while pa != pb:
        if pa < 0:
            return -1
        if pb < 0:
            return 1
        if sums[pa] != sums[pb]:
            return -1 if sums[pa] < sums[pb] else 1
        pa = parent[pa]
        pb = parent[pb]
    return 0


@njit(cache=True, nogil=True)
def choose_candidate(sums: I64, depth: I64, allowed: B, desired: int, parent: I64, order: I64, chain: bool) -> int:
    """The binpack choice among domains that can take the whole job.

    Deepest domains first (the tightest network scope); among them the smallest offerslot
    (least waste); then, with ``chain``, layer by layer up the ancestor chain, the smaller ancestor
    offerslot (keep the biggest domains whole at every layer, as Koordinator's node ordering does);
    then ``order`` (the natural name order, or the order of the domains' paths of names when the
    caller breaks ties by level values, top level first, as Kueue does). Returns -1 when no allowed
    domain offers ``desired``.
    """
    best = -1
    for d in range(sums.shape[0]):
        if not allowed[d] or sums[d] < desired:
            continue
        if best < 0:
            best = d
            continue
        if depth[d] != depth[best]:
            if depth[d] > depth[best]:
                best = d
            continue
        if sums[d] != sums[best]:
            if sums[d] < sums[best]:
                best = d
            continue
        if chain:
            up = _ancestors_first_smaller(sums, parent, d, best)
            if up != 0:
                if up < 0:
                    best = d
                continue
        if order[d] < order[best]:
            best = d
    return best


def ancestor_sums_py(sums: I64, parent: I64, d: int) -> tuple[int, ...]:
    """The offerslots of ``d``'s ancestors, its parent first, up to the root."""
    out = []
    p = int(parent[d])
    while p >= 0:
        out.append(int(sums[p]))
        p = int(parent[p])
    return tuple(out)


def choose_candidate_py(sums: I64, depth: I64, allowed: B, desired: int, parent: I64, order: I64,
                        chain: bool) -> int:
    fits = [d for d in range(len(sums)) if allowed[d] and sums[d] >= desired]
    if not fits:
        return -1

    def key(d: int) -> tuple[int, int, tuple[int, ...], int]:
        # Once two chains meet they agree to the root; a chain that ends first compares smaller.
        return (-int(depth[d]), int(sums[d]), ancestor_sums_py(sums, parent, d) if chain else (), int(order[d]))

    return min(fits, key=key)
