"""The tier-search kernels agree with their plain-Python twins on random HyperNode-like trees
(tiers skipped, nodes at any depth), and what they place is sound."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.core.tree import ROOT, DomainId, TopologyTree
from koordpy.kernels.tiers import add_usage, domain_totals, domain_totals_py, tier_place, tier_place_py


@st.composite
def edge_trees(draw: st.DrawFn) -> TopologyTree:
    """A random forest of domains with strictly decreasing ranks downwards, nodes hung anywhere."""
    n_domains = draw(st.integers(0, 10))
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {}
    ids: list[DomainId] = []
    for i in range(n_domains):
        candidates = [d for d in ids if inner[d][3] >= 2]
        parent = draw(st.sampled_from([ROOT, *candidates])) if candidates else ROOT
        top = inner[parent][3] - 1 if parent != ROOT else 5
        rank = draw(st.integers(1, top))
        d: DomainId = ("hn", f"h{i}")
        inner[d] = (parent, f"tier{rank}", f"h{i}", rank)
        ids.append(d)
    n_nodes = draw(st.integers(1, 14))
    names = [f"n{i}" for i in range(n_nodes)]
    node_parent = {n: draw(st.sampled_from([ROOT, *ids])) for n in names}
    return TopologyTree.from_edges(["t"], names, inner, node_parent, root_rank=6, leaf_rank=-1)


@settings(max_examples=300, deadline=None)
@given(edge_trees(), st.data())
def test_tier_place_parity_and_soundness(tree: TopologyTree, data: st.DataObject) -> None:
    n = len(tree.node_domain)
    r = 2
    free = np.array(data.draw(st.lists(st.lists(st.integers(-2, 12), min_size=r, max_size=r), min_size=n,
                                       max_size=n)), dtype=np.int64)
    alloc_nodes = np.maximum(free, 0) + np.array(data.draw(st.lists(st.lists(st.integers(0, 6), min_size=r,
                                                                                max_size=r), min_size=n,
                                                                       max_size=n)), dtype=np.int64)
    req = np.array(data.draw(st.lists(st.integers(0, 4), min_size=r, max_size=r)), dtype=np.int64)
    if not req.any():
        req[0] = 1
    feasible = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    alloc = domain_totals(alloc_nodes, tree.node_domain, tree.parent)
    assert np.allclose(alloc, domain_totals_py(alloc_nodes, tree.node_domain, tree.parent))
    used = domain_totals(alloc_nodes - np.maximum(free, 0), tree.node_domain, tree.parent)
    inner = [int(d) for d in np.flatnonzero(tree.domain_node < 0)]
    scope = data.draw(st.sampled_from(inner))
    lo, hi = sorted(data.draw(st.lists(st.integers(0, 6), min_size=2, max_size=2)))
    count = data.draw(st.integers(1, 12))
    args = (free, req, feasible, tree.node_domain, tree.domain_node, tree.parent, tree.end, tree.rank,
            tree.name_rank, alloc, used, scope, lo, hi, count)
    chosen, per_node = tier_place(*args)
    chosen_py, per_node_py = tier_place_py(*args)
    assert chosen == chosen_py
    assert per_node.tolist() == per_node_py.tolist()
    if chosen < 0:
        assert per_node.sum() == 0
        return
    # Sound: exactly ``count`` pods, all inside the chosen domain, each node within its room.
    assert per_node.sum() == count
    assert lo <= tree.rank[chosen] <= hi and scope <= chosen < tree.end[scope]
    inside = set(tree.subtree_nodes(chosen).tolist())
    for node, k in enumerate(per_node.tolist()):
        if k:
            assert node in inside and feasible[node]
            assert all(q == 0 or k * q <= f for f, q in zip(free[node], req, strict=True))


def test_lowest_tier_first_then_utilisation_then_offerslot() -> None:
    # Two tier-1 HyperNodes under one tier-2; a job of 2 fits both tier-1s: the fuller one wins.
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {
        ("hn", "top"): (ROOT, "t2", "top", 2),
        ("hn", "a"): (("hn", "top"), "t1", "a", 1),
        ("hn", "b"): (("hn", "top"), "t1", "b", 1),
    }
    names = ["n0", "n1", "n2", "n3"]
    parents: dict[str, DomainId] = {"n0": ("hn", "a"), "n1": ("hn", "a"), "n2": ("hn", "b"), "n3": ("hn", "b")}
    tree = TopologyTree.from_edges(["t"], names, inner, parents, root_rank=3, leaf_rank=-1)
    alloc_nodes = np.full((4, 1), 4, dtype=np.int64)
    used_nodes = np.array([[0], [0], [2], [0]], dtype=np.int64)
    free = alloc_nodes - used_nodes
    req = np.array([2], dtype=np.int64)
    alloc = domain_totals(alloc_nodes, tree.node_domain, tree.parent)
    used = domain_totals(used_nodes, tree.node_domain, tree.parent)
    chosen, per_node = tier_place(free, req, np.ones(4, dtype=np.bool_), tree.node_domain, tree.domain_node,
                                  tree.parent, tree.end, tree.rank, tree.name_rank, alloc, used, 0, 0, 3, 2)
    assert tree.name(chosen) == "b"  # (2 + 4) / 8 beats (0 + 4) / 8
    assert per_node.tolist() == [0, 0, 0, 2]  # one node takes both: the fewest domains
    # Four pods fit no tier-1: the tier-2 takes them, a is filled whole before b is touched.
    chosen, per_node = tier_place(free, req, np.ones(4, dtype=np.bool_), tree.node_domain, tree.domain_node,
                                  tree.parent, tree.end, tree.rank, tree.name_rank, alloc, used, 0, 0, 3, 5)
    assert tree.name(chosen) == "top" and per_node.tolist() == [2, 2, 1, 0]
    # Above the limit nothing is chosen.
    chosen, _ = tier_place(free, req, np.ones(4, dtype=np.bool_), tree.node_domain, tree.domain_node,
                           tree.parent, tree.end, tree.rank, tree.name_rank, alloc, used, 0, 0, 1, 5)
    assert chosen == -1


def test_add_usage_reaches_every_ancestor() -> None:
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {("hn", "a"): (ROOT, "t1", "a", 1)}
    tree = TopologyTree.from_edges(["t"], ["n0", "n1"], inner, {"n0": ("hn", "a")}, root_rank=2, leaf_rank=-1)
    used = np.zeros((len(tree.order), 1), dtype=np.float64)
    add_usage(used, np.array([3, 1], dtype=np.int64), np.array([2], dtype=np.int64), tree.node_domain, tree.parent)
    assert used[0, 0] == 8 and used[tree.index[("hn", "a")], 0] == 6
