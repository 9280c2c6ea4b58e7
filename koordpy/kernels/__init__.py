"""Numba kernels over plain numpy arrays, and their plain-Python twins.

Belongs here: the inner loops of placement (per-node offerslots, bottom-up sums over the
topology tree, the counts each domain can take under podCountMultiple, the candidate/binpack
choice, the top-down allocation, Volcano's tier-by-tier search, preemption's reclaimable room,
reprieve and candidate costs). Each kernel takes and returns numpy arrays and scalars
only, so it knows nothing of pods, nodes or the API; each has a twin written in plain
Python that the parity tests hold it to. Does not belong here: anything with names,
objects or I/O.
"""

from koordpy.kernels.offerslot import (
    ancestor_sums_py,
    choose_candidate,
    choose_candidate_py,
    node_offerslots,
    node_offerslots_py,
    subtree_sums,
    subtree_sums_py,
)
from koordpy.kernels.split import (
    achievable,
    achievable_py,
    allocate,
    allocate_py,
    as_sets,
    contains,
    contains_py,
)
from koordpy.kernels.tiers import add_usage, domain_totals, domain_totals_py, tier_place, tier_place_py
from koordpy.kernels.warm import warm_up

__all__ = [
    "achievable",
    "achievable_py",
    "add_usage",
    "allocate",
    "allocate_py",
    "ancestor_sums_py",
    "as_sets",
    "choose_candidate",
    "choose_candidate_py",
    "contains",
    "contains_py",
    "domain_totals",
    "domain_totals_py",
    "node_offerslots",
    "node_offerslots_py",
    "subtree_sums",
    "subtree_sums_py",
    "tier_place",
    "tier_place_py",
    "warm_up",
]
