"""Volcano HyperNodes and KAI/Kueue Topology beside Koordinator: trees, requirements, gang sources.

Every case runs through the simulator, so what is tested is what ``koordpy simulate`` and the
live scheduler do with the same objects.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from koordpy.api.selectors import LabelSelector
from koordpy.api.volcano import SubGroupPolicy
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Event
from koordpy.core.dialects.volcano import membership
from koordpy.core.placement import Placer
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import node, pod, podgroup

VC = "volcano.sh/network-topology-"


def run(*objects: dict[str, Any] | list[dict[str, Any]]) -> SimulationResult:
    """Simulates, and holds the standing view to the answer a full recomputation gives every cycle."""
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    out = simulate(World.from_objects([("test", o) for o in flat]))
    full = simulate(World.from_objects([("test", o) for o in flat]), incremental=False)
    assert (out.bound, out.pending) == (full.bound, full.pending)
    return out


def hypernode(name: str, tier: int, nodes: list[str] = (), members: list[str] = (),  # type: ignore[assignment]
              tier_name: str | None = None, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"tier": tier, "members": [
        *({"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes),
        *({"type": "HyperNode", "selector": {"exactMatch": {"name": m}}} for m in members),
        *(extra or [])]}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def seed_004(cpu: str = "4") -> list[dict[str, Any]]:
    """Seed 004's example 1: s0..s3 (tier 1) of two nodes each, s4, s5 (tier 2), s6 (tier 3)."""
    nodes = [node(f"node{i}", cpu=cpu) for i in range(8)]
    hns = [hypernode(f"s{i}", 1, nodes=[f"node{2 * i}", f"node{2 * i + 1}"]) for i in range(4)]
    hns += [hypernode("s4", 2, members=["s0", "s1"], tier_name="leaf-pair"),
            hypernode("s5", 2, members=["s2", "s3"], tier_name="leaf-pair"),
            hypernode("s6", 3, members=["s4", "s5"], tier_name="spine")]
    return [*nodes, *hns]


def vc_job(name: str, size: int, mode: str = "hard", tier: int | None = None, tier_name: str | None = None,
           cpu: str = "4") -> list[dict[str, Any]]:
    ann = {f"{VC}mode": mode}
    if tier is not None:
        ann[f"{VC}highest-tier"] = str(tier)
    if tier_name is not None:
        ann[f"{VC}highest-tier-name"] = tier_name
    return [podgroup(name, size, annotations=ann), *[pod(f"{name}-{i}", cpu=cpu, group=name) for i in range(size)]]


def busy(node_name: str, cpu: str = "4") -> dict[str, Any]:
    return pod(f"busy-{node_name}", cpu=cpu, node_name=node_name, scheduler="default-scheduler")


def nodes_of(out: Any, prefix: str) -> set[str]:
    return {n for p, n in out.bound.items() if p.startswith(f"default/{prefix}")}


# -- Volcano: tiers, hard and soft ------------------------------------------------------------------


def test_hard_tier_two_binpacks_into_the_fuller_hypernode() -> None:
    out = run(seed_004(), busy("node4"), vc_job("job", 3, tier=2))
    assert nodes_of(out, "job") == {"node5", "node6", "node7"}  # s5 is fuller than s4 once placed


def test_hard_tier_one_cannot_hold_three_and_says_which_tiers_it_searched() -> None:
    out = run(seed_004(), vc_job("tight", 3, tier=1))
    assert not nodes_of(out, "tight")
    message = out.pending["default/tight-0"]
    assert "network topology (hard, highest tier 1)" in message
    assert "tier 1: 2" in message and "tier 2" not in message


def test_lowest_tier_first() -> None:
    out = run(seed_004(), vc_job("pair", 2, tier=3))
    used = nodes_of(out, "pair")
    assert used in ({"node0", "node1"}, {"node2", "node3"}, {"node4", "node5"}, {"node6", "node7"})


def test_highest_tier_name_resolves_to_its_tier() -> None:
    out = run(seed_004(), vc_job("named", 4, tier_name="leaf-pair"))
    assert nodes_of(out, "named") in ({f"node{i}" for i in range(4)}, {f"node{i}" for i in range(4, 8)})
    assert not [e for e in out.events if e.reason == "TopologyLimitDropped"]


def test_a_highest_tier_name_of_no_tier_drops_the_limit_and_says_so() -> None:
    # As Volcano does (a warning, then no tier limit): the 6-pod job spans s6, which a limit would
    # not allow if "nowhere" were a tier, and one Event on the PodGroup names the tier and the dropped
    # limit, however many times the job is tried.
    objs = [*seed_004(), *vc_job("bad", 6, tier_name="nowhere"), *vc_job("big", 4, tier=1)]
    out = run(objs)
    assert len(nodes_of(out, "bad")) == 6
    told = [e for e in out.events if e.reason == "TopologyLimitDropped"]
    assert [(e.kind, e.obj, e.type) for e in told] == [("PodGroup", "default/bad", "Warning")]
    assert "highestTierName 'nowhere' is the tierName of no HyperNode (tier names: leaf-pair, spine)" in told[0].message
    assert "scheduled with no tier limit" in told[0].message


def test_a_dropped_limit_is_told_once_while_the_job_waits() -> None:
    # 9 pods cannot fit 8 nodes: the job is tried every cycle (the standing view dropped, as after
    # any change that wakes it), the Event is written once.
    world = World.from_objects([("t", o) for o in [*seed_004(), *vc_job("bad", 9, tier_name="nowhere")]])
    state = SchedulerState()
    snap = world.snapshot(frozenset({"koordpy"}))
    events = []
    for now in (0.0, 100.0, 200.0):
        state.view = None
        result = schedule(snap, state, now)
        assert "default/bad-0" in result.waiting
        events += [d for d in result.decisions if isinstance(d, Event) and d.reason == "TopologyLimitDropped"]
    assert len(events) == 1


