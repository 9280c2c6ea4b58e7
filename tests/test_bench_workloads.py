"""bench_workloads' check of the final state (``constraint_violations``, ``gang_violations``): each
PodGroup rule it names is caught, and a state that keeps them passes; and its objects are the
sizes upstream's workload names say. The benchmark's "constraints held" column is this count: a
check that never finds anything would make it meaningless."""

from __future__ import annotations

import re

from benchmarks.bench_workloads import (
    INIT_NS,
    MEASURED_NS,
    WORKLOADS,
    constraint_violations,
    gang_violations,
    node_body,
    plan,
    pod,
    podgroup,
    select,
)
from tests.integration.checker import Obj

NODES = [node_body(i) for i in (0, 1, 2, 100, 101)]  # wl-node-0..2 in rack-0, wl-node-100/101 in rack-1


def member(name: str, group: str, node: str, ns: str = MEASURED_NS, cpu: str = "100m") -> Obj:
    p = pod(name, cpu, group=group)
    p["metadata"]["namespace"] = ns
    p["spec"]["nodeName"] = node
    return p


def group(name: str, min_count: int, ns: str = MEASURED_NS, *, rack: bool = False, whole: bool = False) -> Obj:
    g = podgroup(name, min_count, rack=rack)
    g["metadata"]["namespace"] = ns
    if whole:
        g["spec"]["disruptionMode"] = {"all": {}}
    return g


def test_a_gang_split_across_racks_is_caught() -> None:
    groups = [group("gang-0", 4, rack=True)]
    one_rack = [member(f"p{i}", "gang-0", f"wl-node-{i % 3}") for i in range(4)]
    assert gang_violations(NODES, one_rack, groups) == []
    split = [*one_rack[:2], member("p2", "gang-0", "wl-node-100"), member("p3", "gang-0", "wl-node-101")]
    problems = gang_violations(NODES, split, groups)
    assert len(problems) == 1 and "rack-0" in problems[0] and "rack-1" in problems[0], problems
    # The same split is no violation for a group without the topology key.
    assert gang_violations(NODES, split, [group("gang-0", 4)]) == []


def test_a_gang_below_min_count_is_caught_and_none_bound_is_fine() -> None:
    groups = [group("gang-0", 3)]
    full = [member(f"p{i}", "gang-0", "wl-node-0") for i in range(3)]
    assert gang_violations(NODES, full, groups) == []
    assert gang_violations(NODES, [], groups) == []
    pending = member("p2", "gang-0", "wl-node-0")
    del pending["spec"]["nodeName"]
    problems = gang_violations(NODES, [*full[:2], pending], groups)
    assert len(problems) == 1 and "fewer than its minCount 3" in problems[0], problems
    # A terminating member counts as gone.
    leaving = member("p2", "gang-0", "wl-node-0")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    assert len(gang_violations(NODES, [*full[:2], leaving], groups)) == 1


def test_a_victim_group_may_lose_members_one_by_one_but_not_with_disruption_mode_all() -> None:
    left = [member("low-0", "gang-0", "wl-node-0", INIT_NS)]  # low-1 was evicted
    evicted = frozenset({f"{INIT_NS}/gang-0"})
    assert gang_violations(NODES, left, [group("gang-0", 2, INIT_NS)], evicted) == []
    assert len(gang_violations(NODES, left, [group("gang-0", 2, INIT_NS)])) == 1  # not evicted: a split gang
    whole = gang_violations(NODES, left, [group("gang-0", 2, INIT_NS, whole=True)], evicted)
    assert len(whole) == 1 and "disruptionMode all" in whole[0], whole


def test_a_pod_bound_without_its_pod_group_is_caught() -> None:
    problems = gang_violations(NODES, [member("p0", "gang-9", "wl-node-0")], [group("gang-0", 1)])
    assert problems == [f"{MEASURED_NS}/p0 is bound though its PodGroup {MEASURED_NS}/gang-9 does not exist"]


def test_host_ports_and_resource_fit_are_caught() -> None:
    groups = [group("gang-0", 1)]
    a, b = (member(n, "gang-0", "wl-node-0") for n in ("a", "b"))
    for p in (a, b):
        p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8000}]
    problems = constraint_violations(NODES, [a, b], groups, {})
    assert len(problems) == 1 and "same host port" in problems[0], problems
    b["spec"]["nodeName"] = "wl-node-1"
    assert constraint_violations(NODES, [a, b], groups, {}) == []
    crowd = [member(f"c{i}", "gang-0", "wl-node-2", cpu="100m") for i in range(41)]  # 4.1 CPUs on 4
    problems = constraint_violations(NODES, crowd, groups, {})
    assert len(problems) == 1 and "cpu" in problems[0], problems
    assert constraint_violations(NODES, crowd[:40], groups, {}) == []


def test_the_objects_are_the_sizes_upstream_names_and_their_init_state_holds() -> None:
    for w in WORKLOADS:
        p = plan(w, 1.0, "koordpy", w.short)
        counts = {word: int(n) for n, word in re.findall(r"(\d+)([A-Za-z]+)", w.name.split("/")[1])}
        assert p.nodes == counts["Nodes"], w.name
        groups = counts.get("Gangs") or counts.get("PreemptorGangs") or counts["PreemptorGang"]
        assert len(p.groups[MEASURED_NS]) == groups, w.name
        # The preemption names count a gang's pods, the others all pods.
        assert len(p.measured) == counts["Pods"] * (groups if "Preemptor" in w.name else 1), w.name
        if "InitPods" in counts:
            assert len(p.init[INIT_NS]) == counts["InitPods"], w.name
        if "LowPriorityGangs" in counts:
            assert len(p.groups[INIT_NS]) == counts["LowPriorityGangs"], w.name
        nodes = [node_body(i) for i in range(p.nodes)]
        pods, pgs = [], []
        for ns, bodies in p.init.items():
            pods += [{**b, "metadata": {**b["metadata"], "namespace": ns}} for b in bodies]
        for ns, bodies in p.groups.items():
            pgs += [{**b, "metadata": {**b["metadata"], "namespace": ns}} for b in bodies]
        assert constraint_violations(nodes, pods, pgs, {}) == [], w.name
    assert [w.short for w in select({"GangPreemptionBasic"})] == ["pb1", "pb10"]
    assert len(plan(WORKLOADS[3], 0.05, "koordpy", "x").measured) == 1000  # a gang keeps its size
