"""Issue 29, item 10: a Volcano job with members running keeps its new members in their HyperNode when
it has room, in soft mode too, and only then looks wider. Seed 004 ("Maintenance of
AllocatedHyperNode") recovers the job's allocated HyperNode from where its members run, and Volcano's
scoring ranks a candidate by the tier of its lowest common ancestor with that HyperNode (the lower the
better); hard mode also keeps them inside its limit around them.

The cluster of the issue: tier-1 HyperNode ``s0`` of five nodes, three running the job's members, two
free; ``s1`` of two nodes, one busy, so its one free node is the tighter fit for one pod; ``s2`` (tier
2) over both.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod
from tests.core.dialects.test_topology_sources import hypernode, run, vc_pod, volcano_pg


def cluster(s0_busy: int = 0) -> list[dict[str, Any]]:
    nodes = [node(f"a{i}", cpu="4") for i in range(5)] + [node(f"b{i}", cpu="4") for i in range(2)]
    hns = [hypernode("s0", 1, nodes=[f"a{i}" for i in range(5)]), hypernode("s1", 1, nodes=["b0", "b1"]),
           hypernode("s2", 2, members=["s0", "s1"])]
    busy = [pod(f"busy-{n}", cpu="4", node_name=n, scheduler="default-scheduler")
            for n in ["b0", *(f"a{4 - i}" for i in range(s0_busy))]]
    return [*nodes, *hns, *busy]


def running(name: str, on: str, cpu: str = "4") -> dict[str, Any]:
    p = vc_pod(name, "j", cpu=cpu)
    p["spec"]["nodeName"] = on
    p["status"] = {"phase": "Running"}
    return p


@pytest.mark.parametrize("mode", ["soft", "hard"])
def test_a_recreated_member_stays_in_its_peers_hypernode(mode: str) -> None:
    job = volcano_pg("j", 4, {"mode": mode, "highestTierAllowed": 1})
    out = run(cluster(), job, *(running(f"j-{i}", f"a{i}") for i in range(3)), vc_pod("j-3", "j"))
    assert out.bound["default/j-3"] in {"a3", "a4"}  # s0, not s1's one free node


def test_a_soft_job_looks_wider_once_its_peers_hypernode_is_full() -> None:
    job = volcano_pg("j", 4, {"mode": "soft", "highestTierAllowed": 1})
    out = run(cluster(s0_busy=2), job, *(running(f"j-{i}", f"a{i}") for i in range(3)), vc_pod("j-3", "j"))
    assert out.bound == {"default/j-3": "b1"}


def test_unlike_new_members_stay_in_their_peers_hypernode_too() -> None:
    # Two pending members of different sizes are placed kind by kind inside one candidate HyperNode;
    # the candidates nearest the running members come first (s0), then Volcano's binpack order (s1).
    job = volcano_pg("j", 5, {"mode": "soft", "highestTierAllowed": 1})
    pending = [vc_pod("j-3", "j", cpu="2"), vc_pod("j-4", "j", cpu="1")]
    out = run(cluster(), job, *(running(f"j-{i}", f"a{i}") for i in range(3)), *pending)
    assert {n[0] for n in out.bound.values()} == {"a"}, out.bound
