"""Each numba kernel agrees with its plain-Python twin on random trees and clusters."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.core.tree import TopologyTree
from koordpy.kernels import (
    achievable,
    achievable_py,
    allocate,
    allocate_py,
    as_sets,
    choose_candidate,
    choose_candidate_py,
    contains,
    contains_py,
    node_offerslots,
    node_offerslots_py,
    subtree_sums,
    subtree_sums_py,
)


@st.composite
def trees(draw: st.DrawFn, max_nodes: int = 24) -> TopologyTree:
    n_layers = draw(st.integers(0, 3))
    n_nodes = draw(st.integers(1, max_nodes))
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


@settings(max_examples=300, deadline=None)
@given(trees(), st.data())
def test_tree_kernels_parity(tree: TopologyTree, data: st.DataObject) -> None:
    n = len(tree.node_domain)
    d = len(tree.order)
    slots = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), dtype=np.int64)
    multiple = np.array(data.draw(st.lists(st.sampled_from([1, 1, 1, 2, 3, 4]), min_size=d, max_size=d)),
                        dtype=np.int64)
    sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
    assert sums.tolist() == subtree_sums_py(slots, tree.node_domain, tree.parent, multiple).tolist()

    desired = data.draw(st.integers(1, 20))
    g, t, row, bits = achievable(slots, tree.node_domain, tree.end, multiple, desired)
    sets = as_sets(g, t, row, bits)
    assert sets == achievable_py(slots, tree.node_domain, tree.end, multiple, desired)
    fits = contains(g, t, row, bits, desired)
    assert fits.tolist() == contains_py(g, t, row, bits, desired).tolist()
    # A domain that can take the job offers at least as many slots as the job has pods.
    assert bool(np.all(sums[fits] >= desired))

    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=d, max_size=d)), dtype=np.bool_)
    # Both tie-breaks: the ancestor chain, and the order of the domains' paths (Kueue's).
    values = choose_candidate(sums, tree.depth, allowed & fits, desired, tree.parent, tree.path_rank, False)
    assert values == choose_candidate_py(sums, tree.depth, allowed & fits, desired, tree.parent, tree.path_rank,
                                         False)
    chosen = choose_candidate(sums, tree.depth, allowed & fits, desired, tree.parent, tree.name_rank, True)
    assert chosen == choose_candidate_py(sums, tree.depth, allowed & fits, desired, tree.parent, tree.name_rank,
                                         True)
    if chosen >= 0:
        alloc = allocate(sums, tree.end, tree.name_rank, g, t, row, bits, chosen, desired)
        assert alloc.tolist() == allocate_py(sums, tree.end, tree.name_rank, g, t, row, bits, chosen,
                                             desired).tolist()
        assert_valid_split(tree, slots, multiple, alloc, chosen, desired)


def assert_valid_split(tree: TopologyTree, slots: np.ndarray, multiple: np.ndarray, alloc: np.ndarray,
                       chosen: int, desired: int) -> None:
    """Every pod on a node of the chosen domain, no node over its slots, each inner domain's
    count the sum of its children's, every count a multiple of its layer's podCountMultiple."""
    assert int(alloc[chosen]) == desired
    nodes = tree.subtree_nodes(chosen)
    assert int(alloc[tree.node_domain[nodes]].sum()) == desired
    assert bool(np.all(alloc[tree.node_domain] <= slots))
    for dom in range(len(tree.order)):
        if not chosen <= dom < tree.end[chosen]:
            assert alloc[dom] == 0
            continue
        assert alloc[dom] % multiple[dom] == 0
        kids = tree.children(dom)
        if kids:
            assert int(alloc[kids].sum()) == alloc[dom]


@settings(max_examples=150, deadline=None)
@given(trees(max_nodes=7), st.data())
def test_achievable_is_exactly_what_some_split_reaches(tree: TopologyTree, data: st.DataObject) -> None:
    # Brute force over every per-node count on small trees: a total is achievable at the
    # root iff some assignment of nodes gives it with every domain a whole multiple.
    n = len(tree.node_domain)
    d = len(tree.order)
    slots = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.int64)
    multiple = np.array(data.draw(st.lists(st.sampled_from([1, 2, 3]), min_size=d, max_size=d)), dtype=np.int64)
    desired = 21
    reached: set[int] = set()
    for counts in np.ndindex(*(int(s) + 1 for s in slots)):
        per = np.zeros(d, dtype=np.int64)
        per[tree.node_domain] = counts
        for dom in range(d - 1, 0, -1):
            per[tree.parent[dom]] += per[dom]
        if all(per[x] % multiple[x] == 0 for x in range(d)):
            reached.add(int(per[0]))
    g, t, row, bits = achievable(slots, tree.node_domain, tree.end, multiple, desired)
    assert as_sets(g, t, row, bits)[0] == reached


def test_sets_that_are_not_progressions_use_bitsets() -> None:
    # A node hanging beside two-pod blocks: {0, 1} + {0, 2} + {0, 2} = {0..5}, but with the
    # blocks at {0, 4}: {0, 1, 4, 5}, which is no progression.
    tree = TopologyTree.build(["S", "B"], ["a", "b", "c", "d", "e"],
                              {"a": ["s", "x"], "b": ["s", "x"], "c": ["s", "x"], "d": ["s", "x"], "e": ["s"]})
    multiple = np.ones(len(tree.order), dtype=np.int64)
    multiple[tree.depth == 2] = 4
    slots = np.ones(5, dtype=np.int64)
    g, t, row, bits = achievable(slots, tree.node_domain, tree.end, multiple, 8)
    s = tree.index[("s",)]
    assert g[s] == 0 and as_sets(g, t, row, bits)[s] == {0, 1, 4, 5}
    assert contains(g, t, row, bits, 5)[s] and not contains(g, t, row, bits, 3)[s]
    sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
    alloc = allocate(sums, tree.end, tree.name_rank, g, t, row, bits, s, 5)
    assert alloc[tree.index[("s", "x")]] == 4 and alloc[tree.index[("\0node", "e")]] == 1


def test_split_prefers_the_smallest_child_that_takes_the_rest() -> None:
    # Blocks with 1, 1, 4 and 3 one-slot nodes; 5 pods: the 4-block, then the first 1-block.
    layout = {"b0": 1, "b1": 1, "b2": 4, "b3": 3}
    names = [f"{b}-{i}" for b, k in layout.items() for i in range(k)]
    tree = TopologyTree.build(["B"], names, {n: [n.split("-")[0]] for n in names})
    slots = np.ones(len(names), dtype=np.int64)
    multiple = np.ones(len(tree.order), dtype=np.int64)
    sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
    g, t, row, bits = achievable(slots, tree.node_domain, tree.end, multiple, 5)
    alloc = allocate(sums, tree.end, tree.name_rank, g, t, row, bits, 0, 5)
    assert {b: int(alloc[tree.index[(b,)]]) for b in layout} == {"b0": 1, "b1": 0, "b2": 4, "b3": 0}
    # 3 pods: b3 takes them all, though b2 offers more.
    g, t, row, bits = achievable(slots, tree.node_domain, tree.end, multiple, 3)
    alloc = allocate(sums, tree.end, tree.name_rank, g, t, row, bits, 0, 3)
    assert alloc[tree.index[("b3",)]] == 3


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
    pick = choose_candidate(sums, tree.depth, everywhere, 2, tree.parent, tree.name_rank, True)
    assert tree.label(pick) == "B/b0"
    # Three pods: no block fits; s0 offers exactly 3.
    assert tree.label(choose_candidate(sums, tree.depth, everywhere, 3, tree.parent, tree.name_rank, True)) == "S/s0"
    assert choose_candidate(sums, tree.depth, everywhere, 8, tree.parent, tree.name_rank, True) == -1


def test_choose_breaks_ties_layer_by_layer_up_to_the_root() -> None:
    # Three layers: nodes n0 and n2 tie on their own offerslot (2) and on their racks' (2); their
    # pods' spines differ (s0: 2 + 3 + 3 = 8 under z0, s1: 2 + 1 + 1 = 4 under z0): n2 wins. When the
    # spines tie too, the zones decide (z1 offers less than z0).
    tree = TopologyTree.build(["Z", "S", "R"], [f"n{i}" for i in range(6)],
                              {"n0": ["z0", "s0", "r0"], "n1": ["z0", "s0", "r1"],
                               "n2": ["z0", "s1", "r2"], "n3": ["z0", "s1", "r3"],
                               "n4": ["z1", "s2", "r4"], "n5": ["z1", "s2", "r5"]})
    everywhere = np.ones(len(tree.order), dtype=np.bool_)
    ones = np.ones(len(tree.order), dtype=np.int64)

    def pick(slots: list[int]) -> str:
        sums = subtree_sums(np.array(slots, dtype=np.int64), tree.node_domain, tree.parent, ones)
        chosen = choose_candidate(sums, tree.depth, everywhere, 2, tree.parent, tree.name_rank, True)
        assert chosen == choose_candidate_py(sums, tree.depth, everywhere, 2, tree.parent, tree.name_rank, True)
        return tree.label(chosen)

    assert pick([2, 6, 2, 2, 0, 0]) == "NodeTopologyLayer/n2"  # spine s1 (4) under s0 (8)
    assert pick([2, 6, 2, 6, 2, 6]) == "NodeTopologyLayer/n4"  # racks tie, spines tie (8), zone z1 (8) under z0 (16)
    assert pick([2, 0, 2, 0, 0, 0]) == "NodeTopologyLayer/n0"  # ties all the way to the root: the name


def test_choose_and_its_twin_agree_on_chains_of_unlike_length() -> None:
    # A node missing its block label hangs under its spine at the same depth as a node with the full
    # path, so their ancestor chains differ in length: the shorter chain comes first in both.
    tree = TopologyTree.build(["S", "B"], ["za", "zb"], {"za": ["s1", "b1"], "zb": ["s1"]})
    sums = np.full(len(tree.order), 4, dtype=np.int64)
    nodes = tree.domain_node >= 0
    chosen = choose_candidate(sums, tree.depth, nodes, 2, tree.parent, tree.name_rank, True)
    assert chosen == choose_candidate_py(sums, tree.depth, nodes, 2, tree.parent, tree.name_rank, True)
    assert tree.label(chosen).endswith("/zb")
