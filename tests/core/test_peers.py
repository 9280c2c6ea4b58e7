"""A job's running peers (``koordpy.core.peers``): the nodes its members run on, and those its
NonStrict members hold room on, which anchor and steer its requirement."""

from __future__ import annotations

from koordpy.api import Node, Pod
from koordpy.core.cluster import Cluster
from koordpy.core.model import Gang
from koordpy.core.peers import members_placed
from koordpy.core.snapshot import Snapshot
from tests.builders import node, pod


def test_members_placed_counts_running_members_and_reserved_ones_only_when_asked() -> None:
    running = pod("a", "1")
    running["spec"]["nodeName"] = "n2"
    gone = pod("b", "1")
    gone["spec"]["nodeName"] = "elsewhere"  # a node the snapshot does not hold
    pods = [Pod.from_raw(running), Pod.from_raw(gone), Pod.from_raw(pod("c", "1"))]
    cluster = Cluster(Snapshot(nodes=[Node.from_raw(node(f"n{i}", cpu="4")) for i in range(3)], pods=pods))
    gang = Gang("default/g", None, pods, 0.0)
    assert members_placed(cluster, [gang]) == [2]
    assert members_placed(cluster, [gang], {pods[2].key: "n0"}) == [2, 0]
    assert members_placed(cluster, [gang], {}) == [2]
