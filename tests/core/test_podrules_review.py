"""Adversarial review of the rules between pods (issue 18): each test states a kube-scheduler v1.37
rule that koordpy breaks today. Written by a reviewer; each fails on main at the time of writing,
except the two named test_control_... / test_a_plain_spread_gang_fits_the_same_cluster, which pass and
show that only the path under test is at fault."""

from __future__ import annotations

from typing import Any

from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, run, spine_block_nodes
from tests.core.test_podrules import HOST, ZONE, affine, running, spread, term, zoned


def test_gather_applies_the_rules_of_every_member_not_one_per_node_constraints() -> None:
    # A gang of two under a Koordinator gather: a-0 has required anti-affinity against app=x (running
    # on node-0), b-1 states no rule. Both share request and node constraints, so _gather keeps one
    # pod per constraints_key (b-1) and applies only ITS rules to the offerslots: a-0's anti-affinity
    # is dropped, and the kernel binpacks both onto node-0, beside the pod a-0 repels.
    nodes = spine_block_nodes({"s0": {"b0": [0, 1]}})
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    x = running("x", "node-0", {"app": "x"})
    filler = running("filler", "node-1", {}, cpu="8")
    a0 = pod("a-0", cpu="1", group="g", affinity=affine(term({"app": "x"}), anti=True))
    b1 = pod("b-1", cpu="1", group="g")
    out = run(SPINE_BLOCK_CNT, *nodes, x, filler, podgroup("g", 2, gather=prefer), a0, b1)
    assert out.bound.get("default/a-0") != "node-0", out.bound


def two_zone_blocks(cpu_z2: str = "8") -> list[dict[str, Any]]:
    """One spine, block b0 = node-0 in zone z1, block b1 = node-2 in zone z2."""
    nodes = spine_block_nodes({"s0": {"b0": [0], "b1": [2]}})
    nodes[0]["metadata"]["labels"][ZONE] = "z1"
    nodes[1]["metadata"]["labels"][ZONE] = "z2"
    nodes[1]["status"]["allocatable"]["cpu"] = cpu_z2
    return [SPINE_BLOCK_CNT, *nodes]


def test_a_gathered_spread_gang_is_not_refused_on_the_first_members_mask() -> None:
    # z1 already holds 2 app=train pods, z2 none; maxSkew 1. Placed one by one as kube-scheduler
    # would, 4 members fit: z2, z2, then z1 (3 vs 2... skew 1), then z2 - 3 on node-2 (room 3) and 1
    # on node-0. koordpy prices the gang's offerslots with the FIRST member's spread mask (z1 is
    # skewed for it), sees 3 slots < 4, and since the job has a topology requirement it returns the
    # kernel's failure without ever trying the members one by one: a feasible gang waits forever.
    cluster = two_zone_blocks(cpu_z2="3")
    old = [running(f"old-{i}", "node-0", {"app": "train"}) for i in range(2)]
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    members = [pod(f"w-{i}", cpu="1", group="g", labels={"app": "train"},
                   topologySpreadConstraints=[spread({"app": "train"})]) for i in range(4)]
    out = run(*cluster, *old, podgroup("g", 4, gather=prefer), *members)
    assert len(out.bound) == 4, out.pending


def test_a_plain_spread_gang_fits_the_same_cluster() -> None:
    # Control for the test above: without a topology requirement the same gang binds (the binpack
    # failure falls through to the one-by-one placement), so only the gather path refuses it.
    cluster = two_zone_blocks(cpu_z2="3")
    old = [running(f"old-{i}", "node-0", {"app": "train"}) for i in range(2)]
    members = [pod(f"w-{i}", cpu="1", group="g", labels={"app": "train"},
                   topologySpreadConstraints=[spread({"app": "train"})]) for i in range(4)]
    out = run(*cluster, *old, podgroup("g", 4), *members)
    assert len(out.bound) == 4, out.pending


