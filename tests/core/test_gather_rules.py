"""Gather's split rules: podCountMultiple is hard, and the fewest sub-domains are used."""

from collections import Counter
from typing import Any

from koordpy.sim.simulator import SimulationResult
from tests.builders import (
    SEED_12,
    SPINE_BLOCK_CNT,
    gpu_workers,
    node,
    pod,
    podgroup,
    run,
    spine_block_nodes,
    unlike_spine,
)

Layout = dict[str, dict[str, list[int]]]


def gang(name: str, size: int, gather: list[dict[str, Any]], cpu: str = "8") -> list[dict[str, Any]]:
    return [podgroup(name, size, gather=gather), *[pod(f"{name}-{i}", cpu=cpu, group=name, index=i)
                                                   for i in range(size)]]


def block_of(layout: Layout) -> dict[str, str]:
    return {f"node-{i}": block for blocks in layout.values() for block, ids in blocks.items() for i in ids}


def per_block(out: SimulationResult, layout: Layout) -> dict[str, int]:
    blocks = block_of(layout)
    return dict(Counter(blocks[n] for n in out.bound.values()))


def block_rule(multiple: int) -> list[dict[str, Any]]:
    return [{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": multiple},
            {"layer": "SpineLayer", "strategy": "PreferGather"}]


# -- podCountMultiple is hard -------------------------------------------------------------------


def test_six_pods_in_multiples_of_four_are_refused_with_the_reason() -> None:
    layout = {"spine-0": {"block-0": [0, 1, 2, 3], "block-1": [4, 5, 6, 7]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, gang("job", 6, block_rule(4)))
    assert out.bound == {}
    # The spine has eight free nodes, so room is not what is missing.
    assert out.pending["default/job-0"] == (
        "0/8 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 6, "
        "topology topologyNode SpineLayer/spine-0: 8; "
        "podCountMultiple: 6 pods cannot be split into multiples of 4 per BlockLayer domain.")


def test_eight_pods_in_multiples_of_four_split_four_and_four() -> None:
    # Blocks of 5, 3 and 5 free nodes: the 3-node block can take no four; 5 + 3 would break the rule.
    layout = {"spine-0": {"block-0": [0, 1, 2, 3, 4], "block-1": [5, 6, 7], "block-2": [8, 9, 10, 11, 12]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, gang("job", 8, block_rule(4)))
    assert per_block(out, layout) == {"block-0": 4, "block-2": 4}
    # Rank order inside the allocation: the first four ranks in the first block, in node order.
    assert [out.bound[f"default/job-{i}"] for i in range(8)] == [f"node-{i}" for i in (0, 1, 2, 3, 8, 9, 10, 11)]


def test_the_remainder_never_breaks_a_multiple() -> None:
    # Twelve pods over blocks with 8 and 6 free nodes in multiples of 4: the 6-node block takes 4.
    layout = {"spine-0": {"block-0": list(range(8)), "block-1": list(range(8, 14))}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, gang("job", 12, block_rule(4)))
    assert per_block(out, layout) == {"block-0": 8, "block-1": 4}


MULTIPLES_AT_TWO_LAYERS = [{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 2},
                           {"layer": "SpineLayer", "strategy": "PreferGather", "podCountMultiple": 4}]
TWO_SPINES = {"spine-0": {"block-0": [0, 1, 2], "block-1": [3, 4, 5]},
              "spine-1": {"block-2": [6, 7], "block-3": [8]}}


def test_multiples_at_two_layers_are_both_kept() -> None:
    # spine-0 takes 2 + 2; spine-1 takes at most 2 in its blocks, which is no multiple of 4.
    out = run(spine_block_nodes(TWO_SPINES), SPINE_BLOCK_CNT, gang("job", 4, MULTIPLES_AT_TWO_LAYERS))
    assert per_block(out, TWO_SPINES) == {"block-0": 2, "block-1": 2}


def test_multiples_at_two_layers_name_both_in_the_refusal() -> None:
    out = run(spine_block_nodes(TWO_SPINES), SPINE_BLOCK_CNT, gang("job", 8, MULTIPLES_AT_TWO_LAYERS))
    assert out.bound == {}
    assert out.pending["default/job-0"].endswith(
        "podCountMultiple: 8 pods cannot be split into multiples of 4 per SpineLayer domain "
        "and 2 per BlockLayer domain.")


def test_a_rounded_offerslot_that_fits_is_no_candidate_without_a_split() -> None:
    # Blocks of 4 in multiples of 4 and the spine in multiples of 6: the spine's 8 slots round
    # down to 6, which is the job's size, but 4 + 4 is no 6 and 4 + 2 breaks the block rule.
    layout = {"spine-0": {"block-0": [0, 1, 2, 3], "block-1": [4, 5, 6, 7]}}
    gather = [{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 4},
              {"layer": "SpineLayer", "strategy": "PreferGather", "podCountMultiple": 6}]
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, gang("job", 6, gather))
    assert out.bound == {}
    assert "podCountMultiple: 6 pods cannot be split" in out.pending["default/job-0"]


def test_unlike_members_under_multiples_say_why_they_were_not_tried_one_by_one() -> None:
    gather: list[dict[str, Any]] = [{"layer": "SpineLayer", "strategy": "MustGather"},
                                    {"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 2}]
    groups = ["default/master", "default/worker"]
    workers = gpu_workers(4)
    out = run(unlike_spine(), SPINE_BLOCK_CNT, podgroup("master", 1, gather=gather, groups=groups),
              podgroup("worker", 4, gather=gather, groups=groups), pod("master-0", cpu="1", group="master", index=0),
              workers)
    assert out.bound == {}
    msg = out.pending["default/master-0"]
    assert "podCountMultiple is set, so unlike members are only placed with their common shape" in msg
    assert "cannot be split" not in msg  # four GPU nodes are too few for five GPU-shaped pods anyway


# -- the fewest sub-domains ---------------------------------------------------------------------


def test_the_largest_block_then_the_smallest_that_takes_the_rest() -> None:
    # Blocks with 1, 1, 4 and 3 free nodes; 5 pods: no block takes 5, the 4-node block takes
    # 4 and the remaining pod goes to the first 1-node block: two blocks, not three.
    layout = {"spine-0": {"block-0": [0], "block-1": [1], "block-2": [2, 3, 4, 5], "block-3": [6, 7, 8]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, gang("job", 5, block_rule(1)))
    assert per_block(out, layout) == {"block-0": 1, "block-2": 4}
    # Pods fill the allocated nodes in rank order, blocks in name order.
    assert [out.bound[f"default/job-{i}"] for i in range(5)] == ["node-0", "node-2", "node-3", "node-4", "node-5"]


def test_a_remainder_goes_to_the_smallest_block_that_fits_it() -> None:
    layout = {"spine-0": {"block-0": [0, 1, 2, 3], "block-1": [4, 5, 6], "block-2": [7, 8]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, gang("job", 6, block_rule(1)))
    assert per_block(out, layout) == {"block-0": 4, "block-2": 2}
    assert [out.bound[f"default/job-{i}"] for i in range(6)] == [f"node-{i}" for i in (0, 1, 2, 3, 7, 8)]


def test_the_smallest_node_that_takes_a_blocks_share() -> None:
    # block-0 is one 6-slot node; block-1 has nodes of 3, 1 and 2 slots. Eight pods: block-0
    # takes 6 (first by name among equals), block-1 the other 2, all on node-3, its 2-slot node,
    # leaving the 3-slot node whole.
    def at(name: str, cpu: str, block: str) -> dict[str, Any]:
        return node(name, cpu=cpu, labels={"network.topology.nvidia.com/spine": "spine-0",
                                           "network.topology.nvidia.com/block": block})

    nodes = [at("node-0", "48", "block-0"), at("node-1", "24", "block-1"), at("node-2", "8", "block-1"),
             at("node-3", "16", "block-1")]
    out = run(nodes, SPINE_BLOCK_CNT, gang("job", 8, block_rule(1)))
    assert [out.bound[f"default/job-{i}"] for i in range(8)] == ["node-0"] * 6 + ["node-3"] * 2


def test_consecutive_ranks_share_a_node_inside_the_allocation() -> None:
    # Half-node pods: 6 pods in blocks offering 4, 2 and 6 slots (2 per node); block-2 takes all.
    layout = {"spine-0": {"block-0": [0, 1], "block-1": [2], "block-2": [3, 4, 5], "block-3": [6, 7, 8, 9]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT,
              gang("job", 6, [{"layer": "SpineLayer", "strategy": "MustGather"}], cpu="4"))
    assert [out.bound[f"default/job-{i}"] for i in range(6)] == [
        "node-3", "node-3", "node-4", "node-4", "node-5", "node-5"]


# -- unknown layers: a preference is dropped and said so, a constraint never ---------------------

def test_prefer_gather_on_an_unknown_layer_is_ignored_and_reported() -> None:
    # Seed 000's GangGroup example asks PreferGather on AcceleratorLayer, which its topology lacks.
    gather = [{"layer": "SpineLayer", "strategy": "PreferGather"}, {"layer": "BlockLayer", "strategy": "PreferGather"},
              {"layer": "AcceleratorLayer", "strategy": "PreferGather"}]
    groups = ["default/gang-master", "default/gang-worker"]
    out = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, podgroup("gang-master", 1, gather=gather, groups=groups),
              podgroup("gang-worker", 2, gather=gather, groups=groups), pod("m-0", group="gang-master", index=0),
              [pod(f"w-{i}", group="gang-worker", index=i + 1) for i in range(2)])
    assert len(out.bound) == 3
    assert len({out.bound[p] for p in out.bound}) == 3
    notes = [e for e in out.events if e.reason == "TopologyLayerIgnored"]
    assert {e.obj for e in notes} == {"default/gang-master", "default/gang-worker"}
    assert all(e.message == 'layer "AcceleratorLayer" is not in the ClusterNetworkTopology; ignored' for e in notes)


def test_an_ignored_layer_is_noted_in_the_pending_message() -> None:
    gather = [{"layer": "SpineLayer", "strategy": "MustGather"}, {"layer": "RackLayer", "strategy": "PreferGather"}]
    out = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, podgroup("g", 6, gather=gather),
              [pod(f"p-{i}", group="g", index=i) for i in range(6)])
    assert out.bound == {}
    assert out.pending["default/p-0"].endswith(
        '; layer "RackLayer" is not in the ClusterNetworkTopology; ignored.')


def test_must_gather_on_an_unknown_layer_stays_unschedulable_with_a_case_hint() -> None:
    # Seed 000's MustGather example writes "spineLayer"; names stay case-sensitive.
    out = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT,
              podgroup("g", 2, gather=[{"layer": "spineLayer", "strategy": "MustGather"}]),
              [pod(f"p-{i}", group="g") for i in range(2)])
    assert out.bound == {}
    msg = out.pending["default/p-0"]
    assert "unknown topology layer 'spineLayer'" in msg and 'did you mean "SpineLayer"?' in msg
    assert "ClusterTopologyLayer, SpineLayer, BlockLayer, NodeTopologyLayer" in msg
    plain = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT,
                podgroup("g", 2, gather=[{"layer": "RackLayer", "strategy": "MustGather"}]),
                [pod(f"p-{i}", group="g") for i in range(2)])
    assert "did you mean" not in plain.pending["default/p-0"]


# -- MustGather uses only nodes that carry the layer's label -------------------------------------

def test_must_gather_never_lands_on_a_node_without_the_layer_label() -> None:
    unlabeled = node("lonely", cpu="64")  # room for the whole job, but in no spine
    busy = [pod(f"busy-{i}", node_name=f"node-{i}") for i in range(12)]
    out = run(spine_block_nodes(SEED_12), unlabeled, SPINE_BLOCK_CNT, busy,
              podgroup("g", 4, gather=[{"layer": "SpineLayer", "strategy": "MustGather"}]),
              [pod(f"p-{i}", group="g", index=i) for i in range(4)])
    assert out.bound == {}
    prefer = run(spine_block_nodes(SEED_12), unlabeled, SPINE_BLOCK_CNT, busy,
                 podgroup("g", 4, gather=[{"layer": "SpineLayer", "strategy": "PreferGather"}]),
                 [pod(f"p-{i}", group="g", index=i) for i in range(4)])
    assert set(prefer.bound.values()) == {"lonely"}  # a preference may fall back to the whole cluster


def test_a_node_missing_only_a_lower_label_stays_inside_its_upper_domain() -> None:
    # node-x has a spine label but no block label: it hangs from spine-1 and may take MustGather Spine pods.
    partial = node("node-x", labels={"network.topology.nvidia.com/spine": "spine-1"})
    busy = [pod(f"busy-{i}", node_name=f"node-{i}") for i in range(12) if i not in (5, 6, 7)]
    out = run(spine_block_nodes(SEED_12), partial, SPINE_BLOCK_CNT, busy,
              podgroup("g", 4, gather=[{"layer": "SpineLayer", "strategy": "MustGather"}]),
              [pod(f"p-{i}", group="g", index=i) for i in range(4)])
    assert set(out.bound.values()) == {"node-5", "node-6", "node-7", "node-x"}


def test_must_gather_with_no_labelled_node_says_so() -> None:
    out = run([node("a"), node("b")], SPINE_BLOCK_CNT,
              podgroup("g", 2, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}]),
              [pod(f"p-{i}", group="g") for i in range(2)])
    assert out.pending["default/p-0"] == ("0/2 nodes are available: MustGather on BlockLayer, but no node carries "
                                          "its label network.topology.nvidia.com/block.")


# -- candidate tie-break: the whole ancestor chain ----------------------------------------------


def test_tied_candidates_compare_every_ancestor_layer_before_the_name() -> None:
    # n1 and n5 each offer 2 slots, and so do their blocks b1 and b3; the tie is broken one layer
    # further up: spine s1 offers 8, s2 only 4, so the job goes to n5 and keeps the big spine whole.
    def at(name: str, cpu: str, spine: str, block: str) -> dict[str, Any]:
        return node(name, cpu=cpu, labels={"network.topology.nvidia.com/spine": spine,
                                           "network.topology.nvidia.com/block": block})

    nodes = [at("n1", "8", "s1", "b1"), at("n2", "12", "s1", "b2"), at("n3", "12", "s1", "b2"),
             at("n5", "8", "s2", "b3"), at("n6", "4", "s2", "b4"), at("n7", "4", "s2", "b4")]
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}, {"layer": "SpineLayer", "strategy": "PreferGather"}]
    out = run(nodes, SPINE_BLOCK_CNT, gang("job", 2, prefer, cpu="4"))
    assert set(out.bound.values()) == {"n5"}


