"""Which pod counts each domain can take under podCountMultiple, and the top-down split.

podCountMultiple is a hard rule: every domain of a layer with multiple ``m`` takes a
multiple of ``m`` pods (0 included). A domain's achievable counts are therefore a set,
not a range: a node takes any count up to its offerslot, an inner domain any sum of its
children's counts that is a multiple of its own ``m``; every set is capped at the job's
size ``D``, beyond which nothing matters.

Sets are kept as an arithmetic progression from 0 (``g > 0``: ``{0, g, 2g, ..., t}``)
whenever they are one, which is always the case without multiples (``g = 1``) and on
uniform layered trees, so the common path costs O(1) per domain. Only a set that is not
a progression (multiples at two layers that do not divide each other, nodes hanging
beside blocks...) gets a bitset of length ``D + 1``: ``g == 0`` and ``row`` points into
``bits``. The arrays follow ``koordpy.core.tree.TopologyTree``: preorder, subtree
``[d, end[d])``, so children are ``c = d + 1; c = end[c]`` while ``c < end[d]``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
B2 = npt.NDArray[np.bool_]

# -- set primitives (numba only; the twins work on Python sets) -----------------------------


@njit(cache=True, nogil=True)
def _norm(g: int, t: int, cap: int) -> tuple[int, int]:
    t = min(t, cap)
    t = (t // g) * g
    return (1, 0) if t == 0 else (g, t)


@njit(cache=True, nogil=True)
def _has(g: int, t: int, b: B, x: int) -> bool:
    if x < 0:
        return False
    if g > 0:
        return x <= t and x % g == 0
    return x < b.shape[0] and bool(b[x])


@njit(cache=True, nogil=True)
def _top(g: int, t: int, b: B) -> int:
    if g > 0:
        return t
    for x in range(b.shape[0] - 1, -1, -1):
        if b[x]:
            return x
    return 0


@njit(cache=True, nogil=True)
def _bits(g: int, t: int, cap: int) -> B:
    out = np.zeros(cap + 1, dtype=np.bool_)
    for x in range(0, t + 1, g):
        out[x] = True
    return out


@njit(cache=True, nogil=True)
def _compact(b: B) -> tuple[int, int, B]:
    """The same set as a progression when it is one (``b`` is then ignored)."""
    g = 0
    t = 0
    for x in range(1, b.shape[0]):
        if b[x]:
            if g == 0:
                g = x
            t = x
    if g == 0:
        return 1, 0, b
    for x in range(t + 1):
        if bool(b[x]) != (x % g == 0):
            return 0, 0, b
    return g, t, b


@njit(cache=True, nogil=True)
def _window(b: B, g: int, t: int) -> B:
    """``b ⊕ {0, g, ..., t}``: per residue class mod g, a sliding count over t/g + 1 steps."""
    n = b.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    width = t // g + 1
    for r0 in range(min(g, n)):
        count = 0
        for x in range(r0, n, g):
            if b[x]:
                count += 1
            if x >= width * g and b[x - width * g]:
                count -= 1
            out[x] = count > 0
    return out


# The two kernels below add and meet progressions through these, which return plain integers:
# the general helpers return an array beside them, and numba's reference counting of those
# arrays, once or twice per domain, was most of each kernel's time while nearly every set is a
# progression (achievable 721 -> 134 us, allocate 395 -> 97 us on bench_placement's 5,223 domains).


@njit(cache=True, nogil=True)
def _sum_p(g1: int, t1: int, g2: int, t2: int, cap: int) -> tuple[int, int]:
    """``_sum`` of two progressions when the sum is one: ``(g, t)``; ``(0, 0)`` when it is not."""
    if t1 == 0:
        return g2, t2
    if t2 == 0:
        return g1, t1
    if g2 % g1 == 0 and (g1 == g2 or t1 >= g2 - g1):
        return _norm(g1, t1 + t2, cap)
    if g1 % g2 == 0 and t2 >= g1 - g2:
        return _norm(g2, t1 + t2, cap)
    return 0, 0


@njit(cache=True, nogil=True)
def _meet_p(g: int, t: int, m: int, cap: int) -> tuple[int, int]:
    """``_meet`` of a progression (``g > 0``), which stays one."""
    if m <= 1:
        return g, t
    a, c = g, m
    while c:
        a, c = c, a % c
    step = g // a * m
    return _norm(step, (t // step) * step, cap)


@njit(cache=True, nogil=True)
def _sum(g1: int, t1: int, b1: B, g2: int, t2: int, b2: B, cap: int) -> tuple[int, int, B]:
    """Minkowski sum capped at ``cap``. Two progressions stay one when the coarser step's
    gaps are covered by the finer progression; otherwise the result is a bitset."""
    if g1 > 0 and t1 == 0:
        return g2, t2, b2
    if g2 > 0 and t2 == 0:
        return g1, t1, b1
    if g1 > 0 and g2 > 0:
        ng, nt = _sum_p(g1, t1, g2, t2, cap)
        if ng > 0:
            return ng, nt, b1
        out = _window(_bits(g1, t1, cap), g2, t2)
    elif g2 > 0:
        out = _window(b1, g2, t2)
    elif g1 > 0:
        out = _window(b2, g1, t1)
    else:
        out = np.zeros(cap + 1, dtype=np.bool_)
        for y in range(cap + 1):
            if b2[y]:
                for x in range(cap + 1 - y):
                    if b1[x]:
                        out[x + y] = True
    return _compact(out)


@njit(cache=True, nogil=True)
def _meet(g: int, t: int, b: B, m: int, cap: int) -> tuple[int, int, B]:
    """The set ∩ mZ; a progression stays one, with step lcm(g, m)."""
    if m <= 1:
        return g, t, b
    if g > 0:
        ng, nt = _meet_p(g, t, m, cap)
        return ng, nt, b
    out = np.zeros(b.shape[0], dtype=np.bool_)
    for x in range(0, b.shape[0], m):
        out[x] = b[x]
    return _compact(out)


@njit(cache=True, nogil=True)
def _store(bits: B2, n_rows: int, b: B) -> B2:
    if n_rows == bits.shape[0]:
        grown = np.zeros((max(4, 2 * n_rows), bits.shape[1]), dtype=np.bool_)
        grown[:n_rows] = bits[:n_rows]
        bits = grown
    bits[n_rows] = b
    return bits


@njit(cache=True, nogil=True)
def _file(g: I64, t: I64, row: I64, bits: B2, n_rows: int, i: int, sg: int, st: int, sb: B) -> tuple[B2, int]:
    """Files the set ``(sg, st, sb)`` as entry ``i`` of a table of sets (``g``, ``t``, ``row``, ``bits``:
    a bitset takes the next row); the table's ``bits`` (grown when full) and the rows it uses."""
    g[i] = sg
    t[i] = st
    if sg == 0:
        bits = _store(bits, n_rows, sb)
        row[i] = n_rows
        n_rows += 1
    return bits, n_rows


