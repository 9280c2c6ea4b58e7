"""The topology tree and the ClusterNetworkTopology status it renders."""

from typing import Any

import numpy as np

from koordpy.api import ClusterNetworkTopology, Node
from koordpy.core.dialects.koordinator import detail_status, tree_from_cluster_network_topology
from koordpy.core.tree import TopologyTree
from tests.builders import SEED_12, SPINE_BLOCK_CNT, cnt, node, spine_block_nodes

TWO_LAYER_CNT = cnt(("SpineLayer", None, "network.topology.nvidia.com/spine"),
                    ("BlockLayer", "SpineLayer", "network.topology.nvidia.com/block"),
                    ("NodeTopologyLayer", "BlockLayer", None))


def _entry(layer: str, name: str, child: str, num: int, parent: tuple[str, str] | None,
           kids: list[str] | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"childTopologyLayer": child}
    if kids:
        e["childTopologyNames"] = kids
    e["nodeNum"] = num
    if parent:
        e["parentTopologyInfo"] = {"topologyLayer": parent[0], "topologyName": parent[1]}
    e["topologyInfo"] = {"topologyLayer": layer, "topologyName": name}
    return e


def _tree(layout: dict[str, dict[str, list[int]]], raw_cnt: dict[str, Any] = TWO_LAYER_CNT) -> TopologyTree:
    nodes = [Node.from_raw(n) for n in spine_block_nodes(layout)]
    nodes.sort(key=lambda n: int(n.name.split("-")[1]))
    return tree_from_cluster_network_topology(ClusterNetworkTopology.from_raw(raw_cnt), nodes)


def test_seed_8_node_detail_status_is_exactly_the_seeds() -> None:
    # Seed 000's example: s1 lists b2 before b1, as Koordinator does when b2 holds the first nodes.
    tree = _tree({"s1": {"b2": [0, 1], "b1": [2, 3]}, "s2": {"b3": [4, 5], "b4": [6, 7]}})
    cl, sp, bl, nd = "ClusterTopologyLayer", "SpineLayer", "BlockLayer", "NodeTopologyLayer"
    assert detail_status(tree) == [
        _entry(cl, "", sp, 8, None, ["s1", "s2"]),
        _entry(sp, "s1", bl, 4, (cl, ""), ["b2", "b1"]),
        _entry(bl, "b2", nd, 2, (sp, "s1")),
        _entry(bl, "b1", nd, 2, (sp, "s1")),
        _entry(sp, "s2", bl, 4, (cl, ""), ["b3", "b4"]),
        _entry(bl, "b3", nd, 2, (sp, "s2")),
        _entry(bl, "b4", nd, 2, (sp, "s2")),
    ]


def test_seed_12_node_detail_status() -> None:
    status = detail_status(_tree(SEED_12, SPINE_BLOCK_CNT))
    assert [(e["topologyInfo"]["topologyName"], e["nodeNum"], e.get("childTopologyNames")) for e in status] == [
        ("", 12, ["spine-0", "spine-1", "spine-2"]),
        ("spine-0", 5, ["block-0", "block-1"]), ("block-0", 3, None), ("block-1", 2, None),
        ("spine-1", 4, ["block-2", "block-3"]), ("block-2", 2, None), ("block-3", 2, None),
        ("spine-2", 3, ["block-4"]), ("block-4", 3, None),
    ]


def test_children_in_natural_name_order_and_subtree_ranges() -> None:
    nodes = [Node.from_raw(node(f"node-{i}", labels={"rack": "r"})) for i in (10, 2, 1)]
    tree = TopologyTree.build(["RackLayer"], [n.name for n in nodes], {n.name: [n.labels["rack"]] for n in nodes})
    rack = tree.index[("r",)]
    ordered = [nodes[i].name for i in tree.subtree_nodes(rack)]
    assert ordered == ["node-1", "node-2", "node-10"]
    assert int(tree.end[0]) == len(tree.order)
    assert tree.depth.tolist() == [0, 1, 2, 2, 2]
    assert all(tree.parent[d] < d for d in range(1, len(tree.order)))


def test_same_block_name_under_two_spines_is_two_domains() -> None:
    tree = _tree({"s1": {"b": [0]}, "s2": {"b": [1]}})
    assert len(tree.domains_at(2)) == 2


def test_node_missing_a_label_hangs_from_its_deepest_known_domain() -> None:
    nodes = [Node.from_raw(node("a", labels={"network.topology.nvidia.com/spine": "s1"})),
             Node.from_raw(node("b"))]
    tree = tree_from_cluster_network_topology(ClusterNetworkTopology.from_raw(TWO_LAYER_CNT), nodes)
    a, b = (int(tree.node_domain[i]) for i in range(2))
    assert tree.label(int(tree.parent[a])) == "SpineLayer/s1"
    assert int(tree.parent[b]) == 0
    assert int(np.max(tree.depth)) == 3


def test_known_layers_and_depths() -> None:
    tree = _tree(SEED_12, SPINE_BLOCK_CNT)
    assert tree.known_layers == ("ClusterTopologyLayer", "SpineLayer", "BlockLayer", "NodeTopologyLayer")
    assert [tree.layer_depth(x) for x in tree.known_layers] == [0, 1, 2, 3]
    assert tree.layer_depth("spineLayer") is None
