"""Issue 29, item 11: how equally tight domains are told apart is the Topology's kind's rule.

A ``kueue.x-k8s.io`` Topology gets Kueue's BestFit: among the domains that fit with the same room,
the first in the order of their level values, top level first (kubernetes-sigs/kueue
``pkg/cache/scheduler/tas_flavor_snapshot.go``: ``sortedDomains`` then ``findBestFitDomainBy``). A
``kai.scheduler`` Topology keeps the ancestor chain: KAI sorts its tree so that the more packed
ancestor comes first (kai-scheduler/KAI-Scheduler ``pkg/scheduler/plugins/topology/job_filtering.go``:
``sortTree``, ``sortDomainInfos``).

The cluster is ``defaultNodes`` of Kueue's ``TestFindTopologyAssignments``
(``pkg/cache/scheduler/tas_cache_test.go``), node by node: names, block / rack / hostname labels and
allocatable CPUs as there::

        b1                   b2
     /      \\             /      \\
    r1       r2          r1       r2
    |      /  |  \\       |         |
    x3    x5  x1  x6     x2       x4

and the cases are its "host required; single Pod fits in the host; BestFit" (levels block, rack,
hostname) and "rack required; single Pod fits in a rack; BestFit" (levels block, rack), both of which
expect ``b1`` (host ``x3``; rack ``[b1, r1]``).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod
from tests.core.dialects.test_topology_sources import run, topology

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
HOST = "kubernetes.io/hostname"

# (node name, block, rack, hostname, CPUs): Kueue's defaultNodes (b2-r2-x2 is in rack r1, as there).
DEFAULT_NODES = [("b1-r1-x3", "b1", "r1", "x3", "1"), ("b1-r2-x5", "b1", "r2", "x5", "1"),
                 ("b1-r2-x1", "b1", "r2", "x1", "1"), ("b1-r2-x6", "b1", "r2", "x6", "1"),
                 ("b2-r2-x2", "b2", "r1", "x2", "1"), ("b2-r2-x4", "b2", "r2", "x4", "2")]

CASES = {  # Kueue's case name: (Topology levels, required level)
    "host required; single Pod fits in the host; BestFit": ((BLOCK, RACK, HOST), HOST),
    "rack required; single Pod fits in a rack; BestFit": ((BLOCK, RACK), RACK),
}


def default_nodes() -> list[dict[str, Any]]:
    return [node(name, cpu=cpu, memory="1Gi", labels={BLOCK: block, RACK: rack, HOST: host})
            for name, block, rack, host, cpu in DEFAULT_NODES]


def single_pod(levels: tuple[str, ...], required: str, api: str) -> list[dict[str, Any]]:
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "one", "namespace": "default"},
          "spec": {"minMember": 1, "topologyConstraint": {"topology": "tas", "requiredTopologyLevel": required}}}
    return [*default_nodes(), topology("tas", *levels, api=api), pg,
            pod("one-0", cpu="1", memory="100Mi", annotations={"pod-group-name": "one"})]


@pytest.mark.parametrize("case", CASES)
def test_a_kueue_topology_breaks_ties_by_level_values_as_kueue_does(case: str) -> None:
    out = run(single_pod(*CASES[case], api="kueue.x-k8s.io/v1beta1"))
    assert out.bound == {"default/one-0": "b1-r1-x3"}  # block b1, rack r1, host x3


@pytest.mark.parametrize("case", CASES)
def test_a_kai_topology_keeps_the_more_packed_ancestor_first(case: str) -> None:
    # The same cluster and constraint under a kai.scheduler Topology: block b2 (3 CPUs free) is more
    # packed than b1 (4), so its rack r1 and host x2 win the tie.
    out = run(single_pod(*CASES[case], api="kai.scheduler/v1alpha1"))
    assert out.bound == {"default/one-0": "b2-r2-x2"}


def test_values_compare_as_plain_strings_top_level_first() -> None:
    # Kueue compares level values with strings.Compare, block before rack: b10/r1 comes before b9/r0
    # (a natural order would put b9 first), and the block decides before the rack does.
    nodes = [node("n-b9", cpu="1", labels={BLOCK: "b9", RACK: "r0"}),
             node("n-b10", cpu="1", labels={BLOCK: "b10", RACK: "r1"})]
    pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
          "metadata": {"name": "one", "namespace": "default"},
          "spec": {"minMember": 1, "topologyConstraint": {"topology": "tas", "requiredTopologyLevel": RACK}}}
    out = run(*nodes, topology("tas", BLOCK, RACK), pg,
              pod("one-0", cpu="1", memory="100Mi", annotations={"pod-group-name": "one"}))
    assert out.bound == {"default/one-0": "n-b10"}
