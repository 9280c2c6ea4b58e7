"""Network-topology placement: the seeds' examples, gather strategies, rank order, messages."""

from typing import Any

from koordpy.sim.simulator import World, simulate
from tests.builders import (
    SEED_12,
    SPINE_BLOCK_CNT,
    cnt,
    gpu_workers,
    node,
    pod,
    podgroup,
    priority_class,
    run,
    spine_block_nodes,
    unlike_spine,
)

PREFER_BLOCK_SPINE = [{"layer": "BlockLayer", "strategy": "PreferGather"},
                      {"layer": "SpineLayer", "strategy": "PreferGather"}]
MUST_SPINE = [{"layer": "SpineLayer", "strategy": "MustGather"}]


def seed_cluster() -> list[dict[str, Any]]:
    return [*spine_block_nodes(SEED_12), SPINE_BLOCK_CNT]


def test_seed_example_1_prefer_gather_binpacks_onto_spine_1() -> None:
    out = run(seed_cluster(), podgroup("job", 4, gather=PREFER_BLOCK_SPINE),
              [pod(f"training-pod-{i}", group="job", index=i) for i in range(4)])
    assert out.bound == {f"default/training-pod-{i}": f"node-{5 + i}" for i in range(4)}
    assert out.groups["default/job"]["phase"] == "Scheduled"


def test_rank_follows_the_index_not_the_name() -> None:
    out = run(seed_cluster(), podgroup("job", 4, gather=PREFER_BLOCK_SPINE),
              [pod(f"p-{name}", group="job", index=i) for i, name in enumerate("dcba")])
    assert [out.bound[f"default/p-{name}"] for name in "dcba"] == ["node-5", "node-6", "node-7", "node-8"]


def test_pods_without_index_follow_indexed_ones_by_natural_name() -> None:
    pods = [pod("w-10", group="job"), pod("w-2", group="job"), pod("first", group="job", index=0),
            pod("w-1", group="job")]
    out = run(seed_cluster(), podgroup("job", 4, gather=PREFER_BLOCK_SPINE), pods)
    assert [out.bound[f"default/{n}"] for n in ("first", "w-1", "w-2", "w-10")] == [f"node-{i}" for i in range(5, 9)]


def test_consecutive_ranks_share_a_node_then_a_block() -> None:
    # Half-node pods: ranks 0,1 share node-0, 2,3 node-1, ... all inside block-0 (offers 6 = exact fit).
    out = run(seed_cluster(), podgroup("job", 6, gather=PREFER_BLOCK_SPINE),
              [pod(f"r-{i}", cpu="4", group="job", index=i) for i in range(6)])
    nodes = [out.bound[f"default/r-{i}"] for i in range(6)]
    assert nodes[0] == nodes[1] and nodes[2] == nodes[3] and nodes[4] == nodes[5]
    assert len(set(nodes)) == 3
    assert set(nodes) in ({"node-0", "node-1", "node-2"}, {"node-9", "node-10", "node-11"})


def test_binpack_tie_goes_to_the_domain_with_the_smaller_parent() -> None:
    # block-0 and block-4 both offer exactly 3; spine-2 (3) is smaller than spine-0 (5).
    out = run(seed_cluster(), podgroup("job", 3, gather=PREFER_BLOCK_SPINE),
              [pod(f"r-{i}", group="job", index=i) for i in range(3)])
    assert sorted(out.bound.values()) == ["node-10", "node-11", "node-9"]


def test_must_gather_waits_with_koordinators_message_when_no_spine_fits() -> None:
    occupied = [pod(f"low-{n}", node_name=f"node-{n}", scheduler="default-scheduler") for n in (0, 1, 5)]
    out = run(seed_cluster(), occupied, podgroup("hp", 4, gather=MUST_SPINE),
              [pod(f"hp-{i}", group="hp", index=i) for i in range(4)])
    assert out.bound == {}
    assert out.pending["default/hp-0"] == (
        "0/12 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 4, "
        "topology topologyNode SpineLayer/spine-0: 3;topology topologyNode SpineLayer/spine-1: 3;"
        "topology topologyNode SpineLayer/spine-2: 3.")
    assert out.pending["default/hp-1"] == (
        f'GangGroup "default/hp" gets rejected due to member Pod "default/hp-0" is unschedulable with reason '
        f'"{out.pending["default/hp-0"]}", alreadyWaitForBound: 0')