def test_self_anti_affinity_caps_only_nodes_that_carry_the_topology_key() -> None:
    # kube-scheduler: anti-affinity on a key applies only on nodes labelled with it (a node without the
    # key neither repels nor is repelled). The gang's self anti-affinity is on a per-node key some
    # nodes lack; koordpy's one-per-node cap is applied to every node, so two members that could share
    # the unlabelled node "plain" (the only node with room) are refused.
    slot = "example.com/slot"
    full = node("s1", labels={slot: "1"})
    plain = node("plain")
    members = [pod(f"w-{i}", cpu="1", group="g", labels={"app": "train"},
                   affinity=affine(term({"app": "train"}, slot), anti=True)) for i in range(2)]
    out = run(full, plain, running("filler", "s1", {}, cpu="8"), podgroup("g", 2), *members)
    assert sorted(out.bound.values()) == ["plain", "plain"], out.pending


def test_a_spread_constraint_with_an_empty_selector_counts_no_pod() -> None:
    # kube-scheduler's countPodsMatchSelector returns 0 for an empty selector (labelSelector: {}), while
    # the pod still self-matches: skew = 0 + 1 - 0 <= maxSkew on every node, so the constraint never
    # filters. koordpy's empty PodSelector matches every pod of the namespace, so z1 (two pods) looks
    # skewed and the pod, with no room in z2, is refused.
    nodes = [zoned("a", "z1"), zoned("c", "z2", cpu="1")]
    busy = running("busy", "c", {}, cpu="1")
    old = [running(f"old-{i}", "a", {"app": "web"}) for i in range(2)]
    c = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
    out = run(*nodes, busy, *old, pod("p", cpu="1", labels={"app": "web"}, topologySpreadConstraints=[c]))
    assert out.bound.get("default/p") == "a", out.pending


def test_a_pod_nominated_elsewhere_does_not_satisfy_required_affinity() -> None:
    # kube-scheduler runs the filters twice, with and without the nominated pods, and a node must pass
    # both (RunFilterPluginsWithNominatedPods): a required affinity met only by a pod that is merely
    # nominated (not running, maybe never running there) fails. koordpy counts a nominated pod as
    # present, so p is bound next to a pod that is not there.
    db = pod("db", cpu="1", labels={"app": "db"}, scheduler="default-scheduler")
    db["status"] = {"nominatedNodeName": "a"}
    out = run(node("a"), node("b"), db, pod("p", cpu="1", affinity=affine(term({"app": "db"}))))
    assert "default/p" not in out.bound, out.bound


def _indexed_gang(n: int, index_label: bool) -> list[Any]:
    from koordpy.api.objects import Pod

    out = []
    for i in range(n):
        labels = {"app": "train", **({"batch.kubernetes.io/job-completion-index": str(i)} if index_label else {})}
        out.append(Pod.from_raw(pod(f"w-{i}", cpu="1", labels=labels,
                                    affinity=affine(term({"app": "train"}), anti=True))))
    return out


def test_interplay_of_a_gang_with_an_index_label_per_member_is_not_quadratic(monkeypatch: Any) -> None:
    # Indexed Jobs, JobSets, Kubeflow and StatefulSets give each member a label of its own (its index).
    # interplay() groups members by _member_view, which keeps every label, so such a gang of n members
    # is n kinds and n*(n+1)/2 pairs of Python term matching: ~1.8 s for 1,000 members, ~16 s for
    # 3,000, paid on every place_job (each step of the largest-prefix search, each preemption verify
    # and refine). rules_key already keeps only the labels some rule reads; interplay should too.
    from koordpy.api.objects import Node
    from koordpy.core.podrules import PodRules, Presence

    calls = {"n": 0}
    real = Presence.term_matches

    def counting(self: Presence, t: Any, p: Any) -> bool:
        calls["n"] += 1
        return real(self, t, p)

    monkeypatch.setattr(Presence, "term_matches", counting)
    rules = PodRules(Presence([Node(name="a")], {}))
    rules.interplay(_indexed_gang(300, index_label=False))
    plain = calls["n"]
    calls["n"] = 0
    rules.interplay(_indexed_gang(300, index_label=True))
    assert calls["n"] <= 10 * max(plain, 1), (plain, calls["n"])