# -- achievable counts ----------------------------------------------------------------------


@njit(cache=True, nogil=True)
def achievable(node_slots: I64, node_domain: I64, end: I64, multiple: I64, desired: int) -> tuple[I64, I64, I64, B2]:
    """Per domain, the pod counts (up to ``desired``) it can take with every domain of a
    layer with ``multiple[d] > 1`` taking a multiple of it: ``(g, t, row, bits)`` as in
    the module docstring."""
    n = end.shape[0]
    cap = desired
    own = np.zeros(n, dtype=np.int64)
    for i in range(node_slots.shape[0]):
        own[node_domain[i]] += node_slots[i]
    g = np.zeros(n, dtype=np.int64)
    t = np.zeros(n, dtype=np.int64)
    row = np.full(n, -1, dtype=np.int64)
    bits = np.zeros((0, cap + 1), dtype=np.bool_)
    empty = np.zeros(0, dtype=np.bool_)
    n_rows = 0
    # The running sum's bitset: read only while the sum is not a progression (cg == 0), which only
    # _sum makes it, setting cb as it does; set once here rather than per domain, since each
    # assignment of an array is reference-counted (the note above _sum_p).
    cb = empty
    for d in range(n - 1, -1, -1):
        if end[d] == d + 1:  # a node (or the root of an empty tree)
            cg, ct = _norm(1, max(own[d], 0), cap)
        else:
            cg, ct = 1, 0
            c = d + 1
            while c < end[d]:
                gc, tc = g[c], t[c]
                ng, nt = 0, 0
                if cg > 0 and gc > 0:
                    ng, nt = _sum_p(cg, ct, gc, tc, cap)
                if ng > 0:
                    cg, ct = ng, nt
                else:
                    cg, ct, cb = _sum(cg, ct, cb, gc, tc, bits[row[c]] if gc == 0 else empty, cap)
                c = end[c]
        if cg > 0:
            if multiple[d] > 1:
                cg, ct = _meet_p(cg, ct, multiple[d], cap)
            g[d], t[d] = cg, ct
        else:
            cg, ct, cb = _meet(cg, ct, cb, multiple[d], cap)
            bits, n_rows = _file(g, t, row, bits, n_rows, d, cg, ct, cb)
    return g, t, row, bits[:n_rows].copy()