def test_prefer_gather_falls_back_to_the_whole_cluster() -> None:
    occupied = [pod(f"low-{n}", node_name=f"node-{n}") for n in (0, 1, 5)]
    prefer_spine = [{"layer": "SpineLayer", "strategy": "PreferGather"}]
    out = run(seed_cluster(), occupied, podgroup("job", 4, gather=prefer_spine),
              [pod(f"p-{i}", group="job", index=i) for i in range(4)])
    assert len(out.bound) == 4 and "node-0" not in out.bound.values()


def test_must_gather_block_layer() -> None:
    out = run(seed_cluster(), podgroup("job", 3, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}]),
              [pod(f"p-{i}", group="job", index=i) for i in range(3)],
              podgroup("wide", 4, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}]),
              [pod(f"w-{i}", group="wide", index=i) for i in range(4)])
    blocks = {"node-9", "node-10", "node-11"}
    assert {out.bound[f"default/p-{i}"] for i in range(3)} == blocks
    assert "desiredOfferSlot: 4" in out.pending["default/w-0"] and "BlockLayer/block-0: 3" in out.pending["default/w-0"]


def test_pod_count_multiple_keeps_whole_multiples_per_block() -> None:
    gather: list[dict[str, Any]] = [{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 4},
                                    {"layer": "SpineLayer", "strategy": "PreferGather"}]
    busy = [pod(f"busy-{n}", cpu="6", node_name=f"node-{n}") for n in range(12)]  # 2 CPUs left: 1 slot per node
    out = run(seed_cluster(), busy, podgroup("job", 6, gather=gather),
              [pod(f"p-{i}", cpu="2", group="job", index=i) for i in range(6)])
    # Blocks offer 3,2,2,2,3 slots, rounded down to multiples of 4: all 0, so no block and no spine
    # takes even four; the job does not fit as whole fours anywhere.
    assert out.bound == {}
    assert "desiredOfferSlot: 6" in out.pending["default/p-0"]


def test_pod_count_multiple_splits_in_multiples() -> None:
    gather = [{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 2}]
    nodes = spine_block_nodes({"s": {"b0": [0, 1, 2], "b1": [3, 4, 5]}}, cpu="1")
    out = run(nodes, SPINE_BLOCK_CNT, podgroup("job", 4, gather=gather),
              [pod(f"p-{i}", cpu="1", group="job", index=i) for i in range(4)])
    per_block = {"b0": 0, "b1": 0}
    for n in out.bound.values():
        per_block["b0" if int(n.split("-")[1]) < 3 else "b1"] += 1
    assert sorted(per_block.values()) == [2, 2]  # 3 slots a block round down to 2


def test_unknown_layer_is_unschedulable_and_lists_the_known_layers() -> None:
    out = run(seed_cluster(), podgroup("job", 2, gather=[{"layer": "spineLayer", "strategy": "MustGather"}]),
              [pod(f"p-{i}", group="job") for i in range(2)])
    assert out.bound == {}
    msg = out.pending["default/p-0"]
    assert "unknown topology layer 'spineLayer'" in msg
    assert "ClusterTopologyLayer, SpineLayer, BlockLayer, NodeTopologyLayer" in msg


def test_topology_spec_without_a_cluster_network_topology() -> None:
    out = run(node("n0"), podgroup("job", 1, gather=MUST_SPINE), pod("p", group="job"))
    assert "unknown topology layer 'SpineLayer'" in out.pending["default/p"]