def test_a_nonstrict_reservation_does_not_leave_the_members_nomination_counted_too() -> None:
    # A NonStrict gang whose members are nominated on node a, where the victim of their earlier
    # preemption is still terminating. w-0 fits on b now, w-1 does not; preemption answers "waiting"
    # (a victim still terminates on a nominated node), so Nominations.drop is not called and the
    # discarded Statement puts w-0's nomination back on a. The NonStrict branch then assumes w-0 on b
    # again and commits: adopt() records (b) as w-0's only count while a still holds its usage and its
    # presence. From then on a phantom app=train pod sits on a for anti-affinity and spread (and 1 cpu
    # of a is lost) until the arrays are rebuilt.
    import numpy as np

    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World
    from tests.builders import priority_class

    nonstrict = {"gang.scheduling.koordinator.sh/mode": "NonStrict"}
    victim = running("v", "a", {"app": "train"}, cpu="2", priority_class="low")
    victim["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    victim["spec"]["terminationGracePeriodSeconds"] = 1000
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                       "reason": "PreemptionByScheduler"}]
    members = []
    for i in range(2):
        m = pod(f"w-{i}", cpu="1", group="g", labels={"app": "train"}, priority_class="high")
        m["status"] = {"nominatedNodeName": "a"}
        members.append(m)
    world = World.from_objects([("t", o) for o in (
        priority_class("low", 1), priority_class("high", 100), node("a", cpu="2"), node("b", cpu="1"), victim,
        podgroup("g", 2, annotations=nonstrict), *members)])
    state = SchedulerState()
    schedule(world.snapshot(frozenset({"koordpy"})), state, world.now)
    assert state.view is not None and state.view.cluster is not None
    cluster = state.view.cluster
    where = {k: dict(c) for k, c in cluster.presence._at.items() if k.startswith("default/w-")}
    counted = {k: {e[0]: 1} for k, e in cluster.counted.items() if k.startswith("default/w-")}
    assert where == counted, (where, counted)
    used = np.zeros_like(cluster.used)
    for _, (n, vec) in cluster.counted.items():
        used[n] += vec
    assert np.array_equal(used, cluster.used)


def test_moves_do_not_pay_for_every_tracker_ever_made(monkeypatch: Any) -> None:
    # Trackers live as long as the Cluster (across cycles) and are dropped only all at once past
    # MAX_TRACKERS = 512; every move of every pod (rules or not) walks all of them with a Python
    # Match call. Deployments spread with matchLabelKeys: [pod-template-hash] (the documented way)
    # make a new selector per rollout, so a long-running scheduler sits near 512 trackers: measured
    # here, one assume + rollback of a 3,000-pod gang then costs ~7 s (0.01 s with no trackers), and
    # place_job repeats it per prefix tried and per preemption verify.
    import numpy as np

    from koordpy.api.objects import Node, Pod, PodSelector
    from koordpy.api.selectors import SelectorRequirement
    from koordpy.core.podrules import Match, Presence

    nodes = [Node(name=f"n{i}") for i in range(100)]
    objs = {}
    for i in range(1000):
        p = Pod(namespace="default", name=f"w-{i}", labels={"app": "train"})
        objs[p.key] = p
    presence = Presence(nodes, objs)
    for j in range(300):  # selectors of rollouts long gone
        sel = PodSelector(requirements=(SelectorRequirement(key="pod-template-hash", operator="In",
                                                            values=(f"h{j}",)),))
        presence.tracker(Match(frozenset({"default"}), (sel,), live=True))
    calls = {"n": 0}
    real = Match.__call__

    def counting(self: Match, pod: Pod) -> bool:
        calls["n"] += 1
        return real(self, pod)

    monkeypatch.setattr(Match, "__call__", counting)
    keys = list(objs)
    presence.move_many(keys, np.arange(1000, dtype=np.int64) % 100, 1)
    # 300,000 today: every tracker asked about every pod moved.
    assert calls["n"] <= 10 * len(keys), calls["n"]


