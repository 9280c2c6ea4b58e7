"""Issue 33, item 2: a gang whose nodes fail gets its replacements together, inside the domain of the
members it has left. Kueue's TAS node replacement is the reference (scheduler_tas_test's "required
rack; fit", "required rack; no fit", "preferred; fit in different rack", "second pass replacement
must not take a domain claimed by another workload in the same cycle", tas_cache_test's "node
replacement skipped for single-Pod-owned workload", tas_flavor_snapshot_test's stale domain),
paraphrased, with koordpy's additions: several failed nodes at once, and preemption inside the domain.

Every case runs in each dialect that can say where a gang must stay: Koordinator's MustGather
(PreferGather), Volcano's hard (soft) tier, KAI/Kueue's required (preferred) level, and the
upstream PodGroup's topology key.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.objects import Taint, Toleration
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.explain import explain_pod
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.view import View
from koordpy.sim.simulator import DEFAULT_EPOCH, SimulationResult, World, simulate
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, priority_class

SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
RACK = "example.com/rack"
TAINTED_AT = "2025-12-31T23:00:00Z"  # before the simulation's epoch: the taint is an hour old
DIALECTS = ["koordinator", "volcano", "kai", "upstream"]
PREFERRING = ["koordinator", "volcano", "kai"]  # the upstream PodGroup's topology key is required only


def racks(**sizes: int) -> list[dict[str, Any]]:
    """Racks of 8-CPU nodes ``<rack>-<i>`` in one spine, labelled for every dialect, and the Volcano
    HyperNodes and KAI/Kueue Topology that describe them."""
    nodes = [node(f"{r}-{i}", cpu="8", labels={SPINE: "s0", BLOCK: r, RACK: r, "example.com/zone": "z0"})
             for r, n in sizes.items() for i in range(n)]
    hns = [{"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": r},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": f"{r}-{i}"}}}
                                            for i in range(n)]}} for r, n in sizes.items()]
    hns.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "s0"},
                "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"exactMatch": {"name": r}}}
                                                for r in sizes]}})
    topo = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "network"},
            "spec": {"levels": [{"nodeLabel": "example.com/zone"}, {"nodeLabel": RACK},
                                {"nodeLabel": "kubernetes.io/hostname"}]}}
    return [*nodes, *hns, topo, SPINE_BLOCK_CNT]


def failed(objects: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    """The nodes ``names`` as the node lifecycle controller leaves an unreachable node: NotReady and
    tainted NoExecute ``unreachable`` (an hour ago)."""
    for o in objects:
        if o["kind"] == "Node" and o["metadata"]["name"] in names:
            o["spec"] = {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                                     "timeAdded": TAINTED_AT}]}
            o["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    return objects


class Gang:
    """A gang of ``minimum`` in one dialect, required (or preferred) to stay in one rack."""

    def __init__(self, dialect: str, name: str = "job", minimum: int = 4, required: bool = True,
                 priority: str | None = None) -> None:
        self.dialect, self.name, self.minimum, self.required, self.priority = dialect, name, minimum, required, priority

    def objects(self) -> list[dict[str, Any]]:
        """What declares the gang and its rule."""
        name, size = self.name, self.minimum
        match self.dialect:
            case "koordinator":
                strategy = "MustGather" if self.required else "PreferGather"
                return [podgroup(name, size, gather=[{"layer": "BlockLayer", "strategy": strategy}])]
            case "volcano":
                mode = "hard" if self.required else "soft"
                return [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"name": name, "namespace": "default"},
                         "spec": {"minMember": size, "networkTopology": {"mode": mode, "highestTierAllowed": 1}}}]
            case "kai":
                level = "required" if self.required else "preferred"
                return [{"apiVersion": "batch/v1", "kind": "Job",
                         "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "annotations": {
                             "kai.scheduler/topology": "network", f"kai.scheduler/topology-{level}-placement": RACK}},
                         "spec": {"parallelism": size, "template": {"spec": {"containers": []}}}}]
            case "upstream":
                spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": size}},
                                        "schedulingConstraints": {"topology": [{"key": RACK}]}}
                if self.priority:  # the group's priority is its pods' (kube-scheduler refuses a mismatch)
                    spec["priorityClassName"] = self.priority
                return [{"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                         "metadata": {"name": name, "namespace": "default"}, "spec": spec}]
        raise AssertionError(self.dialect)

    def member(self, i: int, node_name: str | None = None) -> dict[str, Any]:
        name = f"{self.name}-{i}"
        extra: dict[str, Any] = {"priority_class": self.priority} if self.priority else {}
        match self.dialect:
            case "koordinator":
                return pod(name, cpu="8", group=self.name, index=i, node_name=node_name, **extra)
            case "volcano":
                return pod(name, cpu="8", annotations={"scheduling.k8s.io/group-name": self.name},
                           node_name=node_name, **extra)
            case "kai":
                p = pod(name, cpu="8", node_name=node_name, **extra)
                p["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": self.name,
                                                     "uid": f"uid-{self.name}", "controller": True}]
                return p
            case "upstream":
                p = pod(name, cpu="8", node_name=node_name, **extra)
                p["spec"]["schedulingGroup"] = {"podGroupName": self.name}
                return p
        raise AssertionError(self.dialect)

    def running(self, nodes: list[str]) -> list[dict[str, Any]]:
        return [self.member(i, n) for i, n in enumerate(nodes)]

    def replacements(self, first: int, count: int) -> list[dict[str, Any]]:
        return [self.member(i) for i in range(first, first + count)]


def run(*objects: dict[str, Any] | list[dict[str, Any]]) -> SimulationResult:
    """Simulates, and holds the standing view to what a full recomputation gives every cycle. A gang
    left below its minimum is stale: here it is only reported (a negative grace), since these cases
    are about where its replacements go, not about its eviction once its grace ends
    (tests/sim/test_sim_stale.py)."""
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    out = simulate(World.from_objects([("test", o) for o in flat]), stale_grace=-1)
    full = simulate(World.from_objects([("test", o) for o in flat]), incremental=False, stale_grace=-1)
    assert (out.bound, out.pending) == (full.bound, full.pending)
    return out


def placed(out: SimulationResult, gang: Gang) -> dict[str, str]:
    return {p: n for p, n in out.bound.items() if p.startswith(f"default/{gang.name}-")}


def occupancy(out: SimulationResult, objects: list[dict[str, Any]]) -> dict[str, int]:
    """Pods on each node once the simulation is over, those it bound and those that ran."""
    on: dict[str, int] = {}
    for o in objects:
        if o["kind"] == "Pod" and o["spec"].get("nodeName"):
            on[o["spec"]["nodeName"]] = on.get(o["spec"]["nodeName"], 0) + 1
    for n in out.bound.values():
        on[n] = on.get(n, 0) + 1
    return on


# -- required: the replacements stay in the rack of the members left ---------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_failed_nodes_get_their_replacements_inside_the_rack(dialect: str) -> None:
    # Kueue's "required rack; fit", with two nodes failed at once: rack rb has the two free nodes the
    # replacements need, rack ra more room (and the first names, which binpacking takes among equals);
    # both go to rb, together.
    gang = Gang(dialect)
    objects = [*failed(racks(ra=4, rb=6), "rb-0", "rb-1"), *gang.objects(),
               *gang.running(["rb-0", "rb-1", "rb-2", "rb-3"]), *gang.replacements(4, 2)]
    out = run(objects)
    assert sorted(placed(out, gang).values()) == ["rb-4", "rb-5"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_two_replacements_never_share_the_room_of_one(dialect: str) -> None:
    # Kueue's "required rack; no fit", for two failed nodes: rack ra has room for one replacement only.
    # Neither binds (not one in ra and the other left to go alone), and the pods, and an Event on the
    # gang, say that the gang cannot take its replacements in ra.
    gang = Gang(dialect)
    objects = [*failed(racks(ra=5, rb=4), "ra-0", "ra-1"), *gang.objects(),
               *gang.running(["ra-0", "ra-1", "ra-2", "ra-3"]), *gang.replacements(4, 2)]
    out = run(objects)
    assert placed(out, gang) == {}
    message = out.pending["default/job-4"]
    assert message == out.pending["default/job-5"]
    assert "lost members and cannot take the 2 replacement(s) it needs together inside " in message
    assert message.split("inside ")[1].split(",")[0] in {"ra", f"{RACK}=ra", "BlockLayer/ra"}
    told = [e for e in out.events if e.reason == "ReplacementsDoNotFit"]
    assert len(told) == 1 and told[0].message == message


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_rack_that_failed_whole_anchors_nothing(dialect: str) -> None:
    # Kueue's stale domain: every node of rack ra failed, and the members there with it. They must not
    # keep the gang in the dead rack: the replacements go to rb.
    gang = Gang(dialect, minimum=2)
    objects = [*failed(racks(ra=3, rb=2), "ra-0", "ra-1", "ra-2"), *gang.objects(),
               *gang.running(["ra-0", "ra-1"]), *gang.replacements(2, 2)]
    out = run(objects)
    assert sorted(placed(out, gang).values()) == ["rb-0", "rb-1"]


@pytest.mark.parametrize("dialect", PREFERRING)
def test_preferred_replacements_may_go_to_another_rack(dialect: str) -> None:
    # Kueue's "preferred; fit in different rack": ra has room for one, the gang prefers its rack but
    # need not stay there: both replacements bind, together, wherever they fit.
    gang = Gang(dialect, required=False)
    objects = [*failed(racks(ra=5, rb=2), "ra-0", "ra-1"), *gang.objects(),
               *gang.running(["ra-0", "ra-1", "ra-2", "ra-3"]), *gang.replacements(4, 2)]
    out = run(objects)
    assert set(placed(out, gang)) == {"default/job-4", "default/job-5"}
    assert all(n <= 1 for n in occupancy(out, objects).values())


@pytest.mark.parametrize("dialect", DIALECTS)
def test_replacements_do_not_take_room_another_gang_took_in_the_same_cycle(dialect: str) -> None:
    # Kueue's "second pass replacement must not take a domain claimed by another workload in the same
    # cycle": two gangs in rack ra each lost two nodes; ra has room for three replacements. One gang
    # gets both of its own, the other none (not one of two), and no node holds two.
    first, second = Gang(dialect, "one"), Gang(dialect, "two")
    objects = [*failed(racks(ra=11, rb=4), "ra-0", "ra-1", "ra-4", "ra-5"), *first.objects(), *second.objects(),
               *first.running(["ra-0", "ra-1", "ra-2", "ra-3"]), *second.running(["ra-4", "ra-5", "ra-6", "ra-7"]),
               *first.replacements(4, 2), *second.replacements(4, 2)]
    out = run(objects)
    got = sorted(len(placed(out, g)) for g in (first, second))
    assert got == [0, 2]
    assert all(n.startswith("ra-") for n in out.bound.values())
    assert all(n <= 1 for n in occupancy(out, objects).values())


def test_a_lone_pod_is_never_replaced_as_a_gang() -> None:
    # Kueue's "node replacement skipped for single-Pod-owned workload": a pod of no gang on the failed
    # node, and the pod made in its place, which goes wherever it fits, as any pod.
    objects = [*failed(racks(ra=2, rb=1), "ra-0"), pod("solo-0", cpu="8", node_name="ra-0"), pod("solo-1", cpu="8")]
    out = run(objects)
    assert out.bound["default/solo-1"] in {"ra-1", "rb-0"}
    assert not [e for e in out.events if e.reason == "ReplacementsDoNotFit"]


def test_a_nonstrict_gang_takes_its_replacements_together_and_holds_nothing_while_they_wait() -> None:
    # A NonStrict gang (Koordinator's mode) lost two nodes; one free node is left. Its replacements are
    # placed together in one cycle or not at all, as a Strict gang's: the one that fits is not held
    # there while the other waits (the pod that comes after takes the room), and no wait starts, so
    # no timeout marks the replacements never to be scheduled again (a running job is not a gang
    # accumulating its members).
    group = podgroup("job", 4, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"}, timeout=60)
    objects = [*failed(racks(ra=6), "ra-0", "ra-1"), group,
               *(pod(f"job-{i}", cpu="8", group="job", node_name=f"ra-{i}") for i in range(4)),
               pod("other", cpu="8", node_name="ra-5"), pod("job-4", cpu="8", group="job"),
               pod("job-5", cpu="8", group="job"), pod("solo", cpu="8")]
    out = run(objects)
    assert out.bound == {"default/solo": "ra-4"}
    assert out.pending["default/job-4"].startswith(
        'gang "default/job" lost members and cannot take the 2 replacement(s) it needs together anywhere')
    assert not [e for e in out.events if e.reason == "GangTimeout"]
    # With room for both, both bind, in one cycle.
    objects = [o for o in objects if o["metadata"]["name"] not in ("other", "solo")]
    out = run(objects)
    assert sorted(placed(out, Gang("koordinator"))) == ["default/job-4", "default/job-5"]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_replacements_that_wait_hold_no_room(dialect: str) -> None:
    # A guard: two replacements, room for one in the rack; a pod that comes after them takes that
    # room (the gang waits for both, holding nothing), whether its lost members are still seen or gone.
    for members in (["ra-0", "ra-1", "ra-2", "ra-3"], ["ra-2", "ra-3"]):
        gang = Gang(dialect)
        running = [gang.member(i, n) for i, n in enumerate(["ra-0", "ra-1", "ra-2", "ra-3"]) if n in members]
        objects = [*failed(racks(ra=6), "ra-0", "ra-1"), *gang.objects(), *running,
                   pod("other", cpu="8", node_name="ra-5"), *gang.replacements(4, 2), pod("solo", cpu="8")]
        out = simulate(World.from_objects([("test", o) for o in objects]))
        assert out.bound == {"default/solo": "ra-4"}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_lost_members_that_terminate_keep_their_room_until_gone(dialect: str) -> None:
    # A guard: two members evicted (terminating for 30 s, their nodes healthy), one node free. The
    # replacements wait for the room the terminating ones still hold, then bind together; no node holds
    # two pods at any moment.
    gang = Gang(dialect)
    members = gang.running(["ra-0", "ra-1", "ra-2", "ra-3"])
    for m in members[:2]:
        m["metadata"]["deletionTimestamp"] = "2026-01-01T00:10:00Z"
        m["metadata"]["deletionGracePeriodSeconds"] = 30
    world = World.from_objects([("test", o) for o in [*racks(ra=5), *gang.objects(), *members,
                                                       *gang.replacements(4, 2)]])
    state, bound = SchedulerState(), {}
    for _ in range(20):
        result = schedule(world.snapshot(NAMES), state, world.now)
        applied = world.apply(result)
        bound.update({d.pod: d.node for d in result.binds})
        on: dict[str, int] = {}
        for p in world.pods.values():
            if p.node_name:
                on[p.node_name] = on.get(p.node_name, 0) + 1
        assert all(n <= 1 for n in on.values()), (world.now, on)
        if not applied and (due := world.next_deletion()) is not None:
            world.now = max(world.now, due)
            world.finish_deletions()
        elif not applied:
            break
    assert sorted(bound) == ["default/job-4", "default/job-5"]


def test_replacements_go_in_priority_order_whether_their_lost_members_are_seen_or_gone() -> None:
    # The queue takes jobs by priority; only a gang left partly bound by a stopped scheduler goes
    # first (docs/concepts.md). A low-priority gang that ran and lost two members is not one: a
    # high-priority pod (which may not preempt) takes the one free node first, whether the lost
    # members are still seen on their failed nodes or already deleted (on 6f1bfe9, deleted, the gang
    # counted as mid-bind and went first, binding its replacements on the node and the one after).
    for seen in (True, False):
        gang = Gang("koordinator", priority="low")
        running = gang.running(["ra-0", "ra-1", "ra-2", "ra-3"])[0 if seen else 2:]
        high = pod("high", cpu="8", priority_class="high", preemptionPolicy="Never")
        objects = [*failed(racks(ra=6), "ra-0", "ra-1"), priority_class("high", 100), priority_class("low", 1),
                   *gang.objects(), *running, high, *gang.replacements(4, 2)]
        world = World.from_objects([("test", o) for o in objects])
        state = SchedulerState()
        if not seen:  # the scheduler saw the gang meet its minimum before its members were lost
            state.mark_satisfied(["default/job"])
        result = schedule(world.snapshot(NAMES), state, world.now)
        assert {d.pod: d.node for d in result.binds} == {"default/high": "ra-4"}, seen


def test_a_gang_that_ran_and_has_nothing_left_running_starts_over_in_its_mode() -> None:
    # A NonStrict PodGroup met its minimum once (the scheduler remembers it), and nothing of it runs or
    # is seen lost now (its job was deleted and made again under the same PodGroup, or its lost pods
    # are gone): no running job is left to replace members of, so its new pods are a gang like any,
    # in its own mode (NonStrict: the one that fits is held while it waits), told the usual words.
    group = podgroup("job", 2, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})
    objects = [*racks(ra=1), group, pod("job-0", cpu="8", group="job"), pod("job-1", cpu="8", group="job")]
    world, state = World.from_objects([("test", o) for o in objects]), SchedulerState()
    state.mark_satisfied(["default/job"])
    result = schedule(world.snapshot(NAMES), state, world.now)
    assert not result.binds and list(state.reserved.values()) == ["ra-0"]
    assert not any("lost members" in m for m in result.pending.values())


# -- preemption inside the domain ------------------------------------------------------------------


@pytest.mark.parametrize("dialect", DIALECTS)
def test_replacements_preempt_lower_priority_pods_inside_the_rack(dialect: str) -> None:
    # Kueue does not preempt for replacements; koordpy does, inside the rack: ra's free nodes hold
    # pods of priority 10, rb's pods of priority 1 (cheaper victims). The gang (priority 100) evicts
    # in ra, and its replacements bind there once the victims are gone.
    gang = Gang(dialect, priority="high")
    fillers = [pod("fill-a4", cpu="8", node_name="ra-4", priority_class="mid"),
               pod("fill-a5", cpu="8", node_name="ra-5", priority_class="mid"),
               pod("fill-b0", cpu="8", node_name="rb-0", priority_class="low"),
               pod("fill-b1", cpu="8", node_name="rb-1", priority_class="low")]
    objects = [*failed(racks(ra=6, rb=2), "ra-0", "ra-1"), priority_class("high", 100), priority_class("mid", 10),
               priority_class("low", 1), *gang.objects(), *gang.running(["ra-0", "ra-1", "ra-2", "ra-3"]),
               *fillers, *gang.replacements(4, 2)]
    out = run(objects)
    assert sorted(out.preempted) == ["default/fill-a4", "default/fill-a5"]
    assert sorted(placed(out, gang).values()) == ["ra-4", "ra-5"]


def test_a_lost_member_holds_no_gang_up_for_preemption() -> None:
    # Gangs g1 and g2 (minimum 2, low priority) run three members each; g1's on a-0 is lost (its node
    # failed). A high-priority pod needs one node: taking g2's member leaves g2 at its minimum, taking
    # g1's on a-1 breaks g1 (one member left that counts), so preemption prices g1 at both of its
    # members and evicts g2's (on 6f1bfe9 the lost member counted as bound, both cost one, and the
    # name chose a-1).
    nodes = [node(f"{r}-{i}", cpu="8") for r in "ab" for i in range(3)]
    objects = [*failed(nodes, "a-0"), priority_class("high", 100), priority_class("low", 1),
               podgroup("g1", 2), podgroup("g2", 2),
               *(pod(f"g1-{i}", cpu="8", group="g1", node_name=f"a-{i}", priority_class="low") for i in range(3)),
               *(pod(f"g2-{i}", cpu="8", group="g2", node_name=f"b-{i}", priority_class="low") for i in range(3)),
               pod("solo", cpu="8", priority_class="high")]
    out = run(objects)
    assert out.preempted == ["default/g2-0"] and out.bound == {"default/solo": "b-0"}


# -- what the view sees: a taint arriving, time passing ---------------------------------------------


def _snapshot(objects: list[dict[str, Any]]) -> Any:
    return World.from_objects([("test", o) for o in objects]).snapshot(frozenset({"koordpy"}))


def test_a_taint_arriving_on_a_node_takes_its_member_from_the_gang() -> None:
    # Nothing about the pods changes; the node's taint alone makes its member lost, which the standing
    # view sees (the gang rebuilt, its replacement a gang's again) at the next cycle.
    gang = Gang("koordinator")
    healthy = [*racks(ra=6), *gang.objects(), *gang.running(["ra-0", "ra-1", "ra-2", "ra-3"])]
    state = SchedulerState()
    Cycle(_snapshot(healthy), state, DEFAULT_EPOCH).run()
    view = state.standing_view()
    assert view.gangs["default/job"].lost == frozenset()
    Cycle(_snapshot(failed(healthy, "ra-1")), state, DEFAULT_EPOCH + 1).run()
    assert view.gangs["default/job"].lost == frozenset({"default/job-1"})


def test_a_member_that_tolerates_the_taint_for_a_while_is_lost_when_its_toleration_ends() -> None:
    # The member tolerates unreachable for 300 s from the taint's timeAdded (an hour before the epoch
    # here: give it two hours): it counts until then, and the cycle is due then.
    gang = Gang("koordinator")
    objects = failed([*racks(ra=6), *gang.objects(), *gang.running(["ra-0", "ra-1", "ra-2", "ra-3"])], "ra-0")
    objects[[o["metadata"].get("name") for o in objects].index("job-0")]["spec"]["tolerations"] = [
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 7200}]
    state = SchedulerState()
    result = Cycle(_snapshot(objects), state, DEFAULT_EPOCH).run()
    view = state.standing_view()
    ends = DEFAULT_EPOCH - 3600 + 7200
    assert view.gangs["default/job"].lost == frozenset()
    assert result.next_deadline == ends
    Cycle(_snapshot(objects), state, ends).run()
    assert view.gangs["default/job"].lost == frozenset({"default/job-0"})


def test_members_lost_are_the_ones_liveness_names() -> None:
    # A terminating member and one on a node the snapshot no longer holds are lost as well.
    gang = Gang("koordinator")
    members = gang.running(["ra-0", "ra-1", "gone-node", "ra-3"])
    members[1]["metadata"]["deletionTimestamp"] = "2025-12-31T23:59:00Z"
    state = SchedulerState()
    Cycle(_snapshot([*racks(ra=6), *gang.objects(), *members]), state, DEFAULT_EPOCH).run()
    assert state.standing_view().gangs["default/job"].lost == frozenset({"default/job-1", "default/job-2"})


def test_explain_says_the_gang_cannot_take_its_replacements_in_its_rack() -> None:
    gang = Gang("koordinator")
    objects = [*failed(racks(ra=5, rb=4), "ra-0", "ra-1"), *gang.objects(),
               *gang.running(["ra-0", "ra-1", "ra-2", "ra-3"]), *gang.replacements(4, 2)]
    exp = explain_pod(_snapshot(objects), SchedulerState(), DEFAULT_EPOCH, "default/job-4")
    assert exp is not None and exp.status == "pending"
    assert exp.summary.startswith('gang "default/job" lost members and cannot take the 2 replacement(s) it needs '
                                  "together inside BlockLayer/ra")
    assert exp.changes[0].startswith("gang default/job lost members: its 2 replacement(s) bind together, all or "
                                     "none, inside BlockLayer/ra")
    assert [(g.key, g.bound, g.lost) for g in exp.gangs] == [("default/job", 4, 2)]


def test_a_gang_that_never_ran_is_told_what_any_gang_is() -> None:
    # One member bound (by hand, say), none lost, the gang never met its minimum: its pending members
    # that fit nowhere are not "replacements"; they get the GangGroup's usual words.
    gang = Gang("koordinator", minimum=3)
    objects = [*racks(ra=2), *gang.objects(), gang.member(0, "ra-0"), *gang.replacements(1, 2)]
    out = run(objects)
    assert placed(out, gang) == {}
    assert "lost members" not in out.pending["default/job-1"]
    assert 'GangGroup "default/job" gets rejected' in out.pending["default/job-2"] or \
        'GangGroup "default/job" gets rejected' in out.pending["default/job-1"]
    assert not [e for e in out.events if e.reason == "ReplacementsDoNotFit"]


def _asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The gangs whose bound members the view looks at (``View._losses``), in the order asked."""
    asked: list[str] = []
    looked = View._losses

    def spy(self: View, gang: Any, now: float) -> frozenset[str]:
        asked.append(gang.key)
        return looked(self, gang, now)

    monkeypatch.setattr(View, "_losses", spy)
    return asked


