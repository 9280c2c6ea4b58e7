"""A job's running peers (``koordpy.core.peers``): the nodes its members run on, and those its
NonStrict members hold room on, which anchor and steer its requirement (a scope of one node
included)."""

from __future__ import annotations

from typing import Any

from koordpy.api import Node, Pod
from koordpy.core import peers
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import Cycle
from koordpy.core.model import Gang
from koordpy.core.peers import members_placed
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, run


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


SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"


def _blocks(cpu_of: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Blocks ra and rb of two 4-CPU nodes each (``cpu_of``: other sizes by name) in one spine."""
    return [node(f"{b}-{i}", cpu=(cpu_of or {}).get(f"{b}-{i}", "4"), labels={SPINE: "s0", BLOCK: b})
            for b in ("ra", "rb") for i in range(2)]


def test_the_requirement_is_held_to_the_members_a_nonstrict_gang_holds_room_for() -> None:
    # Nothing runs; two members hold room on rb's nodes (reserved): the pending ones join them in rb.
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    raws = [SPINE_BLOCK_CNT, *_blocks(), podgroup("t", 4, gather=prefer),
            *(pod(f"t-{i}", cpu="1", group="t", index=i) for i in range(4))]
    snap = World.from_objects([("test", r) for r in raws]).snapshot(frozenset({"koordpy"}))
    cycle = Cycle(snap, SchedulerState(), 0.0)
    job = cycle.view.queue.jobs()[0]
    alone = peers.requirement(job, job.pods, cycle.cluster, snap, {})
    assert alone is not None and alone.peers is None
    req = peers.requirement(job, job.pods, cycle.cluster, snap, {"default/t-0": "rb-0", "default/t-1": "rb-1"})
    assert req is not None and req.peers is not None
    assert cycle.cluster.trees[req.tree].name(req.peers) == "rb"


def test_a_scope_of_one_node_keeps_the_job_on_the_node_its_member_runs_on() -> None:
    # MustGather on the node layer, t-0 running on rb-1, which has room for one more member, not the
    # two pending: the gang waits rather than going to another node.
    must = [{"layer": "NodeTopologyLayer", "strategy": "MustGather"}]
    out = run(SPINE_BLOCK_CNT, *_blocks({"rb-1": "2"}), podgroup("t", 3, gather=must),
              pod("t-0", cpu="1", group="t", index=0, node_name="rb-1"),
              *(pod(f"t-{i}", cpu="1", group="t", index=i) for i in (1, 2)))
    assert out.bound == {}