def test_affinity_terms_namespaces_intersect_even_when_one_term_selects_all() -> None:
    # A pod counts for required affinity only if it matches ALL terms, namespaces included
    # (podMatchesAllAffinityTerms). Term 1 selects every namespace (namespaceSelector: {}), term 2 only
    # the pod's own. _affinity builds the tracker's namespaces as None ("any") as soon as one term says
    # "any", so a pod in another namespace that matches both selectors satisfies the affinity.
    other = running("o", "a", {"app": "x", "tier": "y"})
    other["metadata"]["namespace"] = "other"
    incoming = pod("p", cpu="1", affinity=affine(term({"app": "x"}, namespaceSelector={}), term({"tier": "y"})))
    out = run(node("a"), node("b"), other, incoming)
    assert "default/p" not in out.bound, out.bound
    assert "affinity rules" in out.pending["default/p"]


def test_a_running_pod_relabelled_to_match_wakes_a_pod_its_affinity_waits_for() -> None:
    # kube-scheduler requeues a pod that InterPodAffinity rejected when an assigned pod's labels change
    # (its queueing hint for Pod/UpdatePodLabel). koordpy parks the pod waking on "moves" only, and a
    # label change is no move (Cluster.recount replaces the object in Presence, adopt() never runs),
    # so the pod stays parked for FLUSH_SECONDS although the node it needs is there now.
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    names = frozenset({"koordpy"})
    world = World.from_objects([("t", o) for o in (
        node("a"), node("b"), running("x", "a", {"app": "web"}),
        pod("p", cpu="1", affinity=affine(term({"app": "db"}))))])
    state = SchedulerState()
    assert schedule(world.snapshot(names), state, 0.0).binds == []
    world.pods["default/x"] = world.pods["default/x"].model_copy(update={"labels": {"app": "db"}})
    later = schedule(world.snapshot(names), state, 30.0)  # past any backoff, long before the flush
    assert [(b.pod, b.node) for b in later.binds] == [("default/p", "a")]


def test_control_a_new_matching_pod_does_wake_it() -> None:
    # Control for the test above: the same wait ends at once when the matching pod is a new one (a move).
    from koordpy.api.objects import Pod
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    names = frozenset({"koordpy"})
    world = World.from_objects([("t", o) for o in (
        node("a"), node("b"), running("x", "a", {"app": "web"}),
        pod("p", cpu="1", affinity=affine(term({"app": "db"}))))])
    state = SchedulerState()
    assert schedule(world.snapshot(names), state, 0.0).binds == []
    world.pods["default/y"] = Pod.from_raw(running("y", "a", {"app": "db"}))
    later = schedule(world.snapshot(names), state, 30.0)
    assert [(b.pod, b.node) for b in later.binds] == [("default/p", "a")]


def test_a_must_gather_gang_refused_by_its_anti_affinity_cap_says_so() -> None:
    # Issue 18: "a job's MustGather / required level and its spread or anti-affinity are satisfied
    # together, or the job waits with a message naming both" (docs/design.md says the same). Three
    # members with self anti-affinity per host, MustGather on blocks of two nodes: the cap of one per
    # node makes each block offer 2 < 3, and the message only quotes the offerslots; the anti-affinity
    # that caps them is named nowhere.
    must = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    anti = affine(term({"app": "train"}), anti=True)
    members = [pod(f"w-{i}", cpu="1", group="g", labels={"app": "train"}, affinity=anti) for i in range(3)]
    out = run(SPINE_BLOCK_CNT, *spine_block_nodes({"s0": {"b0": [0, 1], "b1": [2, 3]}}),
              podgroup("g", 3, gather=must), *members)
    assert out.bound == {}
    assert "anti-affinity" in out.pending["default/w-0"], out.pending["default/w-0"]


def _attempts_after_an_unrelated_bind(holder_labels: dict[str, str], holder_affinity: Any) -> int:
    from koordpy.api.objects import Pod
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    names = frozenset({"koordpy"})
    holder = running("h", "b", holder_labels, affinity=holder_affinity) if holder_affinity else \
        running("h", "b", holder_labels)
    world = World.from_objects([("t", o) for o in (
        node("a", cpu="2"), node("b", cpu="8"), running("full", "a", {}, cpu="2"), holder,
        pod("big", cpu="4", nodeSelector={HOST: "a"}))])
    state = SchedulerState()
    schedule(world.snapshot(names), state, 0.0)
    for t in range(1, 6):  # pods start on b, one a cycle: room on a never appears
        world.pods[f"default/s{t}"] = Pod.from_raw(running(f"s{t}", "b", {"app": "web"}, cpu="100m"))
        schedule(world.snapshot(names), state, 30.0 * t)
    assert state.view is not None
    parked = next(iter(state.view.queue.parked.values()))
    return parked.attempts