def _three_gangs() -> World:
    """Gangs one, two and three of two, on ra-0 and ra-1, ra-2 and ra-3, ra-4 and ra-5. The test
    changes the world's nodes between cycles; its pods stay the same objects, as a live cache keeps them."""
    gangs = [Gang("koordinator", name, minimum=2) for name in ("one", "two", "three")]
    objects = [*racks(ra=6), *(o for g in gangs for o in g.objects())]
    for i, g in enumerate(gangs):
        objects += g.running([f"ra-{2 * i}", f"ra-{2 * i + 1}"])
    return World.from_objects([("test", o) for o in objects])


def _node(world: World, name: str, **changes: Any) -> None:
    world.stores["nodes"][name] = world.stores["nodes"][name].model_copy(update=changes)


UNREACHABLE = Taint(key="node.kubernetes.io/unreachable", effect="NoExecute", time_added=DEFAULT_EPOCH - 3600)
NAMES = frozenset({"koordpy"})


def test_a_node_change_looks_again_only_at_the_gangs_with_members_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # A node's change (here a NoExecute taint arriving on ra-3) can take members only from the gangs
    # running there: the view looks at those, not at every gang of the cluster (a live cluster's nodes
    # change often, and it has thousands of gangs).
    world, state = _three_gangs(), SchedulerState()
    Cycle(world.snapshot(NAMES), state, DEFAULT_EPOCH).run()
    asked = _asked(monkeypatch)
    _node(world, "ra-3", taints=(UNREACHABLE,), ready=False)
    Cycle(world.snapshot(NAMES), state, DEFAULT_EPOCH + 1).run()
    assert set(asked) == {"default/two"}
    view = state.standing_view()
    assert [view.gangs[f"default/{n}"].lost for n in ("one", "two", "three")] == [
        frozenset(), frozenset({"default/two-1"}), frozenset()]