def test_one_node_can_be_the_whole_domain() -> None:
    out = run(seed_cluster(), podgroup("job", 4, gather=PREFER_BLOCK_SPINE),
              [pod(f"p-{i}", cpu="2", group="job", index=i) for i in range(4)])
    assert len(set(out.bound.values())) == 1


def test_ganggroup_members_are_placed_together() -> None:
    groups = ["default/master", "default/worker"]
    out = run(seed_cluster(), podgroup("master", 1, gather=MUST_SPINE, groups=groups),
              podgroup("worker", 3, gather=MUST_SPINE, groups=groups),
              pod("m-0", group="master", index=0), [pod(f"w-{i}", group="worker", index=i + 1) for i in range(3)])
    assert [out.bound[p] for p in ("default/m-0", "default/w-0", "default/w-1", "default/w-2")] == [
        "node-5", "node-6", "node-7", "node-8"]


def test_priority_decides_which_gang_gets_the_exact_fit() -> None:
    out = run(seed_cluster(), priority_class("high", 1000), podgroup("early", 4, gather=MUST_SPINE),
              [pod(f"e-{i}", group="early", index=i) for i in range(4)],
              podgroup("late", 4, gather=MUST_SPINE),
              [pod(f"l-{i}", group="late", index=i, priority_class="high") for i in range(4)])
    assert {out.bound[f"default/l-{i}"] for i in range(4)} == {f"node-{i}" for i in range(5, 9)}
    assert {out.bound[f"default/e-{i}"] for i in range(4)} <= {f"node-{i}" for i in range(5)}


def test_detail_status_is_reported() -> None:
    world = World.from_objects([("t", o) for o in seed_cluster()])
    status = simulate(world).to_json()["topology"]["detailStatus"]
    assert status[0]["childTopologyNames"] == ["spine-0", "spine-1", "spine-2"] and status[0]["nodeNum"] == 12


def test_layers_named_differently_work_the_same() -> None:
    nodes = [node(f"n{i}", labels={"rack": f"r{i // 2}"}) for i in range(6)]
    out = run(nodes, cnt(("RackLayer", None, "rack")), podgroup("job", 2, gather=[{"layer": "RackLayer",
              "strategy": "MustGather"}]), [pod(f"p-{i}", group="job", index=i) for i in range(2)])
    assert len(out.bound) == 2 and len({int(n[1:]) // 2 for n in out.bound.values()}) == 1


def test_topology_failure_says_which_nodes_filters_ruled_out() -> None:
    nodes = spine_block_nodes(SEED_12)
    for n in nodes[:5]:
        n["spec"] = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}
    out = run(nodes, SPINE_BLOCK_CNT, podgroup("hp", 5, gather=MUST_SPINE),
              [pod(f"hp-{i}", group="hp", index=i) for i in range(5)])
    assert out.pending["default/hp-0"].endswith(
        "topology topologyNode SpineLayer/spine-2: 3; "
        "5 node(s) had untolerated taint {node.kubernetes.io/not-ready: }.")


def test_unlike_ganggroup_members_fit_where_the_common_shape_would_not() -> None:
    # One spine: four 8-GPU nodes and one CPU-only node. A 1-CPU master and four 8-GPU
    # workers must gather in the spine; taking every member as 8 GPUs would need five GPU nodes.
    far = node("gpu-far", labels={"network.topology.nvidia.com/spine": "s2", "network.topology.nvidia.com/block": "b3"},
               extra={"nvidia.com/gpu": "8"})
    groups = ["default/master", "default/worker"]
    workers = gpu_workers(4)
    out = run(unlike_spine(), far, SPINE_BLOCK_CNT, podgroup("master", 1, gather=MUST_SPINE, groups=groups),
              podgroup("worker", 4, gather=MUST_SPINE, groups=groups),
              pod("master-0", cpu="1", group="master", index=0), workers)
    assert len(out.bound) == 5 and "gpu-far" not in out.bound.values()
    assert {out.bound[f"default/worker-{i}"] for i in range(4)} == {f"gpu-{i}" for i in range(4)}