def test_one_anti_affinity_pod_anywhere_does_not_wake_every_parked_pod_on_every_move() -> None:
    # A pod pinned to node a waits for cpu there (no rule between pods of its own). View.park wakes a
    # job on any move when filters.rules.applies(p), which is true for EVERY pod as soon as one pod
    # with required anti-affinity runs anywhere (Presence.holding > 0), even one that cannot match it.
    # Every unrelated start or end then re-tries every parked job of the cluster (after backoff), the
    # herd kube-scheduler's queueing hints avoid. Without the holder the pod stays parked.
    quiet = _attempts_after_an_unrelated_bind({"app": "dns"}, None)
    noisy = _attempts_after_an_unrelated_bind({"app": "dns"}, affine(term({"app": "dns"}), anti=True))
    assert noisy == quiet, (quiet, noisy)


def test_a_gangs_pods_share_their_rules_and_interplay_compares_them_by_identity(monkeypatch: Any) -> None:
    # Hashing and comparing every member's rule tuples by value was a fifth of the core's time on
    # GangPreemptionAffinity (100 members, interplay asked on each placement of the job): parsing keeps
    # one tuple of each for the gang, and interplay keys its kinds by their identity.
    from dataclasses import replace

    from koordpy.api.objects import Node
    from koordpy.core.podrules import PodRules, Presence

    gang = _indexed_gang(50, index_label=False)
    assert all(p.pod_anti_affinity is gang[0].pod_anti_affinity for p in gang)
    monkeypatch.setattr(type(gang[0].pod_anti_affinity[0]), "__eq__",
                        lambda self, other: (_ for _ in ()).throw(AssertionError("compared by value")))
    rules = PodRules(Presence([Node(name="a", labels={"kubernetes.io/hostname": "a"})], {}))
    shared = rules.interplay(gang)
    monkeypatch.undo()
    # Equal rules held apart (pods not read by the parser) answer alike, as more kinds.
    apart = [replace(p, pod_anti_affinity=tuple(replace(t) for t in p.pod_anti_affinity)) for p in gang]
    again = rules.interplay(apart)
    assert (again.sequential, again.cap_ports, again.cap_keys) == (shared.sequential, shared.cap_ports, shared.cap_keys)
    assert again.cap_on is not None and shared.cap_on is not None and (again.cap_on == shared.cap_on).all()


def test_two_members_that_do_not_repel_on_a_node_may_share_it() -> None:
    # (From a review.) a1 and a2 repel each other on ka and b1 on kb; b1 repels b on ka. Node n has
    # kb only, so a1 and a2 may share it; m has both. interplay capped every node carrying any pair's
    # key at one member and placed the gang by that cap alone: it waited, "at most one member per node".
    from tests.builders import node, podgroup, priority_class

    def anti(*terms: tuple[str, str]) -> dict[str, Any]:
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"role": role}}, "topologyKey": key} for role, key in terms]}}

    b = pod("b1", cpu="2", group="g", index=0, priority_class="high", labels={"role": "b"})
    b["spec"]["affinity"] = anti(("b", "ka"))
    members = [b]
    for i in (1, 2):
        a = pod(f"a{i}", cpu="2", group="g", index=i, priority_class="high", labels={"role": "a"})
        a["spec"]["affinity"] = anti(("a", "ka"), ("b", "kb"))
        members.append(a)
    out = run(node("n", cpu="4", labels={"kb": "n"}), node("m", cpu="4", labels={"ka": "m", "kb": "m"}),
              priority_class("high", 1000), podgroup("g", 3), *members)
    assert out.bound == {"default/a1": "n", "default/a2": "n", "default/b1": "m"}