# -- running members anchor PreferGather ---------------------------------------------------------


def test_a_replacement_rejoins_the_block_where_its_peers_run() -> None:
    # Three members run in block-0, which has three free nodes left; block-1 has exactly one free node.
    # One pod alone fits block-1 most tightly, but PreferGather keeps the job in one block when it can.
    layout = {"spine-0": {"block-0": [0, 1, 2, 3, 4, 5], "block-1": [6]}}
    running = [pod(f"job-{i}", group="job", index=i, node_name=f"node-{i}") for i in range(3)]
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, podgroup("job", 4, gather=block_rule(1)), *running,
              pod("job-3", group="job", index=3))
    assert out.bound["default/job-3"] in {"node-3", "node-4", "node-5"}


def test_peers_in_a_full_block_keep_the_replacement_in_their_spine() -> None:
    # block-0 is full; the spine that holds the peers still has room (block-1) and beats the tighter
    # block-2 of another spine.
    layout = {"spine-0": {"block-0": [0, 1, 2], "block-1": [3, 4]}, "spine-1": {"block-2": [5]}}
    running = [pod(f"job-{i}", group="job", index=i, node_name=f"node-{i}") for i in range(3)]
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, podgroup("job", 4, gather=block_rule(1)), *running,
              pod("job-3", group="job", index=3))
    assert out.bound["default/job-3"] in {"node-3", "node-4"}


def test_must_gather_keeps_later_members_in_the_block_of_the_running_ones() -> None:
    # MustGather block: all of the job in one block, running members included; block-0 has no room
    # left, so the replacement waits rather than going to block-1.
    must = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    layout = {"spine-0": {"block-0": [0, 1, 2], "block-1": [3, 4, 5, 6]}}
    running = [pod(f"job-{i}", group="job", index=i, node_name=f"node-{i}") for i in range(3)]
    # (The gang runs below its minimum meanwhile, stale: a negative grace keeps it from being evicted.)
    never = {"koordpy.io/staleness-grace-period": "-1s"}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, podgroup("job", 4, gather=must, annotations=never),
              *running, pod("job-3", group="job", index=3))
    assert out.bound == {}
    assert "block-0" in out.pending["default/job-3"]
