"""Loading the compiled kernels ahead of their first real use.

numba loads a kernel from its cache on the first call, and the first load of all pays for
setting numba up (about 0.3 s). A caller that has something else to wait for (the CLI while
its manifests are parsed, the live scheduler before its first cycle) calls ``warm_up`` then.
The arrays here have the dtypes placement passes, so the same compiled versions are loaded.
"""

from __future__ import annotations

import numpy as np

from koordpy.kernels.offerslot import choose_candidate, node_offerslots, subtree_sums
from koordpy.kernels.preempt import candidate_costs, order_candidates, reclaimable_free, reprieve
from koordpy.kernels.split import achievable, allocate, contains
from koordpy.kernels.tiers import add_usage, domain_totals, tier_place


def warm_up() -> None:
    # A cluster root over two nodes, each with room for one pod.
    parent = np.array([-1, 0, 0], dtype=np.int64)
    end = np.array([3, 2, 3], dtype=np.int64)
    depth = np.array([0, 1, 1], dtype=np.int64)
    rank = np.arange(3, dtype=np.int64)
    node_domain = np.array([1, 2], dtype=np.int64)
    slots = node_offerslots(np.ones((2, 2), dtype=np.int64), np.ones(2, dtype=np.int64), np.ones(2, dtype=np.bool_))
    multiple = np.ones(3, dtype=np.int64)
    sums = subtree_sums(slots, node_domain, parent, multiple)
    sets = achievable(slots, node_domain, end, multiple, 2)
    allowed = contains(*sets, 2) & np.ones(3, dtype=np.bool_)
    chosen = int(choose_candidate(sums, depth, allowed, 2, parent, rank, True))
    allocate(sums, end, rank, *sets, chosen, 2)
    # Volcano's tier search over the same tree.
    domain_node = np.array([-1, 0, 1], dtype=np.int64)
    totals = domain_totals(np.ones((2, 2), dtype=np.int64), node_domain, parent)
    _, per_node = tier_place(np.ones((2, 2), dtype=np.int64), np.ones(2, dtype=np.int64), np.ones(2, dtype=np.bool_),
                             node_domain, domain_node, parent, end, rank, rank, totals, totals.copy(), 0, 0, 3, 2)
    add_usage(totals, per_node, np.ones(2, dtype=np.int64), node_domain, parent)
    # Preemption: one victim on the first node, one candidate of both nodes.
    v_node = np.zeros(1, dtype=np.int64)
    v_req = np.ones((1, 2), dtype=np.int64)
    reclaim = reclaimable_free(np.ones((2, 2), dtype=np.int64), v_node, v_req)
    of_node = np.zeros(2, dtype=np.int64)
    evicted = reprieve(reclaim, np.ones(2, dtype=np.int64), np.ones(2, dtype=np.bool_), 2, of_node,
                       np.array([3], dtype=np.int64), v_node, v_req, np.zeros(1, dtype=np.bool_),
                       np.full(2, 1 << 40, dtype=np.int64))
    one = np.zeros(1, dtype=np.int64)
    ones = np.ones(1, dtype=np.int64)
    top, jobs, pods = candidate_costs(evicted, one, one, one, one, np.ones(1, dtype=np.bool_), ones, ones, ones, 1)
    order_candidates(one, top, jobs, pods, one, one, 8)