def test_a_sub_group_policy_tier_name_of_no_tier_drops_its_limit() -> None:
    policy = [{**PARTITIONS[0], "networkTopology": {"mode": "hard", "highestTierName": "rack"}}]
    # Four pods of one partition: within tier 1 they could not go (s0..s3 hold two each); without a
    # limit of its own the partition spans s4, inside the job's limit.
    objs = [*seed_004(), volcano_pg("train", 4, {"mode": "hard", "highestTierAllowed": 2}, policy),
            *[vc_pod(f"train-{i}", "train", 0) for i in range(4)]]
    out = run(objs)
    assert len(out.bound) == 4
    told = [e for e in out.events if e.reason == "TopologyLimitDropped"]
    assert [(e.kind, e.obj) for e in told] == [("VolcanoPodGroup", "default/train")]
    assert told[0].message.startswith("subGroupPolicy worker: highestTierName 'rack' is the tierName of no HyperNode")


def test_soft_goes_above_its_limit_rather_than_wait() -> None:
    out = run(seed_004(), vc_job("soft", 3, mode="soft", tier=1))
    used = nodes_of(out, "soft")
    assert len(used) == 3
    # ...and stays as tight as it fits: inside one tier-2 HyperNode.
    assert used <= {f"node{i}" for i in range(4)} or used <= {f"node{i}" for i in range(4, 8)}


def test_soft_uses_nodes_no_hypernode_claims_when_nothing_else_fits() -> None:
    objs = [*seed_004(), node("stray", cpu="4")]
    out = run(objs, vc_job("all", 9, mode="soft", tier=1))
    assert len(nodes_of(out, "all")) == 9 and "stray" in nodes_of(out, "all")
    out = run(objs, vc_job("hard", 9, tier=3))
    assert not nodes_of(out, "hard")


def test_virtual_root_when_no_hypernode_exists() -> None:
    out = run([node(f"n{i}", cpu="4") for i in range(3)], vc_job("job", 3, tier=1))
    # No HyperNode: the virtual root is tier 1 and holds every node.
    assert len(nodes_of(out, "job")) == 3


def test_tier_and_tier_name_together_is_an_error() -> None:
    with pytest.raises(Exception, match="highest"):
        World.from_objects([("t", o) for o in [*seed_004(), *vc_job("both", 2, tier=1, tier_name="spine")]])


def test_running_members_keep_the_job_inside_their_hypernode() -> None:
    # One member already runs on node0 (s0, under s4): with highest tier 2 the rest must join it in s4,
    # although s5 would be the binpack choice on its own.
    objs = [*seed_004(), busy("node4"), podgroup("grow", 3, annotations={f"{VC}highest-tier": "2"}),
            pod("grow-0", cpu="4", group="grow", node_name="node0"),
            pod("grow-1", cpu="4", group="grow"), pod("grow-2", cpu="4", group="grow")]
    out = run(objs)
    assert set(out.bound.values()) <= {"node1", "node2", "node3"} and len(out.bound) == 2


def test_hypernode_problems_are_reported_and_the_rest_works() -> None:
    objs = [*seed_004(),
            hypernode("loop-a", 2, members=["loop-b"]), hypernode("loop-b", 2, members=["loop-a"]),
            hypernode("dup", 1, nodes=["node0"]),  # node0 is s0's too, at the same tier
            hypernode("upside", 1, members=["s5"])]  # a tier-2 member under a tier-1
    world = World.from_objects([("t", o) for o in objs])
    hn = Cluster(world.snapshot(frozenset({"koordpy"}))).trees.hypernode_tree()
    assert any("form a cycle" in p for p in hn.problems["loop-a"])
    assert any("node node0 is claimed by HyperNodes" in p for p in hn.problems["dup"])
    assert any("not below" in p for p in hn.problems["upside"])
    assert "s6" not in hn.problems
    assert hn.node_count("s6") == 8 and hn.node_count("s4") == 4 and hn.node_count("s0") == 2
    out = run(objs, vc_job("job", 3, tier=2))
    assert len(nodes_of(out, "job")) == 3


def test_a_hypernode_without_members_is_an_empty_hypernode() -> None:
    bare = hypernode("bare", 2, tier_name="pod")
    del bare["spec"]["members"]
    objs = [*seed_004(), bare, hypernode("none", 1)]
    world = World.from_objects([("t", o) for o in objs])
    hn = Cluster(world.snapshot(frozenset({"koordpy"}))).trees.hypernode_tree()
    assert hn.node_count("bare") == 0 and hn.node_count("none") == 0 and hn.node_count("s6") == 8
    assert "bare" not in hn.problems and "none" not in hn.problems
    out = run(objs, vc_job("job", 3, tier=2))
    assert len(nodes_of(out, "job")) == 3
    sim = simulate(world)
    shown = sim.to_json()["hypernodes"]
    assert shown["bare"]["nodeCount"] == 0 and shown["none"]["nodeCount"] == 0


def test_regex_and_label_members() -> None:
    objs = [node("gpu-1", labels={"rack": "r1"}), node("gpu-2", labels={"rack": "r1"}), node("gpu-3"),
            hypernode("by-regex", 1, extra=[{"type": "Node",
                                             "selector": {"regexMatch": {"pattern": "^gpu-[12]$"}}}]),
            hypernode("by-label", 1, extra=[{"type": "Node",
                                             "selector": {"labelMatch": {"matchLabels": {"rack": "r1"}}}}])]
    world = World.from_objects([("t", o) for o in objs])
    hn = Cluster(world.snapshot(frozenset({"koordpy"}))).trees.hypernode_tree()
    assert hn.node_count("by-regex") == 2
    assert any("claimed by HyperNodes" in p for p in hn.problems["by-label"])


# -- Volcano PodGroup and sub-groups ---------------------------------------------------------------


def volcano_pg(name: str, min_member: int, topology: dict[str, Any] | None = None,
               policies: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member}
    if topology is not None:
        spec["networkTopology"] = topology
    if policies is not None:
        spec["subGroupPolicy"] = policies
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def vc_pod(name: str, group: str, partition: int | None = None, cpu: str = "4") -> dict[str, Any]:
    labels = {"volcano.sh/task-spec": "worker"}
    if partition is not None:
        labels["volcano.sh/partition-id"] = str(partition)
    return pod(name, cpu=cpu, annotations={"scheduling.k8s.io/group-name": group}, labels=labels)


