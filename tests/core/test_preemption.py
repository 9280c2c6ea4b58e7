"""Job-level, topology-aware preemption: each rule of issue 8 on data of our own."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Node, Pod, PriorityClass
from koordpy.api.podgroup import PodGroup
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.decisions import Nominate, Preempt
from koordpy.core.gang import GangGroupId, Job
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, run, spine_block_nodes

HIGH, LOW, MID = priority_class("high", 1000), priority_class("low", 10), priority_class("mid", 100)
MUST_SPINE = [{"layer": "SpineLayer", "strategy": "MustGather"}]
# Two spines: a has 5 nodes (a0..a4), b has 4 (b0..b3), c has 3 (c0..c2).
LAYOUT = {"spine-a": {"blk-a1": [0, 1, 2], "blk-a2": [3, 4]}, "spine-b": {"blk-b1": [5, 6], "blk-b2": [7, 8]},
          "spine-c": {"blk-c1": [9, 10, 11]}}


def gang(name: str, n: int, prio: str = "high", cpu: str = "8", **extra: Any) -> list[dict[str, Any]]:
    return [pod(f"{name}-{i}", cpu=cpu, group=name, index=i, priority_class=prio, **extra) for i in range(n)]


def running(name: str, where: str, prio: str = "low", cpu: str = "8", **kw: Any) -> dict[str, Any]:
    return pod(name, cpu=cpu, node_name=where, priority_class=prio, scheduler="other", **kw)


def test_mustgather_job_preempts_one_pod_in_the_tightest_spine_and_lands_there() -> None:
    # a and b each free 4 nodes by evicting one pod; binpack picks b, the smaller offerslot (4 < 5).
    out = run(spine_block_nodes(LAYOUT), SPINE_BLOCK_CNT, HIGH, LOW, MID,
              running("r-0", "node-0"), running("r-1", "node-1"), running("r-5", "node-5"),
              podgroup("train", 4, gather=MUST_SPINE), gang("train", 4))
    assert out.preempted == ["default/r-5"]
    assert out.bound == {f"default/train-{i}": f"node-{5 + i}" for i in range(4)}
    assert out.nominated == out.bound


def test_never_preempts_nobody_and_says_so() -> None:
    out = run(spine_block_nodes(LAYOUT), SPINE_BLOCK_CNT, HIGH, LOW,
              running("r-0", "node-0"), running("r-1", "node-1"), running("r-5", "node-5"),
              podgroup("train", 4, gather=MUST_SPINE), gang("train", 4, preemptionPolicy="Never"))
    assert out.preempted == [] and out.bound == {}
    assert "preemption: not eligible due to preemptionPolicy=Never." in out.pending["default/train-0"]
    assert "preemption already attempted by default/train-0 with message not eligible due to preemptionPolicy=Never." \
        in out.pending["default/train-1"]


def test_never_from_the_priority_class() -> None:
    out = run(node("n0"), priority_class("polite", 1000, "Never"), LOW, running("r", "n0"),
              pod("p", priority_class="polite"))
    assert out.preempted == [] and "preemptionPolicy=Never" in out.pending["default/p"]


def test_equal_priority_and_protected_pods_are_never_victims() -> None:
    label = {"scheduling.koordinator.sh/disable-preemptible": "true"}
    out = run(node("n0"), node("n1"), HIGH, LOW, running("peer", "n0", prio="high"),
              running("keep", "n1", labels=label), pod("p", priority_class="high"))
    assert out.preempted == [] and out.bound == {}


def test_lone_pod_evicts_the_lowest_priority_victim() -> None:
    # A job of one: each node is a candidate; n1's victim has the lower priority.
    out = run(node("n0"), node("n1"), HIGH, LOW, MID, running("mid", "n0", prio="mid"), running("low", "n1"),
              pod("p", priority_class="high"))
    assert out.preempted == ["default/low"] and out.bound == {"default/p": "n1"}


def test_reprieve_keeps_the_higher_priority_pods_of_a_node() -> None:
    # p needs 4 CPUs on n0 (the only node): of two 4-CPU pods, the lower priority one goes.
    out = run(node("n0"), HIGH, LOW, MID, running("mid", "n0", prio="mid", cpu="4"),
              running("low", "n0", cpu="4"), pod("p", cpu="4", priority_class="high"))
    assert out.preempted == ["default/low"] and out.bound == {"default/p": "n0"}


def test_reprieve_puts_gang_members_back_before_pods_of_no_gang() -> None:
    # Equal priority: the gang's member is reprieved first, so the standalone pod is the victim.
    out = run(node("n0"), HIGH, LOW, podgroup("old", 1), running("old-0", "n0", cpu="4", labels={
              "pod-group.scheduling.sigs.k8s.io": "old"}), running("solo", "n0", cpu="4"),
              pod("p", cpu="4", priority_class="high"))
    assert out.preempted == ["default/solo"]


def test_fewest_disrupted_jobs_wins_over_fewest_pods() -> None:
    # Spine a: evicting one 2-pod gang (2 pods, 1 job); spine b: two standalone pods (2 pods, 2 jobs).
    layout = {"spine-a": {"blk-a": [0, 1, 2]}, "spine-b": {"blk-b": [3, 4, 5]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, HIGH, LOW, podgroup("old", 2),
              *[running(f"old-{i}", f"node-{i}", labels={"pod-group.scheduling.sigs.k8s.io": "old"}) for i in (0, 1)],
              running("s-3", "node-3"), running("s-4", "node-4"),
              podgroup("train", 3, gather=MUST_SPINE), gang("train", 3))
    assert sorted(out.preempted) == ["default/old-0", "default/old-1"]
    assert set(out.bound.values()) == {"node-0", "node-1", "node-2"}


def test_lowest_highest_victim_priority_comes_first() -> None:
    layout = {"spine-a": {"blk-a": [0, 1]}, "spine-b": {"blk-b": [2, 3]}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, HIGH, LOW, MID, running("m", "node-0", prio="mid"),
              running("l", "node-2"), podgroup("train", 2, gather=MUST_SPINE), gang("train", 2))
    assert out.preempted == ["default/l"]
    assert set(out.bound.values()) == {"node-2", "node-3"}


def test_breaking_a_gang_below_its_minimum_counts_all_its_bound_members() -> None:
    # Spine a: one member of a 4-pod gang with minMember 4 (disrupts its 4 bound pods); spine b: two
    # members of a gang with minMember 1 (2 pods). Both are one job: the pods decide, b wins.
    layout = {"spine-a": {"blk-a": [0, 1, 2, 3, 4, 5]}, "spine-b": {"blk-b": [6, 7, 8]}}
    tight = [running(f"t-{i}", f"node-{i}", labels={"pod-group.scheduling.sigs.k8s.io": "tight"}, cpu="8")
             for i in (0, 1, 2, 3)]
    loose = [running(f"l-{i}", f"node-{i}", labels={"pod-group.scheduling.sigs.k8s.io": "loose"}, cpu="8")
             for i in (6, 7)]
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, HIGH, LOW, podgroup("tight", 4), podgroup("loose", 1),
              *tight, *loose, podgroup("train", 3, gather=MUST_SPINE), gang("train", 3))
    assert sorted(out.preempted) == ["default/l-6", "default/l-7"]


def test_only_the_chosen_victims_go_and_the_rest_of_their_gang_keeps_running() -> None:
    members = [running(f"old-{i}", "n0", cpu="2", labels={"pod-group.scheduling.sigs.k8s.io": "old"})
               for i in range(4)]
    out = run(node("n0"), HIGH, LOW, podgroup("old", 2), *members, pod("p", cpu="2", priority_class="high"))
    assert len(out.preempted) == 1 and out.bound == {"default/p": "n0"}


def test_a_job_that_cannot_fit_even_after_preemption_evicts_nobody() -> None:
    out = run(spine_block_nodes(LAYOUT), SPINE_BLOCK_CNT, HIGH, LOW, running("r-0", "node-0"),
              podgroup("train", 6, gather=MUST_SPINE), gang("train", 6))
    assert out.preempted == [] and out.bound == {}
    assert "preemption: not helpful" in out.pending["default/train-0"]


def test_a_selector_no_node_matches_is_not_resolvable_by_preemption() -> None:
    out = run(node("n0"), HIGH, LOW, running("r", "n0"), pod("p", priority_class="high", nodeSelector={"x": "y"}))
    assert out.preempted == [] and "preemption" not in out.pending["default/p"]


# -- nominations, in the core's own cycles ------------------------------------------------------

def _objs(raws: list[dict[str, Any]]) -> tuple[list[Node], list[Pod], dict[str, PriorityClass]]:
    nodes = [Node.from_raw(r) for r in raws if r["kind"] == "Node"]
    classes = {r["metadata"]["name"]: PriorityClass.from_raw(r) for r in raws if r["kind"] == "PriorityClass"}
    pods = [Pod.from_raw(r) for r in raws if r["kind"] == "Pod"]
    return nodes, pods, classes


def test_nominations_hold_the_room_against_lower_priority_pods_and_go_with_their_pod() -> None:
    # The preemptor needs n0 and n1; n1 is free already, n0 holds a victim. A lower-priority pod that
    # fits n1 must not take it while the victim terminates; once the preemptor is deleted, it may.
    raws = [node("n0"), node("n1"), HIGH, LOW, MID, running("victim", "n0"),
            pod("a", priority_class="high", labels={"pod-group.scheduling.sigs.k8s.io": "pair"}),
            pod("b", priority_class="high", labels={"pod-group.scheduling.sigs.k8s.io": "pair"})]
    nodes, pods, classes = _objs(raws)
    pg = {"default/pair": PodGroup.from_raw(podgroup("pair", 2))}
    state = SchedulerState()
    first = schedule(Snapshot(nodes=nodes, pods=pods, podgroups=pg, priority_classes=classes), state, 0.0)
    assert [d.pod for d in first.preempted] == ["default/victim"]
    nominated = {d.pod: d.node for d in first.nominations}
    assert nominated == {"default/a": "n0", "default/b": "n1"}
    # Next cycle: the victim terminates, the nominations are on the pods, a lower-priority pod arrives.
    by = {p.key: p for p in pods}
    victim = by["default/victim"].model_copy(update={"deleting": True, "preempted": True})
    a = by["default/a"].model_copy(update={"nominated_node_name": "n0"})
    b = by["default/b"].model_copy(update={"nominated_node_name": "n1"})
    late = Pod.from_raw(pod("late", priority_class="mid"))
    second = schedule(Snapshot(nodes=nodes, pods=[victim, a, b, late], podgroups=pg, priority_classes=classes),
                      state, 1.0)
    assert second.binds == [] and second.preempted == []
    assert "not eligible due to terminating pod on the nominated node" in second.pending["default/a"]
    # The preemptor is deleted: its nominations go with it and the late pod takes n1.
    third = schedule(Snapshot(nodes=nodes, pods=[victim, late], podgroups=pg, priority_classes=classes), state, 2.0)
    assert [(d.pod, d.node) for d in third.binds] == [("default/late", "n1")]


def test_a_scheduler_restarted_mid_preemption_evicts_nobody_more_and_finishes() -> None:
    raws = [node("n0"), node("n1"), HIGH, LOW, running("victim", "n0"), running("other", "n1"),
            pod("p", priority_class="high")]
    nodes, pods, classes = _objs(raws)
    by = {p.key: p for p in pods}
    victim = by["default/victim"].model_copy(update={"deleting": True, "preempted": True})
    p = by["default/p"].model_copy(update={"nominated_node_name": "n0"})
    fresh = SchedulerState()  # nothing remembered: what the API says is enough
    result = schedule(Snapshot(nodes=nodes, pods=[victim, by["default/other"], p], priority_classes=classes),
                      fresh, 0.0)
    assert result.preempted == [] and result.binds == []
    done = schedule(Snapshot(nodes=nodes, pods=[by["default/other"], p], priority_classes=classes), fresh, 1.0)
    assert [(d.pod, d.node) for d in done.binds] == [("default/p", "n0")]


def test_a_higher_priority_job_takes_back_room_nominated_for_a_lower_one_without_evicting() -> None:
    raws = [node("n0"), HIGH, MID, pod("low", priority_class="mid"), pod("top", priority_class="high")]
    nodes, pods, classes = _objs(raws)
    by = {p.key: p for p in pods}
    low = by["default/low"].model_copy(update={"nominated_node_name": "n0"})
    result = schedule(Snapshot(nodes=nodes, pods=[low, by["default/top"]], priority_classes=classes),
                      SchedulerState(), 0.0)
    assert result.preempted == []
    assert [(d.pod, d.node) for d in result.binds] == [("default/top", "n0")]
    assert Nominate("default/low", "") in result.decisions


def test_victims_condition_message_names_the_job_and_the_trigger_pod() -> None:
    raws = [node("n0"), HIGH, LOW, running("victim", "n0"), pod("p", priority_class="high")]
    nodes, pods, classes = _objs(raws)
    result = schedule(Snapshot(nodes=nodes, pods=pods, priority_classes=classes), SchedulerState(), 0.0)
    assert result.preempted == [Preempt(
        "default/victim", "koordpy: preempting to accommodate higher priority pods, preemptor: default/p, "
                          "triggerpod: default/p", "default/p", "default/p")]


# -- the other topology dialects keep their constraint while preempting ---------------------------

def test_volcano_hard_tier_one_job_preempts_inside_one_tier_one_hypernode() -> None:
    from tests.core.dialects.test_topology_sources import seed_004, vc_job

    # Every node has a low-priority 4-CPU pod; a 2-pod hard tier-1 job must empty one tier-1 HyperNode
    # (two victims, one each), never spread its victims over two of them.
    busy = [running(f"busy-node{i}", f"node{i}", cpu="4") for i in range(8)]
    job = vc_job("vc", 2, tier=1)
    for p in job[1:]:
        p["spec"]["priorityClassName"] = "high"
    out = run(seed_004(), HIGH, LOW, *busy, *job)
    hosts = set(out.bound.values())
    assert len(hosts) == 2 and hosts in ({"node0", "node1"}, {"node2", "node3"}, {"node4", "node5"},
                                         {"node6", "node7"})
    assert sorted(out.preempted) == sorted(f"default/busy-{h}" for h in hosts)


def test_kai_required_rack_preempts_inside_one_rack() -> None:
    from tests.core.dialects.test_topology_sources import NET, RACKS, batch_job, gpu_pod, kai, racks_of, zoned

    # Every node's GPUs are taken by a low-priority pod; a 2-pod job requiring one rack evicts two pods
    # of the same rack: the smallest rack that fits it (a2, two nodes) by binpack.
    nodes = zoned(RACKS)
    busy = []
    for n in nodes:
        b = running(f"busy-{n['metadata']['name']}", n["metadata"]["name"], cpu="1")
        b["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
        busy.append(b)
    job = batch_job("train", 2, kai("network", required="example.com/rack"))
    pods = [gpu_pod(f"train-{i}", job, priority_class="high") for i in range(2)]
    out = run(nodes, NET, HIGH, LOW, *busy, job, *pods)
    assert racks_of(out) == {"a2": 2}
    assert sorted(out.preempted) == ["default/busy-n-a2-0", "default/busy-n-a2-1"]


def test_a_dry_run_says_what_would_happen_and_changes_nothing() -> None:
    from koordpy.core.cycle import dry_run

    raws = [node("n0"), HIGH, LOW, running("victim", "n0"), pod("p", priority_class="high")]
    nodes, pods, classes = _objs(raws)
    snap = Snapshot(nodes=nodes, pods=pods, priority_classes=classes)
    state = SchedulerState(reserved={"default/other": "n0"}, wait_since={GangGroupId.of("g"): 1.0})
    out = dry_run(snap, state, 5.0, "default/p")
    assert out is not None and out.job == "default/p" and out.plan is not None
    assert out.plan.victims == ("default/victim",) and out.plan.nominated == {"default/p": 0}
    assert out.failure is not None and out.failure.resolvable and out.failure.filtered == (("Insufficient cpu", 1),)
    assert [d.pod for d in out.decisions if isinstance(d, Preempt)] == ["default/victim"]
    assert state.reserved == {"default/other": "n0"} and state.wait_since == {GangGroupId.of("g"): 1.0}
    assert state.view is None
    assert dry_run(snap, state, 5.0, "default/victim") is None  # running: nothing to try


def test_the_preemption_example_spares_the_gang_and_lands_in_spine_1() -> None:
    from pathlib import Path

    from koordpy.cli.manifests import load_documents
    from koordpy.sim.simulator import World, simulate

    root = Path(__file__).resolve().parents[2] / "examples" / "preemption"
    out = simulate(World.from_objects(load_documents([str(root)]).docs))
    assert out.preempted == ["default/notebook"]
    assert out.bound == {f"default/train-{i}": f"node-{5 + i}" for i in range(4)}


def test_a_parked_job_wakes_when_room_appears_that_preemption_can_complete() -> None:
    # p (8 CPUs, high) waits: n0 holds a high-priority 4-CPU pod and a low 4-CPU pod. When the
    # high-priority pod leaves, the freed 4 CPUs alone do not fit p, but with the low pod evicted they do.
    raws = [node("n0"), HIGH, LOW, running("peer", "n0", prio="high", cpu="4"), running("low", "n0", cpu="4"),
            pod("p", priority_class="high")]
    nodes, pods, classes = _objs(raws)
    by = {p.key: p for p in pods}
    state = SchedulerState()
    first = schedule(Snapshot(nodes=nodes, pods=pods, priority_classes=classes), state, 0.0)
    assert first.preempted == [] and "default/p" in first.pending
    after = schedule(Snapshot(nodes=nodes, pods=[by["default/low"], by["default/p"]], priority_classes=classes),
                     state, 1.0)
    assert [d.pod for d in after.preempted] == ["default/low"]


def test_unlike_members_evict_only_what_their_real_placement_needs() -> None:
    # mix-0 (2 CPUs) fits beside r0 on n0; only mix-1 (8 CPUs) needs a victim. The common shape (8
    # CPUs) alone would evict both running pods.
    members = [pod("mix-0", cpu="2", group="mix", priority_class="high"),
               pod("mix-1", cpu="8", group="mix", priority_class="high")]
    out = run(node("n0"), node("n1"), HIGH, LOW, running("r0", "n0", cpu="6"), running("r1", "n1"),
              podgroup("mix", 2), members)
    assert out.preempted == ["default/r1"]
    assert out.bound == {"default/mix-0": "n0", "default/mix-1": "n1"}


def test_preemption_switched_off_evicts_nobody_and_the_job_waits() -> None:
    raws = [node("n0"), HIGH, LOW, running("victim", "n0"), pod("p", priority_class="high")]
    nodes, pods, classes = _objs(raws)
    off = schedule(Snapshot(nodes=nodes, pods=pods, priority_classes=classes, preemption=False), SchedulerState(), 0.0)
    assert off.preempted == [] and off.nominations == [] and off.binds == [] and off.preemption_attempts == 0
    assert "Insufficient cpu" in off.pending["default/p"] and "preemption" not in off.pending["default/p"]
    on = schedule(Snapshot(nodes=nodes, pods=pods, priority_classes=classes), SchedulerState(), 0.0)
    assert [d.pod for d in on.preempted] == ["default/victim"] and on.preemption_attempts == 1


# -- jobs of unlike pods -----------------------------------------------------------------------------


def _unlike_cluster() -> list[dict[str, Any]]:
    """Spine a: four 4-CPU workers' nodes and one 2-CPU node, all full of low-priority pods; spine b:
    one free 8-CPU node, too small for the whole job."""
    def at(name: str, cpu: str, spine: str) -> dict[str, Any]:
        return node(name, cpu=cpu, labels={"network.topology.nvidia.com/spine": spine,
                                           "network.topology.nvidia.com/block": f"blk-{spine}"})

    nodes = [*(at(f"w{i}", "4", "a") for i in range(4)), at("m0", "2", "a"), at("b0", "8", "b")]
    busy = [running(f"low-w{i}", f"w{i}", cpu="4") for i in range(4)] + [running("low-m0", "m0", cpu="2")]
    return [*nodes, *busy]


def test_a_ganggroup_of_unlike_pods_preempts_what_its_real_placement_needs() -> None:
    # One 1-CPU master and four 4-CPU workers MustGather a spine. Priced at the largest request the
    # 2-CPU node offers nothing and spine a only 4 slots for 5 pods: "not helpful". Really the master
    # fits on m0 and the workers on w0..w3 once the low-priority pods are gone.
    groups = ["default/master", "default/worker"]
    out = run(_unlike_cluster(), SPINE_BLOCK_CNT, HIGH, LOW,
              podgroup("master", 1, gather=MUST_SPINE, groups=groups),
              podgroup("worker", 4, gather=MUST_SPINE, groups=groups),
              pod("master-0", cpu="1", group="master", index=0, priority_class="high"),
              *[pod(f"worker-{i}", cpu="4", group="worker", index=i + 1, priority_class="high") for i in range(4)])
    assert out.bound["default/master-0"] == "m0"
    assert {out.bound[f"default/worker-{i}"] for i in range(4)} == {f"w{i}" for i in range(4)}
    assert sorted(out.preempted) == sorted([f"default/low-w{i}" for i in range(4)] + ["default/low-m0"])


def test_a_volcano_job_with_a_small_launcher_preempts_for_its_workers() -> None:
    # The same cluster as HyperNodes: a (tier 1) holds w0..w3 and m0, b holds b0; a hard tier-1 job of
    # a 1-CPU launcher and four 4-CPU workers.
    hns = [{"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in ns]}}
           for name, ns in (("hn-a", ["w0", "w1", "w2", "w3", "m0"]), ("hn-b", ["b0"]))]
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "mpi", "namespace": "default"},
          "spec": {"minMember": 5, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
    ann = {"scheduling.k8s.io/group-name": "mpi"}
    pods = [pod("mpi-launcher", cpu="1", annotations=ann, priority_class="high"),
            *[pod(f"mpi-worker-{i}", cpu="4", annotations=ann, priority_class="high") for i in range(4)]]
    out = run(_unlike_cluster(), *hns, HIGH, LOW, pg, *pods)
    assert len(out.bound) == 5 and "b0" not in out.bound.values()
    assert out.bound["default/mpi-launcher"] == "m0"


def test_candidates_with_room_only_for_the_small_pods_do_not_use_up_the_verified_tries() -> None:
    # Nine CPU-only blocks offer room for a 1-CPU master and need no victims; only block gpu (four
    # 8-GPU nodes full of low-priority GPU pods) can hold the three GPU workers. The CPU-only blocks are
    # no candidates at all: each kind of pod must find room for all its members in the candidate.
    must_block = [{"layer": "BlockLayer", "strategy": "MustGather"}]

    def at(name: str, block: str, **kw: Any) -> dict[str, Any]:
        return node(name, cpu="16", labels={"network.topology.nvidia.com/spine": "s",
                                            "network.topology.nvidia.com/block": block}, **kw)

    def gpu(p: dict[str, Any]) -> dict[str, Any]:
        p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "8"
        return p

    nodes = [*(at(f"g{i}", "gpu", extra={"nvidia.com/gpu": "8"}) for i in range(4)),
             *(at(f"c{i}", f"cpu{i}") for i in range(9))]
    low = [gpu(pod(f"low-{i}", cpu="1", node_name=f"g{i}", priority_class="low", scheduler="other"))
           for i in range(4)]
    groups = ["default/master", "default/worker"]
    out = run(nodes, SPINE_BLOCK_CNT, HIGH, LOW, *low,
              podgroup("master", 1, gather=must_block, groups=groups),
              podgroup("worker", 3, gather=must_block, groups=groups),
              pod("master-0", cpu="1", group="master", index=0, priority_class="high"),
              *[gpu(pod(f"worker-{i}", cpu="1", group="worker", index=i + 1, priority_class="high"))
                for i in range(3)])
    assert len(out.bound) == 4 and set(out.bound.values()) <= {f"g{i}" for i in range(4)}
    assert len(out.preempted) == 3


def test_a_member_beyond_a_satisfied_gangs_minimum_preempts_like_any_pod() -> None:
    # The gang's minimum (1) runs on n0; its second member finds no room, and a lower-priority lone
    # pod holds n1: the member preempts it, as kube-scheduler's PostFilter does for such a pod.
    # (tests/core/dialects/test_upstream_preemption.py has the same for a Kubernetes PodGroup, whose
    # bound members meet the quorum in the attempt itself.)
    out = run(priority_class("low", 10), priority_class("high", 1000), node("n0", cpu="4"), node("n1", cpu="4"),
              podgroup("g", 1), pod("g-0", cpu="3", group="g", node_name="n0", priority_class="high"),
              pod("g-1", cpu="3", group="g", priority_class="high"),
              pod("low", cpu="3", node_name="n1", priority_class="low"))
    assert out.preempted == ["default/low"]
    assert out.bound == {"default/g-1": "n1"}


# -- the cheapest victims with the rules between pods (issue 29, item 9) ------------------------------


def _ported(p: dict[str, Any], *ports: int) -> dict[str, Any]:
    p["spec"]["containers"][0]["ports"] = [{"containerPort": n, "hostPort": n} for n in ports]
    return p


def _repels(p: dict[str, Any], app: str, key: str = "kubernetes.io/hostname") -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return p


def test_a_pod_needing_two_host_ports_evicts_the_one_pod_holding_one_not_the_two_holding_both() -> None:
    # The case: n0 runs two low pods holding 8080 and 8081, n1 one holding 8080. Resources
    # alone price both nodes at no victim and n0 comes first by name; kube-scheduler evicts n1's pod.
    out = run(node("n0"), node("n1"), HIGH, LOW,
              _ported(running("a", "n0", cpu="1"), 8080), _ported(running("b", "n0", cpu="1"), 8081),
              _ported(running("c", "n1", cpu="1"), 8080), _ported(pod("p", cpu="1", priority_class="high"), 8080, 8081))
    assert out.preempted == ["default/c"]
    assert out.bound == {"default/p": "n1"}


def test_required_anti_affinity_evicts_the_fewest_pods_it_repels() -> None:
    # p repels app=x on its host: n0 runs two such low pods, n1 one.
    x = {"app": "x"}
    out = run(node("n0"), node("n1"), HIGH, LOW, running("x-0", "n0", cpu="1", labels=x),
              running("x-1", "n0", cpu="1", labels=x), running("x-2", "n1", cpu="1", labels=x),
              _repels(pod("p", cpu="1", priority_class="high"), "x"))
    assert out.preempted == ["default/x-2"] and out.bound == {"default/p": "n1"}


def test_the_anti_affinity_of_running_pods_is_priced_too() -> None:
    # The running low pods repel p (app=p) from their host: two of them on n0, one on n1.
    pods = [_repels(running(f"r-{i}", where, cpu="1"), "p") for i, where in enumerate(("n0", "n0", "n1"))]
    out = run(node("n0"), node("n1"), HIGH, LOW, *pods, pod("p", cpu="1", priority_class="high", labels={"app": "p"}))
    assert out.preempted == ["default/r-2"] and out.bound == {"default/p": "n1"}


def test_a_block_gang_goes_where_its_host_ports_cost_fewer_victims() -> None:
    # A MustGather gang of two pods, each on a node of its own (they share host port 9000). Block a
    # (node-0, node-1) runs two low pods holding the port, block b (node-2, node-3) one: by resources
    # both blocks are free, a first by name; b costs one victim.
    layout = {"spine-a": {"blk-a": [0, 1], "blk-b": [2, 3]}}
    holders = [_ported(running(f"h-{i}", f"node-{i}", cpu="1"), 9000) for i in (0, 1, 2)]
    must_block = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, HIGH, LOW, *holders,
              podgroup("train", 2, gather=must_block),
              [_ported(p, 9000) for p in gang("train", 2, cpu="1")])
    assert out.preempted == ["default/h-2"]
    assert sorted(out.bound.values()) == ["node-2", "node-3"]


def test_a_rule_over_a_wider_domain_is_priced_by_verifying_more_than_one_candidate() -> None:
    # The gang repels app=x over its whole block (a key no node holds alone, so the pricing cannot see
    # it): block a runs two such low pods, block b one. Verifying a finds two victims; b, priced no
    # dearer, is verified too and costs one.
    layout = {"spine-a": {"blk-a": [0, 1], "blk-b": [2, 3]}}
    x = {"app": "x"}
    xs = [running(f"x-{i}", f"node-{i}", cpu="1", labels=x) for i in (0, 1, 2)]
    must_block = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    members = [_repels(p, "x", "network.topology.nvidia.com/block") for p in gang("train", 2, cpu="1")]
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, HIGH, LOW, *xs, podgroup("train", 2, gather=must_block),
              members)
    assert out.preempted == ["default/x-2"]
    assert len(out.bound) == 2 and set(out.bound.values()) <= {"node-2", "node-3"}


def test_the_pricing_sees_host_ports_so_the_cheapest_of_many_nodes_is_found() -> None:
    # Nine nodes: the first eight each run two low pods holding the ports p needs, n8 only one. More
    # candidates than are ever verified: only pricing them with the ports finds n8, as kube-scheduler's
    # dry run over every node does.
    holders = [_ported(running(f"h{i}-{port}", f"n{i}", cpu="1"), port) for i in range(8) for port in (8080, 8081)]
    out = run(*(node(f"n{i}") for i in range(9)), HIGH, LOW, *holders, _ported(running("last", "n8", cpu="1"), 8080),
              _ported(pod("p", cpu="1", priority_class="high"), 8080, 8081))
    assert out.preempted == ["default/last"] and out.bound == {"default/p": "n8"}


def test_a_job_with_a_running_member_preempts_only_inside_that_members_spine() -> None:
    # MustGather on the spine, train-0 running in spine-a: its other member may only go there, where
    # the victim is of mid priority. Nine other spines each hold a cheaper, low-priority victim: were
    # they candidates, they would take every verifying try (MAX_VERIFIED) and nobody would be evicted.
    layout = {"spine-a": {"blk-a": [0, 1]}, **{f"spine-{s}": {f"blk-{s}": [2 + i]} for i, s in enumerate("bcdefghij")}}
    out = run(spine_block_nodes(layout), SPINE_BLOCK_CNT, HIGH, LOW, MID, podgroup("train", 2, gather=MUST_SPINE),
              pod("train-0", group="train", index=0, node_name="node-0", priority_class="high"),
              pod("train-1", group="train", index=1, priority_class="high"),
              running("mid", "node-1", prio="mid"), *(running(f"low-{i}", f"node-{i}") for i in range(2, 11)))
    assert out.preempted == ["default/mid"] and out.bound == {"default/train-1": "node-1"}


def test_a_verifying_placement_gives_the_nodes_its_caller_confined_the_placer_to_back() -> None:
    # A dry run's verifying placement confines the placer to its candidate, then gives back what the
    # caller had set (not None: that would free a caller's placements from its own confinement).
    nodes, pods, _ = _objs([node("n0"), node("n1"), pod("p", priority_class="high")])
    cycle = Cycle(Snapshot(nodes=nodes, pods=pods), SchedulerState(), 0.0)
    outer = np.array([True, False])
    seen: list[npt.NDArray[np.bool_] | None] = []

    def place(ps: list[Pod], req: object, stmt: Statement) -> None:
        seen.append(cycle.placer.only)

    cycle.placer.only = outer
    cycle.preemptor._verify(Job("default/p", [], pods, 1000, 0.0), pods, None, place, Statement(cycle.cluster),
                            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_), np.array([False, True]))
    assert seen[0] is not None and seen[0].tolist() == [False, True]
    assert cycle.placer.only is outer