def test_a_node_that_goes_and_comes_back_takes_and_gives_back_its_members(monkeypatch: pytest.MonkeyPatch) -> None:
    # The members on a node the snapshot no longer holds are lost, and count again when it is back;
    # only the gang that runs there is looked at each time.
    world, state = _three_gangs(), SchedulerState()
    Cycle(world.snapshot(NAMES), state, DEFAULT_EPOCH).run()
    view = state.standing_view()
    asked = _asked(monkeypatch)
    gone = world.stores["nodes"].pop("ra-4")
    Cycle(world.snapshot(NAMES), state, DEFAULT_EPOCH + 1).run()
    assert set(asked) == {"default/three"} and view.gangs["default/three"].lost == frozenset({"default/three-0"})
    asked.clear()
    world.stores["nodes"]["ra-4"] = gone
    Cycle(world.snapshot(NAMES), state, DEFAULT_EPOCH + 2).run()
    assert set(asked) == {"default/three"} and view.gangs["default/three"].lost == frozenset()


def _no_stale(world: World) -> Snapshot:
    # Gang one left below its minimum is stale: its grace's end would be the next deadline, which is
    # not what this test looks at (tests/sim/test_sim_stale.py does).
    snap = world.snapshot(NAMES)
    snap.stale_grace = -1
    return snap