def achievable_py(node_slots: I64, node_domain: I64, end: I64, multiple: I64, desired: int) -> list[set[int]]:
    """The same sets, spelled out: ``result[d]`` is the set of counts domain d can take."""
    n = len(end)
    own = [0] * n
    for slots, d in zip(node_slots.tolist(), node_domain.tolist(), strict=True):
        own[d] += slots
    out: list[set[int]] = [set() for _ in range(n)]
    for d in range(n - 1, -1, -1):
        if int(end[d]) == d + 1:
            reach = set(range(min(max(own[d], 0), desired) + 1))
        else:
            reach = {0}
            for c in _children_py(end, d):
                reach = _plus_py(reach, out[c], desired)
        m = int(multiple[d])
        out[d] = {x for x in reach if x % m == 0} if m > 1 else reach
    return out


def as_sets(g: I64, t: I64, row: I64, bits: B2) -> list[set[int]]:
    """The kernel's representation as Python sets (for the twins and the tests)."""
    out: list[set[int]] = []
    for gd, td, rd in zip(g.tolist(), t.tolist(), row.tolist(), strict=True):
        out.append(set(range(0, td + 1, gd)) if gd > 0 else {int(x) for x in np.flatnonzero(bits[rd])})
    return out


@njit(cache=True, nogil=True)
def contains(g: I64, t: I64, row: I64, bits: B2, x: int) -> B:
    """Per domain, whether it can take exactly ``x`` pods."""
    n = g.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    empty = np.zeros(0, dtype=np.bool_)
    for d in range(n):
        out[d] = _has(g[d], t[d], bits[row[d]] if g[d] == 0 else empty, x)
    return out


def contains_py(g: I64, t: I64, row: I64, bits: B2, x: int) -> B:
    return np.array([x in s for s in as_sets(g, t, row, bits)], dtype=np.bool_)


def _plus_py(a: set[int], b: set[int], cap: int) -> set[int]:
    """``{x + y <= cap}``, through Python integers as bitsets so big twins stay usable."""
    mask = sum(1 << x for x in a)
    reach = 0
    for y in b:
        reach |= mask << y
    reach &= (1 << (cap + 1)) - 1
    return {i for i, bit in enumerate(reversed(bin(reach)[2:])) if bit == "1"}


def _children_py(end: I64, d: int) -> list[int]:
    out = []
    c = d + 1
    while c < int(end[d]):
        out.append(c)
        c = int(end[c])
    return out


