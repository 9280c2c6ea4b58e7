"""Issue 29, item 8: when the rules between a job's members (here a hostname spread, maxSkew 1) sink
the domain the topology search proposed, the next candidate domains of the same level are tried, in
the order the job's style ranks them, before its ancestors; kube-scheduler evaluates every domain of a
PodGroup's key the same way. The shape of the issue, in every dialect: domain ``ra`` (2 nodes of 2
CPUs) cannot hold 4 one-CPU pods without a skew of 2, ``rb`` (4 nodes of 1 CPU) can.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.core.placement import Placer
from koordpy.sim.simulator import SimulationResult
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, run
from tests.core.dialects.test_topology_sources import hypernode, topology, volcano_pg
from tests.core.dialects.test_upstream import group, member
from tests.core.test_podrules import affine, spread, term

HOST = "kubernetes.io/hostname"
RACK = "topology.kubernetes.io/rack"
ZONE = "topology.kubernetes.io/zone"
SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
SPREAD: dict[str, Any] = {"labels": {"app": "t"}, "topologySpreadConstraints": [spread({"app": "t"}, key=HOST)]}


def domains(layout: dict[str, tuple[int, str]], **labels_of: dict[str, str]) -> list[dict[str, Any]]:
    """Nodes ``<domain>-<i>``: ``layout[domain] = (count, cpu)``, labelled with ``labels_of[domain]``."""
    return [node(f"{d}-{i}", cpu=cpu, labels=labels_of[d]) for d, (count, cpu) in layout.items() for i in range(count)]


ISSUE = {"ra": (2, "2"), "rb": (4, "1")}


def upstream_case(layout: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    return [*domains(layout, **{d: {RACK: d} for d in layout}), group(min_count=4, topology=RACK),
            *(member(f"t-{i}", cpu="1", **SPREAD) for i in range(4))]


def koordinator_case(layout: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    must = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    return [SPINE_BLOCK_CNT, *domains(layout, **{d: {SPINE: "s0", BLOCK: d} for d in layout}),
            podgroup("t", 4, gather=must), *(pod(f"t-{i}", cpu="1", group="t", **SPREAD) for i in range(4))]


def volcano_case(layout: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    hns = [hypernode(d, 1, nodes=[f"{d}-{i}" for i in range(count)]) for d, (count, _) in layout.items()]
    pods = [pod(f"t-{i}", cpu="1", annotations={"scheduling.k8s.io/group-name": "t"}, **SPREAD) for i in range(4)]
    return [*domains(layout, **{d: {} for d in layout}), *hns,
            hypernode("top", 2, members=list(layout)),
            volcano_pg("t", 4, {"mode": "hard", "highestTierAllowed": 1}), *pods]


def kai_case(layout: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "t", "namespace": "default"},
          "spec": {"minMember": 4, "topologyConstraint": {"topology": "net", "requiredTopologyLevel": RACK}}}
    pods = [pod(f"t-{i}", cpu="1", annotations={"pod-group-name": "t"}, **SPREAD) for i in range(4)]
    return [*domains(layout, **{d: {RACK: d} for d in layout}), topology("net", RACK, HOST), pg, *pods]


def kai_preferred_case(layout: dict[str, tuple[int, str]]) -> list[dict[str, Any]]:
    # Style "levels": the zone required, the rack preferred (the zone would hold the job over both racks).
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "t", "namespace": "default"},
          "spec": {"minMember": 4, "topologyConstraint": {"topology": "net", "requiredTopologyLevel": ZONE,
                                                          "preferredTopologyLevel": RACK}}}
    pods = [pod(f"t-{i}", cpu="1", annotations={"pod-group-name": "t"}, **SPREAD) for i in range(4)]
    return [*domains(layout, **{d: {ZONE: "z", RACK: d} for d in layout}), topology("net", ZONE, RACK, HOST), pg,
            *pods]


CASES = {"upstream": upstream_case, "koordinator": koordinator_case, "volcano": volcano_case, "kai": kai_case,
         "kai-preferred": kai_preferred_case}


def where(out: SimulationResult) -> set[str]:
    return {n.split("-")[0] for n in out.bound.values()}


@pytest.mark.parametrize("dialect", CASES)
def test_a_domain_the_spread_sinks_gives_way_to_the_next_of_its_level(dialect: str) -> None:
    out = run(CASES[dialect](ISSUE))
    assert len(out.bound) == 4, out.pending
    assert where(out) == {"rb"}
    assert len(set(out.bound.values())) == 4  # one per node: the spread holds


@pytest.mark.parametrize("dialect", CASES)
def test_the_next_candidates_keep_the_order_the_style_ranks_them_in(dialect: str) -> None:
    # ra (offerslot 4) is ranked first and fails; rb (5) and rc (4) both hold the job under the rules.
    # Every style ranks rc before rb (the smaller offerslot, or the fuller HyperNode once placed), so
    # the job goes to rc, not to rb, the next by name.
    layout = {"ra": (2, "2"), "rb": (5, "1"), "rc": (4, "1")}
    out = run(CASES[dialect](layout))
    assert where(out) == {"rc"}, out.pending


def test_when_no_domain_of_the_level_holds_the_job_the_message_says_which_were_tried() -> None:
    # Neither rack holds 4 members one per node: the job waits, and the message names both racks,
    # the one whose reasons it gives as the widest allowed and the other as tried after it.
    out = run(upstream_case({"ra": (2, "2"), "rb": (3, "2")}))
    assert out.bound == {}
    message = out.pending["default/t-0"]
    assert "didn't match pod topology spread constraints inside ra, the widest domain the job's topology " \
           "requirement allows (rb, the next of that level, failed too)" in message


def test_the_next_candidates_are_bounded_and_the_message_says_how_many_were_left() -> None:
    # Eleven racks of 2 nodes x 2 CPUs, each with the room but none with the nodes the spread needs:
    # the proposed one and MAX_SIBLINGS others are tried, the other two are counted, not tried.
    layout = {f"r{i:02d}": (2, "2") for i in range(11)}
    out = run(upstream_case(layout))
    assert out.bound == {}
    message = out.pending["default/t-0"]
    assert Placer.MAX_SIBLINGS == 8
    assert "inside r00, the widest domain the job's topology requirement allows (r01, r02, r03, r04, r05, r06, " \
           "r07, r08, the next of that level, failed too; 2 more of that level with room were not tried)" in message


def test_a_prefer_gather_job_tries_the_next_block_before_the_whole_spine() -> None:
    # PreferGather on blocks (no hard scope): block ba (2 x 2 CPU) is proposed, the spread sinks it;
    # block bb (4 x 1 CPU) holds the job, which stays inside one block rather than spreading over the
    # spine's six nodes.
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    nodes = domains({"ba": (2, "2"), "bb": (4, "1")}, ba={SPINE: "s0", BLOCK: "ba"}, bb={SPINE: "s0", BLOCK: "bb"})
    out = run(SPINE_BLOCK_CNT, *nodes, podgroup("t", 4, gather=prefer),
              *(pod(f"t-{i}", cpu="1", group="t", **SPREAD) for i in range(4)))
    assert where(out) == {"bb"}



def test_the_next_candidates_stay_inside_the_spine_a_running_member_holds() -> None:
    # MustGather on the spine, a member running in s0 (the job's anchor). Block ra (2 x 2 CPU, s0)
    # takes one more member under the spread, not the 3 pending; block rb (4 x 1 CPU) would hold them
    # but lies in s1, outside the running member's spine: the job waits.
    nodes = domains({"ra": (2, "2"), "rb": (4, "1")}, ra={SPINE: "s0", BLOCK: "ra"}, rb={SPINE: "s1", BLOCK: "rb"})
    must = [{"layer": "SpineLayer", "strategy": "MustGather"}]
    running = pod("t-0", cpu="1", group="t", index=0, node_name="ra-0", **SPREAD)
    out = run(SPINE_BLOCK_CNT, *nodes, podgroup("t", 4, gather=must), running,
              *(pod(f"t-{i}", cpu="1", group="t", index=i, **SPREAD) for i in range(1, 4)))
    assert out.bound == {}


def test_a_domain_with_room_only_for_more_than_one_member_a_node_is_no_next_candidate() -> None:
    # Members repel per node (one a node) and spread over zones. Block ra (4 x 1 CPU, zone za) is
    # proposed and the zone spread sinks it; block rb (one 8-CPU node, zone zb) has the CPUs but holds
    # one member under the per-node cap: it is not tried, and the message names no other block.
    nodes = [*domains({"ra": (4, "1")}, ra={SPINE: "s0", BLOCK: "ra", ZONE: "za"}),
             node("rb-0", cpu="8", labels={SPINE: "s0", BLOCK: "rb", ZONE: "zb"})]
    must = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    rules: dict[str, Any] = {"labels": {"app": "t"}, "affinity": affine(term({"app": "t"}), anti=True),
                             "topologySpreadConstraints": [spread({"app": "t"}, key=ZONE)]}
    out = run(SPINE_BLOCK_CNT, *nodes, podgroup("t", 4, gather=must),
              *(pod(f"t-{i}", cpu="1", group="t", index=i, **rules) for i in range(4)))
    assert out.bound == {}
    message = out.pending["default/t-0"]
    assert "inside ra, the widest domain" in message and "rb" not in message


def test_members_go_where_the_capped_search_proposes_inside_the_next_candidate() -> None:
    # Members repel per node and are affine over zones. Block ra (4 x 1 CPU) is proposed, but spans
    # two zones of two nodes: the affinity sinks it. Inside block rb (zone zc) the job's own search,
    # one member a node, proposes rb-0..rb-3 (binpack's order), which the members take. Without the
    # cap it would stack them on the 8-CPU rb-0, and the members after the first would go to the most
    # allocated node, rb-4.
    nodes = [*(node(f"ra-{i}", cpu="1", labels={SPINE: "s0", BLOCK: "ra", ZONE: "za" if i < 2 else "zb"})
               for i in range(4)),
             *(node(f"rb-{i}", cpu=cpu, labels={SPINE: "s0", BLOCK: "rb", ZONE: "zc"})
               for i, cpu in enumerate(("8", "1", "1", "1", "2")))]
    busy = pod("busy", cpu="1", node_name="rb-4", scheduler="other")
    must = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    together = {**affine(term({"app": "t"}), anti=True), **affine(term({"app": "t"}, key=ZONE))}
    rules: dict[str, Any] = {"labels": {"app": "t"}, "affinity": together}
    out = run(SPINE_BLOCK_CNT, *nodes, busy, podgroup("t", 4, gather=must),
              *(pod(f"t-{i}", cpu="1", group="t", index=i, **rules) for i in range(4)))
    assert out.bound == {f"default/t-{i}": f"rb-{i}" for i in range(4)}
