"""Each numba kernel agrees with its plain-Python twin on random trees and clusters."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.core.tree import TopologyTree
from koordpy.kernels import (
    allocate,
    allocate_py,
    choose_candidate,
    choose_candidate_py,
    node_offerslots,
    node_offerslots_py,
    subtree_sums,
    subtree_sums_py,
)


@st.composite
def trees(draw: st.DrawFn) -> TopologyTree:
    n_layers = draw(st.integers(0, 3))
    n_nodes = draw(st.integers(1, 24))
    names = [f"node-{i}" for i in range(n_nodes)]
    paths = {n: draw(st.lists(st.sampled_from("abc"), min_size=0, max_size=n_layers)) for n in names}
    return TopologyTree.build([f"L{i}" for i in range(n_layers)], names, paths)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.integers(1, 4), st.data())
def test_node_offerslots_parity(n: int, r: int, data: st.DataObject) -> None:
    free = np.array(data.draw(st.lists(st.lists(st.integers(-5, 40), min_size=r, max_size=r), min_size=n, max_size=n)),
                    dtype=np.int64)
    req = np.array(data.draw(st.lists(st.integers(0, 9), min_size=r, max_size=r)), dtype=np.int64)
    feasible = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    assert node_offerslots(free, req, feasible).tolist() == node_offerslots_py(free, req, feasible).tolist()


@settings(max_examples=200, deadline=None)
@given(trees(), st.data())
def test_tree_kernels_parity(tree: TopologyTree, data: st.DataObject) -> None:
    n = len(tree.node_domain)
    d = len(tree.order)
    slots = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), dtype=np.int64)
    multiple = np.array(data.draw(st.lists(st.sampled_from([1, 1, 2, 3]), min_size=d, max_size=d)), dtype=np.int64)
    sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
    assert sums.tolist() == subtree_sums_py(slots, tree.node_domain, tree.parent, multiple).tolist()

    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=d, max_size=d)), dtype=np.bool_)
    desired = data.draw(st.integers(1, 20))
    chosen = choose_candidate(sums, tree.depth, allowed, desired, tree.parent, tree.name_rank)
    assert chosen == choose_candidate_py(sums, tree.depth, allowed, desired, tree.parent, tree.name_rank)
    if chosen >= 0:
        alloc = allocate(sums, tree.parent, tree.end, chosen, desired)
        assert alloc.tolist() == allocate_py(sums, tree.parent, tree.end, chosen, desired).tolist()
        # Every pod lands on a node of the chosen domain, and no domain takes more than it offers.
        nodes = tree.subtree_nodes(chosen)
        assert int(alloc[tree.node_domain[nodes]].sum()) == desired
        assert bool(np.all(alloc <= np.maximum(sums, 0) + (np.arange(d) == chosen) * desired))


def test_sums_round_down_to_pod_count_multiple() -> None:
    tree = TopologyTree.build(["Block"], ["a", "b", "c"], {"a": ["x"], "b": ["x"], "c": ["y"]})
    multiple = np.ones(len(tree.order), dtype=np.int64)
    multiple[tree.depth == 1] = 4
    sums = subtree_sums(np.array([3, 2, 3], dtype=np.int64), tree.node_domain, tree.parent, multiple)
    assert sums[tree.index[("x",)]] == 4 and sums[tree.index[("y",)]] == 0 and sums[0] == 4


def test_choose_prefers_deepest_then_tightest_then_smaller_parent() -> None:
    tree = TopologyTree.build(["S", "B"], [f"n{i}" for i in range(7)],
                              {"n0": ["s0", "b0"], "n1": ["s0", "b0"], "n2": ["s0", "b1"],
                               "n3": ["s1", "b2"], "n4": ["s1", "b2"], "n5": ["s1", "b3"], "n6": ["s1", "b3"]})
    slots = np.ones(7, dtype=np.int64)
    sums = subtree_sums(slots, tree.node_domain, tree.parent, np.ones(len(tree.order), dtype=np.int64))
    everywhere = np.ones(len(tree.order), dtype=np.bool_)
    # Two pods: blocks b0, b2, b3 each offer exactly 2; b0's spine offers 3 < 4, so b0 wins.
    pick = choose_candidate(sums, tree.depth, everywhere, 2, tree.parent, tree.name_rank)
    assert tree.label(pick) == "B/b0"
    # Three pods: no block fits; s0 offers exactly 3.
    assert tree.label(choose_candidate(sums, tree.depth, everywhere, 3, tree.parent, tree.name_rank)) == "S/s0"
    assert choose_candidate(sums, tree.depth, everywhere, 8, tree.parent, tree.name_rank) == -1