# -- the split ------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def allocate(sums: I64, end: I64, name_rank: I64, g: I64, t: I64, row: I64, bits: B2,
             chosen: int, desired: int) -> I64:
    """Top-down split of ``desired`` pods over the subtree of ``chosen`` (which must be able
    to take them), into as few children as the greedy rule finds, at every level.

    Children in order of the most they can take (then name): before each one, if some
    unused child can take all that remains, the one with the least offerslot (then name)
    takes it and the split is done; otherwise the current child takes the most it can
    while leaving a remainder the later children can still take. Returns per-domain counts
    (0 outside the subtree)."""
    n = end.shape[0]
    cap = desired
    empty = np.zeros(0, dtype=np.bool_)
    alloc = np.zeros(n, dtype=np.int64)
    alloc[chosen] = desired
    for d in range(chosen, end[chosen]):
        r = alloc[d]
        if r == 0 or end[d] == d + 1:
            continue
        k = 0
        c = d + 1
        while c < end[d]:
            k += 1
            c = end[c]
        kids = np.empty(k, dtype=np.int64)
        c = d + 1
        for i in range(k):
            kids[i] = c
            c = end[c]
        kids = kids[np.argsort(name_rank[kids])]
        top = np.empty(k, dtype=np.int64)
        for i in range(k):
            c = kids[i]
            top[i] = t[c] if g[c] > 0 else _top(g[c], t[c], bits[row[c]])
        order = np.argsort(-top, kind="mergesort")  # stable: name order among equals
        kids = kids[order]
        top = top[order]
        # rest[i]: what kids[i:] can take together; rest[k] = {0}.
        sg = np.ones(k + 1, dtype=np.int64)
        st = np.zeros(k + 1, dtype=np.int64)
        srow = np.full(k + 1, -1, dtype=np.int64)
        sbits = np.zeros((0, cap + 1), dtype=np.bool_)
        n_rows = 0
        for i in range(k - 1, -1, -1):
            c = kids[i]
            ng, nt = 0, 0
            if g[c] > 0 and sg[i + 1] > 0:
                ng, nt = _sum_p(g[c], t[c], sg[i + 1], st[i + 1], cap)
            if ng > 0:
                sg[i], st[i] = ng, nt
                continue
            ng, nt, nb = _sum(g[c], t[c], bits[row[c]] if g[c] == 0 else empty,
                              sg[i + 1], st[i + 1], sbits[srow[i + 1]] if sg[i + 1] == 0 else empty, cap)
            sbits, n_rows = _file(sg, st, srow, sbits, n_rows, i, ng, nt, nb)
        i = 0
        while r > 0 and i < k:
            best = -1
            j = i
            while j < k and top[j] >= r:
                c = kids[j]
                if (r <= t[c] and r % g[c] == 0 if g[c] > 0 else _has(g[c], t[c], bits[row[c]], r)) and (
                        best < 0 or sums[c] < sums[best] or (sums[c] == sums[best] and name_rank[c] < name_rank[best])):
                    best = c
                j += 1
            if best >= 0:
                alloc[best] = r
                break
            c = kids[i]
            cb = bits[row[c]] if g[c] == 0 else empty
            rb = sbits[srow[i + 1]] if sg[i + 1] == 0 else empty
            step = g[c] if g[c] > 0 else 1
            a = (min(r, top[i]) // step) * step
            while a > 0 and not (_has(g[c], t[c], cb, a) and _has(sg[i + 1], st[i + 1], rb, r - a)):
                a -= step
            alloc[c] = a
            r -= a
            i += 1
    return alloc


def allocate_py(sums: I64, end: I64, name_rank: I64, g: I64, t: I64, row: I64, bits: B2,
                chosen: int, desired: int) -> I64:
    sets = as_sets(g, t, row, bits)
    alloc = [0] * len(end)

    def split(d: int, amount: int) -> None:
        alloc[d] = amount
        kids = sorted(_children_py(end, d), key=lambda c: (-max(sets[c]), int(name_rank[c])))
        rest = [{0}]  # rest[j]: what the last j kids can take together
        for c in reversed(kids):
            rest.append(_plus_py(rest[-1], sets[c], desired))
        for i, c in enumerate(kids):
            if amount == 0:
                return
            takers = [x for x in kids[i:] if amount in sets[x]]
            if takers:
                split(min(takers, key=lambda x: (int(sums[x]), int(name_rank[x]))), amount)
                return
            later = rest[len(kids) - i - 1]
            give = max(a for a in sets[c] if a <= amount and amount - a in later)
            split(c, give)
            amount -= give

    split(chosen, desired)
    return np.array(alloc, dtype=np.int64)