def test_a_toleration_that_ends_looks_again_only_at_its_gang(monkeypatch: pytest.MonkeyPatch) -> None:
    # Gang one's member on ra-0 tolerates the taint for two hours, gang two's on ra-2 for three: at the
    # first end only gang one is looked at again (and loses its member), and the cycle is due at the next.
    world, state = _three_gangs(), SchedulerState()
    for name, seconds in (("default/one-0", 7200), ("default/two-0", 10800)):
        world.pods[name] = world.pods[name].model_copy(update={"tolerations": (
            Toleration(key="node.kubernetes.io/unreachable", operator="Exists", effect="NoExecute", seconds=seconds),)})
    _node(world, "ra-0", taints=(UNREACHABLE,), ready=False)
    _node(world, "ra-2", taints=(UNREACHABLE,), ready=False)
    first = DEFAULT_EPOCH - 3600 + 7200
    assert Cycle(_no_stale(world), state, DEFAULT_EPOCH).run().next_deadline == first
    asked = _asked(monkeypatch)
    result = Cycle(_no_stale(world), state, first).run()
    assert set(asked) == {"default/one"}
    assert result.next_deadline == DEFAULT_EPOCH - 3600 + 10800
    view = state.standing_view()
    assert view.gangs["default/one"].lost == frozenset({"default/one-0"})
    assert view.gangs["default/two"].lost == frozenset()
