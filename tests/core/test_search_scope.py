"""The search scope: one value says how far a job's topology search may reach in its tree, and
placement's styles and preemption's candidates all read it (a hard limit stops at its scope, a soft
one searches on up to the root, running members keep the job inside their domain)."""

from __future__ import annotations

import numpy as np

from koordpy.core.requirement import Requirement, SearchScope
from koordpy.core.tree import TopologyTree, TreeKey

KEY = TreeKey("test")


def tree() -> TopologyTree:
    # spine > block > node: ranks 2, 1 under the cluster's 3.
    nodes = ["n1", "n2", "n3", "n4"]
    return TopologyTree.build(["spine", "block"], nodes, {"n1": ["s1", "b1"], "n2": ["s1", "b2"],
                                                         "n3": ["s2", "b3"], "n4": ["s2", "b4"]})


def test_a_hard_scope_stops_the_search_at_its_rank() -> None:
    t = tree()
    s = SearchScope.of(Requirement(KEY, "tiers", hard=True, scope=1), t)
    assert (s.lowest, s.highest, s.rank, s.anchor, s.limited) == (1, 1, 1, None, True)


def test_a_soft_scope_searches_on_up_to_the_root() -> None:
    t = tree()
    s = SearchScope.of(Requirement(KEY, "tiers", hard=False, scope=1), t)
    assert (s.highest, s.rank, s.limited) == (3, 1, False)


def test_no_scope_is_the_whole_tree() -> None:
    t = tree()
    s = SearchScope.of(Requirement(KEY, "gather", hard=True), t)
    assert (s.highest, s.rank, s.limited, s.outer) == (3, 3, False, 0)


def test_an_anchor_keeps_the_search_inside_the_running_members_domain() -> None:
    t = tree()
    spine = next(d for d in range(len(t.order)) if t.name(d) == "s2")
    s = SearchScope.of(Requirement(KEY, "gather", scope=2, anchor=spine), t)
    everywhere = np.ones(len(t.order), dtype=np.bool_)
    inside = s.within(t, everywhere)
    assert s.outer == spine
    assert {t.name(int(d)) for d in np.flatnonzero(inside) if t.domain_node[d] < 0} == {"s2", "b3", "b4"}
    assert s.holds(spine) and not s.holds(0)
    assert bool(SearchScope.of(Requirement(KEY, "gather"), t).within(t, everywhere).all())


def test_the_lowest_tier_is_found_once_per_tree() -> None:
    # Every placement and preemption dry run makes a SearchScope (once per member in kube-scheduler's
    # group cycle): the lowest tier is the tree's, kept with it, not searched for again each time.
    t = tree()
    assert "lowest_rank" not in vars(t)
    first = SearchScope.of(Requirement(KEY, "tiers", hard=True, scope=2), t)
    assert first.lowest == t.lowest_rank == 1 and "lowest_rank" in vars(t)
    assert SearchScope.of(Requirement(KEY, "gather"), t).lowest == 1


def test_an_anchor_keeps_a_mask_inside_its_subtree_as_the_tree_does() -> None:
    t = tree()
    spine = next(d for d in range(len(t.order)) if t.name(d) == "s1")
    mask = np.ones(len(t.order), dtype=np.bool_)
    scope = SearchScope.of(Requirement(KEY, "gather", scope=2, anchor=spine), t)
    assert np.array_equal(scope.within(t, mask), t.in_subtree(spine, mask))
    assert {t.name(int(d)) for d in np.flatnonzero(t.in_subtree(spine, mask))} == {"s1", "b1", "b2", "n1", "n2"}