PARTITIONS = [{"name": "worker", "subGroupSize": 2,
               "labelSelector": {"matchLabels": {"volcano.sh/task-spec": "worker"}},
               "matchLabelKeys": ["volcano.sh/partition-id"],
               "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]


def test_volcano_podgroup_partitions_each_inside_one_tier_one_hypernode() -> None:
    objs = [*seed_004(), volcano_pg("train", 4, {"mode": "hard", "highestTierAllowed": 2}, PARTITIONS),
            *[vc_pod(f"train-{i}", "train", i // 2) for i in range(4)]]
    out = run(objs)
    assert len(out.bound) == 4
    pairs = {frozenset({out.bound["default/train-0"], out.bound["default/train-1"]}),
             frozenset({out.bound["default/train-2"], out.bound["default/train-3"]})}
    tier1 = {frozenset({f"node{2 * i}", f"node{2 * i + 1}"}) for i in range(4)}
    assert pairs <= tier1
    # ...and the whole job inside one tier-2 HyperNode.
    assert set(out.bound.values()) in ({f"node{i}" for i in range(4)}, {f"node{i}" for i in range(4, 8)})


def test_a_partition_that_fits_no_tier_one_keeps_the_whole_job_waiting() -> None:
    objs = [*seed_004(), busy("node0"), busy("node2"), busy("node4"), busy("node6"),
            volcano_pg("train", 4, {"mode": "hard", "highestTierAllowed": 3}, PARTITIONS),
            *[vc_pod(f"train-{i}", "train", i // 2) for i in range(4)]]
    out = run(objs)
    assert not out.bound
    assert "sub-group" in out.pending["default/train-0"]


def test_min_sub_groups_lets_part_of_the_job_start() -> None:
    policy = [{**PARTITIONS[0], "minSubGroups": 1}]
    objs = [*seed_004(), busy("node0"), busy("node2"), busy("node4"),
            volcano_pg("train", 2, {"mode": "hard", "highestTierAllowed": 3}, policy),
            *[vc_pod(f"train-{i}", "train", i // 2) for i in range(4)]]
    out = run(objs)
    # Partition 0 comes first and takes s3, the only tier-1 HyperNode with two free nodes; partition
    # 1 fits no tier-1 HyperNode and waits, although the job has started.
    assert out.bound == {"default/train-0": "node6", "default/train-1": "node7"}
    assert "train/worker-1" in out.pending["default/train-2"]


def partitioned(busy_nodes: tuple[int, ...], min_sub_groups: int | None,
                job: dict[str, Any] | None) -> SimulationResult:
    """Seed 004's cluster with four partitions of two, each within tier 1."""
    policy = [{**PARTITIONS[0], **({"minSubGroups": min_sub_groups} if min_sub_groups is not None else {})}]
    return run(seed_004(), [busy(f"node{i}") for i in busy_nodes], volcano_pg("train", 2, job, policy),
               [vc_pod(f"train-{i}", "train", i // 2) for i in range(8)])


@pytest.mark.parametrize("job", [{"mode": "hard", "highestTierAllowed": 3}, None,
                                 {"mode": "soft", "highestTierAllowed": 1}],
                         ids=["hard-tier-3", "no-limit", "soft-tier-1"])
def test_sub_groups_beyond_the_minimum_are_placed_where_the_jobs_limit_allows(job: dict[str, Any] | None) -> None:
    # minSubGroups 1 is met by partition 0 alone inside the first tier-1 HyperNode; the other three do
    # not fit in it, but they go on to the other tier-1 HyperNodes, all within the job's limit (s6).
    out = partitioned((), 1, job)
    assert len(out.bound) == 8, out.pending
    for i in range(4):
        pair = {out.bound[f"default/train-{2 * i}"], out.bound[f"default/train-{2 * i + 1}"]}
        assert pair in [{f"node{2 * h}", f"node{2 * h + 1}"} for h in range(4)]


def test_sub_groups_beyond_the_minimum_stay_within_the_jobs_limit() -> None:
    # The job may span tier 2 only: partitions 0 and 1 fill s4, the others do not go to s5.
    out = partitioned((), 1, {"mode": "hard", "highestTierAllowed": 2})
    used = set(out.bound.values())
    assert len(out.bound) == 4 and (used == {f"node{i}" for i in range(4)} or used == {f"node{i}" for i in range(4, 8)})
    assert "does not fit inside one HyperNode of its tier limit within HyperNode s" in out.pending[
        next(p for p in ("default/train-4", "default/train-0") if p in out.pending)]


def test_a_sub_group_short_of_its_size_waits_whole_beyond_the_minimum_too() -> None:
    # Partition 3 has one pod of its two: it is not placed, neither inside the first candidate nor
    # where the job's limit allows once partition 0 met minSubGroups.
    policy = [{**PARTITIONS[0], "minSubGroups": 1}]
    out = run(seed_004(), volcano_pg("train", 2, {"mode": "hard", "highestTierAllowed": 3}, policy),
              [vc_pod(f"train-{i}", "train", i // 2) for i in range(7)])
    assert set(out.bound) == {f"default/train-{i}" for i in range(6)}
    assert "train/worker-3" in out.pending["default/train-6"]


@pytest.mark.parametrize("busy_nodes", [(), (0,), (3,), (5,), (0, 2), (1, 6), (0, 2, 4)], ids=str)
def test_asking_for_fewer_sub_groups_never_binds_less_than_asking_for_all(busy_nodes: tuple[int, ...]) -> None:
    job = {"mode": "hard", "highestTierAllowed": 3}
    every = partitioned(busy_nodes, None, job)
    for fewer in (1, 2, 3):
        assert len(partitioned(busy_nodes, fewer, job).bound) >= len(every.bound)


def test_no_sub_group_count_is_too_large_for_an_empty_cluster() -> None:
    # 100 sub-groups of one pod, within tier 3 (s6, 128 slots). The work bound is looked at only
    # after a try, so the first candidate is tried however many sub-groups the job has.
    policy = [{"name": "one", "subGroupSize": 1, "matchLabelKeys": ["volcano.sh/partition-id"],
               "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}]
    out = run(seed_004(cpu="64"), volcano_pg("many", 100, {"mode": "hard", "highestTierAllowed": 3}, policy),
              [vc_pod(f"many-{i}", "many", i) for i in range(100)])
    assert len(out.bound) == 100, next(iter(out.pending.values()), "")


def test_a_search_cut_short_by_its_work_bound_does_not_claim_that_nothing_fits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Three partitions of two within tier 1, the job within tier 2. s4 (node0 and node2 half used)
    # offers six slots but no third tier-1 pair, and is tried first (the fuller); s5 holds the job.
    objs = [*seed_004(cpu="8"), busy("node0"), busy("node2"),
            volcano_pg("train", 6, {"mode": "hard", "highestTierAllowed": 2}, PARTITIONS),
            *[vc_pod(f"train-{i}", "train", i // 2) for i in range(6)]]
    out = run(objs)
    assert len(out.bound) == 6 and set(out.bound.values()) <= {f"node{i}" for i in range(4, 8)}
    monkeypatch.setattr(Placer, "WORK_PER_DOMAIN", 0)  # a bound spent by the first try
    out = run(objs)
    message = out.pending["default/train-0"]
    assert not out.bound
    assert "no HyperNode" not in message
    assert "none of the first 1 candidate HyperNodes" in message
    assert "stopped at its work bound after 1 of 2 candidate HyperNodes" in message


def test_sub_group_order_follows_the_partition_number() -> None:
    # Partition 1's pods come first by name but partition 0 is placed first (Volcano's MatchIndex).
    objs = [*seed_004(), volcano_pg("order", 4, None, PARTITIONS),
            vc_pod("a-0", "order", 1), vc_pod("a-1", "order", 1), vc_pod("b-0", "order", 0), vc_pod("b-1", "order", 0)]
    out = run(objs)
    assert len(out.bound) == 4
    assert {out.bound["default/b-0"], out.bound["default/b-1"]} == {"node0", "node1"}


def test_a_pod_lacking_a_match_label_key_joins_no_sub_group_of_that_policy() -> None:
    # Volcano's membership: a pod without (or with an empty value for) one of a policy's
    # matchLabelKeys does not belong to the policy. The two unlabelled workers are the job's default
    # group (no tier-1 limit of their own), not a sub-group "worker-" that needs a tier-1 HyperNode
    # with two free nodes, which no HyperNode but s3 has and partition 0 takes.
    objs = [*seed_004(), busy("node0"), busy("node2"), busy("node4"),
            volcano_pg("train", 4, {"mode": "hard", "highestTierAllowed": 3}, PARTITIONS),
            vc_pod("train-0", "train", 0), vc_pod("train-1", "train", 0), vc_pod("train-2", "train"),
            {**vc_pod("train-3", "train"), "metadata": {**vc_pod("train-3", "train")["metadata"], "labels": {
                "volcano.sh/task-spec": "worker", "volcano.sh/partition-id": ""}}}]
    out = run(objs)
    assert {out.bound["default/train-0"], out.bound["default/train-1"]} == {"node6", "node7"}
    assert len(out.bound) == 4, out.pending


def test_sub_group_membership_tries_the_next_policy_then_the_default_group() -> None:
    by_partition = SubGroupPolicy(name="partition", label_selector=LabelSelector(match_labels={"role": "worker"}),
                                  match_label_keys=("partition",))
    by_rack = SubGroupPolicy(name="rack", match_label_keys=("rack", "row"))
    keyless = SubGroupPolicy(name="all")  # lists no keys: Volcano puts no pod in it
    policies = [keyless, by_partition, by_rack]
    assert membership({"role": "worker", "partition": "3"}, policies) == (by_partition, ["3"])
    # No partition (or an empty one): the next policy, whose keys the pod has.
    assert membership({"role": "worker", "rack": "a", "row": "1"}, policies) == (by_rack, ["a", "1"])
    assert membership({"role": "worker", "partition": "", "rack": "a", "row": "1"}, policies) == (
        by_rack, ["a", "1"])
    # One key of several missing or empty: no policy; the default group.
    assert membership({"role": "worker", "rack": "a"}, policies) is None
    assert membership({"rack": "a", "row": ""}, policies) is None


def test_volcano_podgroup_status_is_written() -> None:
    objs = [*seed_004(), volcano_pg("vj", 2, {"mode": "hard", "highestTierAllowed": 1}),
            vc_pod("vj-0", "vj"), vc_pod("vj-1", "vj")]
    out = run(objs)
    assert len(out.bound) == 2
    assert out.groups["default/vj"]["phase"] == "Running"


# -- KAI / Kueue -------------------------------------------------------------------------------------


def topology(name: str, *levels: str, api: str = "kueue.x-k8s.io/v1beta1") -> dict[str, Any]:
    return {"apiVersion": api, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


def zoned(racks: dict[str, tuple[str, int]], gpus: str = "4") -> list[dict[str, Any]]:
    out = []
    for rack, (zone, count) in racks.items():
        for i in range(count):
            out.append(node(f"n-{rack}-{i}", cpu="32", labels={"example.com/zone": zone, "example.com/rack": rack},
                            extra={"nvidia.com/gpu": gpus}))
    return out


RACKS = {"a0": ("za", 3), "a1": ("za", 1), "a2": ("za", 2), "b1": ("zb", 3)}


def gpu_pod(name: str, owner: dict[str, Any] | None = None, annotations: dict[str, str] | None = None,
            **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu="1", annotations=annotations, **kw)
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "4"
    if owner is not None:
        p["metadata"]["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                             "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                             "controller": True}]
    return p


def batch_job(name: str, parallelism: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": annotations},
            "spec": {"parallelism": parallelism, "template": {"spec": {"containers": []}}}}


def kai(topology_name: str, required: str | None = None, preferred: str | None = None) -> dict[str, str]:
    ann = {"kai.scheduler/topology": topology_name}
    if required:
        ann["kai.scheduler/topology-required-placement"] = required
    if preferred:
        ann["kai.scheduler/topology-preferred-placement"] = preferred
    return ann


def racks_of(out: Any) -> Counter[str]:
    return Counter(n.split("-")[1] for n in out.bound.values())


NET = topology("network", "example.com/zone", "example.com/rack", "kubernetes.io/hostname")


def test_required_rack_from_the_owning_job_takes_the_exact_fit() -> None:
    job = batch_job("train", 2, kai("network", required="example.com/rack"))
    out = run(zoned(RACKS), NET, job, gpu_pod("train-0", job), gpu_pod("train-1", job))
    assert racks_of(out) == Counter({"a2": 2})


def test_level_by_last_segment_and_unknown_level_lists_the_levels() -> None:
    job = batch_job("t", 3, kai("network", required="rack"))
    out = run(zoned(RACKS), NET, job, *[gpu_pod(f"t-{i}", job) for i in range(3)])
    assert len(racks_of(out)) == 1 and sum(racks_of(out).values()) == 3
    job = batch_job("u", 1, kai("network", required="row"))
    out = run(zoned(RACKS), NET, job, gpu_pod("u-0", job))
    message = out.pending["default/u-0"]
    assert "row" in message and "example.com/rack" in message and "example.com/zone" in message


def test_required_rack_that_fits_nowhere_waits() -> None:
    job = batch_job("big", 4, kai("network", required="rack"))
    out = run(zoned(RACKS), NET, job, *[gpu_pod(f"big-{i}", job) for i in range(4)])
    assert not out.bound
    assert ("desiredOfferSlot: 4, Topology network: example.com/rack=a0: 3;example.com/rack=a1: 1;"
            in out.pending["default/big-0"])


def test_implicit_group_waits_for_the_owners_parallelism() -> None:
    job = batch_job("half", 3, kai("network", required="zone"))
    out = run(zoned(RACKS), NET, job, gpu_pod("half-0", job), gpu_pod("half-1", job))
    assert not out.bound  # 2 of 3 pods exist: the group waits for the third
    assert "minMember: 3" in out.pending["default/half-0"]


def test_preferred_level_is_chosen_across_all_domains_inside_the_required() -> None:
    # Preferred rack, required zone: the smallest rack that fits among all racks (a2, 2 free), not
    # "the best zone first, then a rack in it".
    job = batch_job("p", 2, kai("network", required="zone", preferred="rack"))
    out = run(zoned({"a0": ("za", 3), "a1": ("za", 3), "b1": ("zb", 2)}), NET, job,
              gpu_pod("p-0", job), gpu_pod("p-1", job))
    assert racks_of(out) == Counter({"b1": 2})


def test_preferred_climbs_when_no_domain_of_its_level_fits() -> None:
    job = batch_job("c", 4, kai("network", preferred="rack"))
    out = run(zoned(RACKS), NET, job, *[gpu_pod(f"c-{i}", job) for i in range(4)])
    assert sum(racks_of(out).values()) == 4
    zones = {n.split("-")[1][0] for n in out.bound.values()}
    assert zones == {"a"}  # one zone holds it: the climb stops at the zone level


def test_nodes_missing_a_level_label_are_outside_the_topology() -> None:
    stray = node("stray", cpu="32", labels={"example.com/zone": "za"}, extra={"nvidia.com/gpu": "8"})
    job = batch_job("s", 2, kai("network", required="zone"))
    out = run(zoned({"a0": ("za", 1)}), stray, NET, job, gpu_pod("s-0", job), gpu_pod("s-1", job))
    assert not out.bound  # only n-a0-0 is in the topology; stray would have fit both


def test_a_node_missing_the_hostname_level_label_is_outside_the_topology() -> None:
    # Issue 17 item 6: every level counts, the hostname level too (Kueue reads only nodes that carry
    # all of a Topology's labels), though that level adds no domain of its own.
    stray = node("stray", cpu="32", labels={"example.com/zone": "za", "example.com/rack": "a0"},
                 extra={"nvidia.com/gpu": "8"})
    del stray["metadata"]["labels"]["kubernetes.io/hostname"]
    job = batch_job("h", 2, kai("network", required="zone"))
    out = run(zoned({"a0": ("za", 1)}), stray, NET, job, gpu_pod("h-0", job), gpu_pod("h-1", job))
    assert not out.bound  # only n-a0-0 is in the topology; stray, in rack a0 too, would have fit both
    # With the label it is inside the same rack and takes the job.
    stray["metadata"]["labels"]["kubernetes.io/hostname"] = "stray"
    out = run(zoned({"a0": ("za", 1)}), stray, NET, job, gpu_pod("h-0", job), gpu_pod("h-1", job))
    assert sorted(out.bound.values()) == ["stray", "stray"]


def test_hostname_only_topology_leaves_out_nodes_without_the_label() -> None:
    hosts = topology("hosts", "kubernetes.io/hostname")
    bare = node("bare", cpu="32", extra={"nvidia.com/gpu": "8"})
    del bare["metadata"]["labels"]["kubernetes.io/hostname"]
    job = batch_job("o", 1, kai("hosts", required="kubernetes.io/hostname"))
    out = run(zoned({"a0": ("za", 1)}, gpus="0"), bare, hosts, job, gpu_pod("o-0", job))
    assert not out.bound  # bare is the only node with GPUs, and it is outside "hosts"
    assert "Topology hosts" in out.pending["default/o-0"]


def _objects(*objects: dict[str, Any] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return flat


def test_a_pod_whose_owner_is_not_seen_yet_waits_for_it_then_keeps_its_constraint() -> None:
    # Issue 17 item 14: the pods arrive before their Job (watches race); placed at once they would
    # ignore the Job's required rack. They wait (saying so), and the Job, once it comes, is obeyed.
    from koordpy.core.cycle import schedule
    from koordpy.core.owners import OWNER_GRACE_SECONDS
    from koordpy.core.state import SchedulerState

    job = batch_job("train", 2, kai("network", required="rack"))
    pods = [gpu_pod("train-0", job), gpu_pod("train-1", job)]
    world = World.from_objects([("t", o) for o in _objects(zoned(RACKS), NET, job, *pods)])
    with_job = world.snapshot(frozenset({"koordpy"}))
    without = world.snapshot(frozenset({"koordpy"}))
    without.owners = {}
    state = SchedulerState()
    start = max(p.creation or 0 for p in with_job.pods)
    early = schedule(without, state, start + 1)
    assert not early.binds
    message = early.pending["default/train-0"]
    assert "waiting for its owner Job default/train to appear" in message and f"{OWNER_GRACE_SECONDS:g}s" in message
    assert early.next_deadline is not None and early.next_deadline <= start + OWNER_GRACE_SECONDS
    later = schedule(with_job, state, start + 2)
    assert {d.node for d in later.binds} == {"n-a2-0", "n-a2-1"}  # rack a2: the Job's constraint holds


def test_a_pod_whose_owner_never_comes_is_placed_after_the_grace_with_a_warning() -> None:
    job = batch_job("ghost", 2, kai("network", required="rack"))
    pods = [gpu_pod("ghost-0", job), gpu_pod("ghost-1", job)]  # the Job itself is not given
    out = run(zoned(RACKS), NET, *pods)
    assert len(out.bound) == 2
    warnings = [e for e in out.events if e.reason == "OwnerNotFound"]
    assert sorted(e.obj for e in warnings) == ["default/ghost-0", "default/ghost-1"]
    assert all(e.type == "Warning" and "owner Job default/ghost" in e.message for e in warnings)
    waited = [e for e in out.events if e.reason == "FailedScheduling" and e.obj == "default/ghost-0"]
    assert waited and "waiting for its owner Job default/ghost" in waited[0].message


def test_owners_koordpy_does_not_read_are_not_waited_for() -> None:
    p = gpu_pod("ds-0")
    p["metadata"]["ownerReferences"] = [{"apiVersion": "example.com/v1", "kind": "Trainer", "name": "t",
                                         "uid": "u1", "controller": True}]
    out = run(zoned(RACKS), NET, p)
    assert len(out.bound) == 1 and not [e for e in out.events if e.reason in ("OwnerNotFound", "FailedScheduling")]


def test_several_topologies_at_once_and_pod_annotations_win() -> None:
    by_zone = topology("zones", "example.com/zone", api="kai.scheduler/v1alpha1")
    job = batch_job("two", 2, kai("network", required="rack"))
    pods = [gpu_pod(f"two-{i}", job, annotations=kai("zones", required="example.com/zone")) for i in range(2)]
    out = run(zoned({"a0": ("za", 1), "a1": ("za", 1)}), NET, by_zone, job, *pods)
    assert len(out.bound) == 2  # racks hold one each; the pods' own Topology (zones) lets them share za


def test_unknown_topology_is_reported() -> None:
    job = batch_job("x", 1, kai("nope", required="rack"))
    out = run(zoned(RACKS), NET, job, gpu_pod("x-0", job))
    assert "Topology 'nope' not found" in out.pending["default/x-0"]


def test_kai_podgroup_spec_constraint_both_spellings() -> None:
    for field in ("topologyConstraint", "topologyConstraints"):
        pg = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
              "metadata": {"name": "kpg", "namespace": "default"},
              "spec": {"minMember": 2, field: {"topology": "network", "requiredTopologyLevel": "example.com/rack"}}}
        pods = [gpu_pod(f"k-{i}", annotations={"pod-group-name": "kpg"}) for i in range(2)]
        out = run(zoned(RACKS), NET, pg, *pods)
        assert racks_of(out) == Counter({"a2": 2}), field


def test_deployment_chain_groups_through_the_replicaset() -> None:
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default", "uid": "uid-dep",
                        "annotations": kai("network", required="rack")},
           "spec": {"replicas": 2, "template": {"spec": {"containers": []}}}}
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": "web-1", "namespace": "default", "uid": "uid-rs",
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                            "uid": "uid-dep", "controller": True}]},
          "spec": {"replicas": 2, "template": {"spec": {"containers": []}}}}
    out = run(zoned(RACKS), NET, dep, rs, gpu_pod("web-1-a", rs), gpu_pod("web-1-b", rs))
    assert racks_of(out) == Counter({"a2": 2})


def test_koordinator_behaviour_is_unchanged_beside_the_other_sources() -> None:
    # A HyperNode tree and a Topology exist; a plain PodGroup without any topology still binpacks.
    out = run(seed_004(), NET, podgroup("plain", 2), pod("plain-0", cpu="4", group="plain"),
              pod("plain-1", cpu="4", group="plain"))
    assert len(out.bound) == 2


def test_simulate_warns_about_hypernode_problems_and_reports_node_counts(tmp_path: Any, capsys: Any) -> None:
    import json

    import yaml

    from koordpy.cli.main import main

    objs = [*seed_004(), hypernode("loop-a", 4, members=["loop-b"]), hypernode("loop-b", 5, members=["loop-a"])]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert "warning: HyperNode loop-a: HyperNodes" in captured.err and "form a cycle" in captured.err
    status = json.loads(captured.out)["hypernodes"]
    assert status["s6"] == {"nodeCount": 8} and "problems" in status["loop-b"]


def test_volcano_min_resources_must_be_free_first() -> None:
    pg = volcano_pg("rich", 1)
    pg["spec"]["minResources"] = {"cpu": "64"}
    out = run(seed_004(), pg, vc_pod("rich-0", "rich"))
    assert not out.bound and "minResources not available: cpu wants 64" in out.pending["default/rich-0"]


def test_the_built_in_examples_do_what_their_comments_say() -> None:
    import pathlib

    from koordpy.cli.manifests import load_documents

    root = pathlib.Path(__file__).resolve().parents[3] / "examples"
    vc = simulate(World.from_objects(load_documents([str(root / "volcano-tiers")]).docs))
    assert {vc.bound[f"default/within-tier-2-{i}"] for i in range(3)} == {"node5", "node6", "node7"}
    assert all(f"default/within-tier-1-{i}" in vc.pending for i in range(3))
    assert {vc.bound["default/partitioned-0"], vc.bound["default/partitioned-1"]} in (
        {f"node{2 * i}", f"node{2 * i + 1}"} for i in range(4))
    kai_out = simulate(World.from_objects(load_documents([str(root / "kai-rack")]).docs))
    assert {kai_out.bound["default/train-0"], kai_out.bound["default/train-1"]} == {"n-a2-0", "n-a2-1"}
    assert len({kai_out.bound[f"default/tune-{i}"].rsplit("-", 1)[0] for i in range(3)}) == 1


def plain_owner(kind: str, name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    field = "parallelism" if kind == "Job" else "replicas"
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {field: replicas, **spec, "template": {"spec": {"containers": []}}}}


@pytest.mark.parametrize("kind", ["Job", "ReplicaSet", "StatefulSet", "Deployment"])
def test_owners_without_a_kai_topology_keep_scheduling_pod_by_pod(kind: str) -> None:
    # Koordinator behaviour is unchanged: three pods, room for two, two bind.
    owner = plain_owner(kind, "web", 3)
    pods = [pod(f"web-{i}", cpu="4") for i in range(3)]
    for p in pods:
        p["metadata"]["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": kind, "name": "web",
                                             "uid": "uid-web", "controller": True}]
    out = run([node("n0", cpu="4"), node("n1", cpu="4")], owner, *pods)
    assert len(out.bound) == 2


def test_job_minimum_is_what_it_still_runs_at_once() -> None:
    job = plain_owner("Job", "j", 5, completions=2)
    job["metadata"]["annotations"] = kai("network", required="rack")
    out = run(zoned(RACKS), NET, job, gpu_pod("j-0", job), gpu_pod("j-1", job))
    assert racks_of(out) == Counter({"a2": 2})  # min(parallelism 5, completions 2) = 2 pods


def test_stateful_set_with_a_topology_starts_with_its_first_pod() -> None:
    sts = plain_owner("StatefulSet", "db", 3)
    sts["metadata"]["annotations"] = kai("network", required="rack")
    out = run(zoned(RACKS), NET, sts, gpu_pod("db-0", sts))
    assert len(out.bound) == 1


def test_owner_named_without_uid_is_found_by_kind_and_name() -> None:
    job = batch_job("nouid", 2, kai("network", required="rack"))
    del job["metadata"]["uid"]
    pods = [gpu_pod(f"nouid-{i}", {**job, "metadata": {**job["metadata"], "uid": ""}}) for i in range(2)]
    out = run(zoned(RACKS), NET, job, *pods)
    assert racks_of(out) == Counter({"a2": 2})


def test_malformed_owner_reference_is_refused_with_its_field() -> None:
    bad = pod("bad", cpu="1")
    bad["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "name": "x", "uid": "u", "controller": True}]
    with pytest.raises(Exception, match=r"ownerReferences\[0\]\.kind"):
        World.from_objects([("t", node("n0")), ("t", bad)])


def test_same_levels_in_two_topologies_are_two_trees() -> None:
    other = topology("aaa", "example.com/zone", "example.com/rack", "kubernetes.io/hostname")
    job = batch_job("t", 4, kai("aaa", required="rack"))
    out = run(zoned(RACKS), NET, other, job, *[gpu_pod(f"t-{i}", job) for i in range(4)])
    assert "Topology aaa: example.com/rack=a0: 3" in out.pending["default/t-0"]


def test_a_volcano_job_past_its_minimum_still_keeps_its_tier() -> None:
    # minMember 1 is met by the running member on node0 (s0); the next member must stay in s0's
    # tier-1 HyperNode although s1 has more room.
    objs = [*seed_004(), volcano_pg("elastic", 1, {"mode": "hard", "highestTierAllowed": 1}),
            {**vc_pod("elastic-0", "elastic"), "spec": {**vc_pod("elastic-0", "elastic")["spec"], "nodeName": "node0"}},
            vc_pod("elastic-1", "elastic")]
    out = run(objs)
    assert out.bound == {"default/elastic-1": "node1"}


def test_a_kai_required_level_keeps_new_members_beside_running_ones() -> None:
    # p0 runs in rack a0; the group grows only inside a0 although a2 would be the binpack choice.
    job = batch_job("grow", 3, kai("network", required="rack"))
    running = gpu_pod("grow-0", job, node_name="n-a0-0")
    out = run(zoned(RACKS), NET, job, running, gpu_pod("grow-1", job), gpu_pod("grow-2", job))
    assert set(out.bound.values()) == {"n-a0-1", "n-a0-2"}


def test_min_sub_groups_counts_per_policy_and_lets_a_small_domain_take_one() -> None:
    # Only s0 has room; two partitions, minSubGroups 1: one starts inside s0 (the job's tier 1).
    policy = [{**PARTITIONS[0], "minSubGroups": 1}]
    objs = [*seed_004(), *[busy(f"node{i}") for i in range(2, 8)],
            volcano_pg("one", 2, {"mode": "hard", "highestTierAllowed": 1}, policy),
            *[vc_pod(f"one-{i}", "one", i // 2) for i in range(4)]]
    out = run(objs)
    assert set(out.bound.values()) == {"node0", "node1"}


def test_min_sub_groups_above_the_sub_groups_there_are_says_so() -> None:
    policy = [{**PARTITIONS[0], "minSubGroups": 5}]
    out = run(seed_004(), volcano_pg("many", 2, None, policy), *[vc_pod(f"many-{i}", "many", i // 2) for i in range(4)])
    assert "minSubGroups is 5 but the job has 2 sub-groups" in out.pending["default/many-0"]


def test_sub_group_size_is_enforced() -> None:
    out = run(seed_004(), volcano_pg("short", 2, None, [{**PARTITIONS[0], "subGroupSize": 4}]),
              vc_pod("short-0", "short", 0), vc_pod("short-1", "short", 0))
    assert not out.bound


def test_a_sub_group_grows_beside_its_running_members() -> None:
    # Partition 0 has a member on node0 (s0); its other member must join s0, not wander to s1.
    objs = [*seed_004(), volcano_pg("sg", 1, {"mode": "hard", "highestTierAllowed": 3}, PARTITIONS),
            {**vc_pod("sg-0", "sg", 0), "spec": {**vc_pod("sg-0", "sg", 0)["spec"], "nodeName": "node0"}},
            vc_pod("sg-1", "sg", 0)]
    out = run(objs)
    assert out.bound == {"default/sg-1": "node1"}


def test_unlike_pods_of_one_volcano_job_each_go_where_they_fit() -> None:
    # A CPU pod and two GPU pods with other node selectors, one tier-1 HyperNode holds a node of each.
    nodes = [node("cpu-0", cpu="4", labels={"pool": "cpu"}), node("gpu-0", cpu="8", labels={"pool": "gpu"}),
             node("cpu-1", cpu="4", labels={"pool": "cpu"})]
    hns = [hypernode("mixed", 1, nodes=["cpu-0", "gpu-0"]), hypernode("cpus", 1, nodes=["cpu-1"])]
    pods = [pod("m-0", cpu="1", group="m", nodeSelector={"pool": "cpu"}),
            pod("m-1", cpu="2", group="m", nodeSelector={"pool": "gpu"}),
            pod("m-2", cpu="2", group="m", nodeSelector={"pool": "gpu"})]
    for mode in ("hard", "soft"):
        out = run(nodes, hns, podgroup("m", 3, annotations={f"{VC}mode": mode, f"{VC}highest-tier": "1"}), pods)
        assert out.bound == {"default/m-0": "cpu-0", "default/m-1": "gpu-0", "default/m-2": "gpu-0"}, mode


def test_many_decoy_hypernodes_do_not_hide_the_one_that_fits() -> None:
    # 80 tier-2 HyperNodes whose offerslot (8) takes the job but whose tier-1 HyperNodes (5 + 3
    # nodes) cannot hold two partitions of 4, tried first by name; then one that can (4 + 4).
    nodes, hns = [], []
    for i in range(81):
        sizes = (5, 3) if i < 80 else (4, 4)
        name = f"decoy-{i:02d}" if i < 80 else "good"
        for half, size in enumerate(sizes):
            names = [f"{name}-{half}-{j}" for j in range(size)]
            nodes += [node(n, cpu="1") for n in names]
            hns.append(hypernode(f"{name}-{half}", 1, nodes=names))
        hns.append(hypernode(name, 2, members=[f"{name}-0", f"{name}-1"]))
    policy = [{**PARTITIONS[0], "subGroupSize": 4}]
    objs = [*nodes, *hns, volcano_pg("d", 8, {"mode": "hard", "highestTierAllowed": 2}, policy),
            *[vc_pod(f"d-{i}", "d", i // 4, cpu="1") for i in range(8)]]
    out = run(objs)
    assert len(out.bound) == 8 and all(n.startswith("good-") for n in out.bound.values())


def test_a_node_claimed_by_hypernodes_that_do_not_nest_is_reported() -> None:
    objs = [*seed_004(), hypernode("side", 2, nodes=["node3"])]  # node3 is s1's, and s1 is under s4, not side
    world = World.from_objects([("t", o) for o in objs])
    hn = Cluster(world.snapshot(frozenset({"koordpy"}))).trees.hypernode_tree()
    assert any("node node3 is claimed by s1 (tier 1) and by side (tier 2)" in p for p in hn.problems["side"])
    assert hn.node_count("s1") == 2 and hn.node_count("side") == 0


def test_a_replacement_rejoins_its_running_peers_at_the_preferred_level() -> None:
    # Three members run in rack a0, which has three more free nodes; rack a1 has exactly one. The
    # tightest fit for one pod is a1, but preferred means the whole job in one rack when it can be:
    # the replacement goes to a0, beside its peers.
    job = batch_job("r", 4, kai("network", preferred="rack"))
    running = [gpu_pod(f"r-{i}", job, node_name=f"n-a0-{i}") for i in range(3)]
    out = run(zoned({"a0": ("za", 6), "a1": ("za", 1)}), NET, job, *running, gpu_pod("r-3", job))
    assert out.bound["default/r-3"].startswith("n-a0-")


def test_a_full_rack_of_peers_keeps_the_replacement_in_their_zone() -> None:
    # Rack a0 is full around the running members: the next smallest domain holding them is zone za,
    # so the replacement goes to rack a1 there, not to the tighter rack b1 of the other zone.
    job = batch_job("f", 4, kai("network", preferred="rack"))
    running = [gpu_pod(f"f-{i}", job, node_name=f"n-a0-{i}") for i in range(3)]
    out = run(zoned({"a0": ("za", 3), "a1": ("za", 2), "b1": ("zb", 1)}), NET, job, *running, gpu_pod("f-3", job))
    assert out.bound["default/f-3"].startswith("n-a1-")


def test_peers_spread_over_the_cluster_leave_the_preferred_search_as_it_is() -> None:
    # The running members span both zones, so no domain below the cluster holds them: the pending
    # pods get the ordinary preferred-level search (the smallest rack that takes both, b1), not a
    # split from the cluster down.
    job = batch_job("r", 4, kai("network", preferred="rack"))
    running = [gpu_pod("r-0", job, node_name="n-a0-0"), gpu_pod("r-1", job, node_name="n-b0-0")]
    layout = {"a0": ("za", 2), "a1": ("za", 1), "a2": ("za", 1), "b0": ("zb", 1), "b1": ("zb", 2), "b2": ("zb", 5)}
    out = run(zoned(layout), NET, job, *running, gpu_pod("r-2", job), gpu_pod("r-3", job))
    assert racks_of(out) == Counter({"b1": 2})


def test_inside_the_peers_zone_a_rack_that_takes_all_beats_a_split() -> None:
    # Three levels above the nodes (zone, block, rack); the running member is in zone za, block k0,
    # whose racks are full. In za, block k1's racks hold 1 and 1 free nodes and block k2 has one rack
    # of 2: the pending pair goes to that rack, not split over k1's racks.
    topo = topology("deep", "example.com/zone", "example.com/block", "example.com/rack", "kubernetes.io/hostname")

    def at(name: str, zone: str, block: str, rack: str) -> dict[str, Any]:
        return node(name, cpu="32", labels={"example.com/zone": zone, "example.com/block": block,
                                            "example.com/rack": rack}, extra={"nvidia.com/gpu": "4"})

    nodes = [at("n-r0-0", "za", "k0", "r0"), at("n-r1-0", "za", "k1", "r1"), at("n-r2-0", "za", "k1", "r2"),
             at("n-r3-0", "za", "k2", "r3"), at("n-r3-1", "za", "k2", "r3"), at("n-r4-0", "zb", "k3", "r4"),
             at("n-r4-1", "zb", "k3", "r4")]
    job = batch_job("d", 3, kai("deep", preferred="rack"))
    out = run(nodes, topo, job, gpu_pod("d-0", job, node_name="n-r0-0"), gpu_pod("d-1", job), gpu_pod("d-2", job))
    assert racks_of(out) == Counter({"r3": 2})
