"""Issue 20: preemption with Kubernetes' PodGroup as kube-scheduler v1.37 has it, and koordpy's
topology-keeping addition: the group's own priority (as preemptor and as victim) and
preemptionPolicy, ``disruptionMode: all`` (a unit: one victim evicts every member wherever it
runs, and is priced so), ``single`` (pod by pod), and a preemptor with bound members kept in their
domain."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod, priority_class
from tests.core.dialects.test_upstream import RACK, group, member, run

CLASSES = [priority_class("low", 1000), priority_class("high", 2000),
           priority_class("high-never", 2000, policy="Never")]


def rack_nodes(spec: dict[str, int]) -> list[dict[str, Any]]:
    """Nodes of 4 CPUs, ``<rack>-<i>``, labelled with their rack."""
    return [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r, n in spec.items() for i in range(n)]


def low_group(mode: str | None, name: str = "low", **spec: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {"priorityClassName": "low", **spec}
    if mode is not None:
        extra["disruptionMode"] = {mode: {}}
    return group(name, min_count=3, **extra)


def the_live_shape(mode: str | None) -> list[Any]:
    """As tests/integration/test_workload_gang_live.py's preemption test: ``low`` runs on ra-0, ra-1
    and rb-0, a lone low pod on rc-0, and a high gang of 2 needs two nodes of one rack (only ra)."""
    return [CLASSES, rack_nodes({"ra": 2, "rb": 1, "rc": 1}), low_group(mode),
            member("low-0", "3", "low", node_name="ra-0", priority_class="low"),
            member("low-1", "3", "low", node_name="ra-1", priority_class="low"),
            member("low-2", "3", "low", node_name="rb-0", priority_class="low"),
            pod("lone", "3", node_name="rc-0", priority_class="low"),
            group("high", min_count=2, topology=RACK, priorityClassName="high"),
            member("high-0", "3", "high", priority_class="high"),
            member("high-1", "3", "high", priority_class="high")]


def test_disruption_mode_all_evicts_the_whole_group_wherever_it_runs() -> None:
    out = run(*the_live_shape("all"))
    assert sorted(out.preempted) == ["default/low-0", "default/low-1", "default/low-2"]
    assert out.bound["default/high-0"].startswith("ra-") and out.bound["default/high-1"].startswith("ra-")
    assert "default/lone" not in out.preempted


def test_disruption_mode_single_evicts_only_the_pods_in_the_way() -> None:
    for mode in ("single", None):
        out = run(*the_live_shape(mode))
        assert sorted(out.preempted) == ["default/low-0", "default/low-1"], mode


def test_a_unit_group_is_priced_whole_so_the_cheaper_domain_wins() -> None:
    # Rack ra holds two of the three members of ``low`` (minCount 1), rack rb both members of
    # ``mid``; each rack is one job to disrupt. Single mode: ra costs 2 pods, as rb does. Unit
    # (disruptionMode all): ra costs all 3 members of ``low``, so rb's 2 pods win.
    def objs(mode: str) -> list[Any]:
        return [CLASSES, rack_nodes({"ra": 2, "rb": 2, "rc": 1}),
                group("low", min_count=1, priorityClassName="low", disruptionMode={mode: {}}),
                member("low-0", "3", "low", node_name="ra-0", priority_class="low"),
                member("low-1", "3", "low", node_name="ra-1", priority_class="low"),
                member("low-2", "3", "low", node_name="rc-0", priority_class="low"),
                group("mid", min_count=1, priorityClassName="low"),
                member("mid-0", "3", "mid", node_name="rb-0", priority_class="low"),
                member("mid-1", "3", "mid", node_name="rb-1", priority_class="low"),
                group("high", min_count=2, topology=RACK, priorityClassName="high"),
                member("high-0", "3", "high", priority_class="high"),
                member("high-1", "3", "high", priority_class="high")]
    assert sorted(run(*objs("all")).preempted) == ["default/mid-0", "default/mid-1"]
    # The tie in single mode goes by name (ra before rb): the pricing is what moved the choice.
    assert sorted(run(*objs("single")).preempted) == ["default/low-0", "default/low-1"]


def test_the_groups_priority_decides_as_victim_not_its_pods() -> None:
    # The running group has no priority of its own (0) while its pods say 1000 (bound by another
    # scheduler before the group's class was removed, say): a preemptor at 500 may evict it.
    objs: list[Any] = [CLASSES, priority_class("mid", 500), rack_nodes({"ra": 1}),
            group("low", min_count=1, disruptionMode={"all": {}}),
            member("low-0", "3", "low", node_name="ra-0", priority_class="low"),
            group("mid", min_count=1, priorityClassName="mid"), member("mid-0", "3", "mid", priority_class="mid")]
    out = run(*objs)
    assert out.preempted == ["default/low-0"]


def test_a_group_of_preemption_policy_never_does_not_preempt() -> None:
    # The group's policy is Never (its class's, as the Priority admission fills it), as are its pods'.
    objs = [*the_live_shape("all")]
    objs[7] = group("high", min_count=2, topology=RACK, priorityClassName="high-never")
    objs[8] = member("high-0", "3", "high", priority_class="high-never")
    objs[9] = member("high-1", "3", "high", priority_class="high-never")
    out = run(*objs)
    assert out.preempted == [] and "default/high-0" in out.pending
    assert "preemptionPolicy=Never" in out.pending["default/high-0"]


def test_a_group_whose_preemption_policy_is_not_its_pods_is_refused() -> None:
    # Issue 29, item 5: kube-scheduler v1.37 with PodGroupPreemptionPolicy (on in the control plane)
    # refuses a group whose pods' preemptionPolicy is not the group's (validatePodGroup,
    # SchedulerError), either way round; koordpy used to let the group's policy decide.
    objs = [*the_live_shape("all")]
    objs[8] = member("high-0", "3", "high", priority_class="high-never")
    objs[9] = member("high-1", "3", "high", priority_class="high-never")
    out = run(*objs)
    assert out.preempted == [] and out.bound == {}
    assert ("PodGroup default/high (scheduling.k8s.io) is refused: pod default/high-0 has preemptionPolicy Never "
            "and the group PreemptLowerPriority; every pod of a group must have the group's preemptionPolicy"
            in out.pending["default/high-0"])


def test_a_unit_group_with_a_member_that_may_not_be_evicted_is_no_victim() -> None:
    # low-2 may not be evicted (Koordinator's disable-preemptible label): the unit cannot go whole,
    # so none of it goes, and the high gang waits.
    objs = the_live_shape("all")
    objs[5] = member("low-2", "3", "low", node_name="rb-0", priority_class="low",
                     labels={"scheduling.koordinator.sh/disable-preemptible": "true"})
    out = run(*objs)
    assert out.preempted == [] and "default/high-0" in out.pending


def test_a_preemptor_with_bound_members_preempts_only_inside_their_domain() -> None:
    # ``high`` has one member running in rb; its second member may only go to rb, although ra's
    # victim would be as cheap: the preemption keeps the group's domain.
    objs: list[Any] = [CLASSES, rack_nodes({"ra": 1, "rb": 2}),
            pod("x", "3", node_name="ra-0", priority_class="low"),
            pod("y", "3", node_name="rb-1", priority_class="low"),
            group("high", min_count=1, topology=RACK, priorityClassName="high"),
            member("high-0", "3", "high", node_name="rb-0", priority_class="high"),
            member("high-1", "3", "high", priority_class="high")]
    out = run(*objs)
    assert out.preempted == ["default/y"]
    assert out.bound["default/high-1"] == "rb-1"


def test_explain_gives_the_groups_policy_and_priority_and_the_whole_unit() -> None:
    from koordpy.core.explain import explain_pod
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    def explain(objs: list[Any]) -> Any:
        flat = [o for x in objs for o in (x if isinstance(x, list) else [x])]
        world = World.from_objects([("test", o) for o in flat])
        exp = explain_pod(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, "default/high-0")
        assert exp is not None and exp.preemption is not None
        return exp.preemption

    facts = explain(the_live_shape("all"))
    assert (facts.policy, facts.priority) == ("PreemptLowerPriority", 2000)
    assert sorted(facts.would_evict) == ["default/low-0", "default/low-1", "default/low-2"]
    objs = the_live_shape("all")
    objs[7] = group("high", min_count=2, topology=RACK, priorityClassName="high-never", preemptionPolicy="Never")
    objs[8] = member("high-0", "3", "high", priority_class="high-never")
    objs[9] = member("high-1", "3", "high", priority_class="high-never")
    assert explain(objs).policy == "Never"


TOP = priority_class("top", 3000)


def test_a_member_beyond_the_quorum_preempts_for_itself_when_room_for_all_cannot_be_made() -> None:
    # high (minCount 1) runs high-0 on n0; high-1 and high-2 wait. Only n1's low pod may go (n2's pod
    # is above them): kube-scheduler preempts for such pods one at a time, so high-1 takes n1.
    out = run(CLASSES, TOP, node("n0", cpu="4"), node("n1", cpu="4"), node("n2", cpu="4"),
              pod("low", "3", node_name="n1", priority_class="low"),
              pod("top", "3", node_name="n2", priority_class="top"),
              group("high", min_count=1, priorityClassName="high"),
              member("high-0", "3", "high", node_name="n0", priority_class="high"),
              member("high-1", "3", "high", priority_class="high"),
              member("high-2", "3", "high", priority_class="high"))
    assert out.preempted == ["default/low"]
    assert out.bound == {"default/high-1": "n1"} and list(out.pending) == ["default/high-2"]


def test_a_victim_read_at_its_groups_priority_is_waited_for_not_preempted_twice() -> None:
    # Two running groups without a priority of their own (0) whose pods say 1000; mid (500) needs one
    # node. The victim chosen is terminating on the nominated node at the group's priority: the
    # preemptor waits for it rather than evicting the other group too.
    out = run(CLASSES, priority_class("mid", 500), node("n0", cpu="4"), node("n1", cpu="4"),
              group("g1", min_count=1), member("a-0", "3", "g1", node_name="n0", priority_class="low"),
              group("g2", min_count=1), member("b-0", "3", "g2", node_name="n1", priority_class="low"),
              group("mid", min_count=1, priorityClassName="mid"), member("mid-0", "3", "mid", priority_class="mid"))
    assert len(out.preempted) == 1


def test_a_member_beyond_the_quorum_says_what_preemption_did() -> None:
    # high-1 preempts low on n1 and waits for it: every message it gets says so, as a lone pod's does.
    out = run(CLASSES, node("n0", cpu="4"), node("n1", cpu="4"),
              pod("low", "3", node_name="n1", priority_class="low"),
              group("high", min_count=1, priorityClassName="high"),
              member("high-0", "3", "high", node_name="n0", priority_class="high"),
              member("high-1", "3", "high", priority_class="high"))
    said = [e.message for e in out.events if e.obj == "default/high-1" and e.reason == "FailedScheduling"]
    assert said and all("preemption:" in m for m in said), said


def test_a_composite_speaks_for_its_tree_in_preemption() -> None:
    # The composite ``low`` (disruptionMode all, priority 1000) has two children of one pod each, on
    # ra-0 and rb-0; ``high`` needs ra-0's room only. As a unit the whole tree goes (rb-0 too); in
    # single mode only the pod in the way (its child, being of one pod, broken below its minimum).
    from tests.core.dialects.test_upstream_composite import composite

    def objs(mode: str) -> list[Any]:
        kids = [group(f"low-{c}", min_count=1, parentCompositePodGroupName="low", priorityClassName="low",
                      workloadRef={"workloadName": "train", "templateName": "workers"}) for c in range(2)]
        return [CLASSES, rack_nodes({"ra": 1, "rb": 1}),
                composite("low", count=1, priorityClassName="low", disruptionMode={mode: {}}), *kids,
                member("low-0-0", "3", "low-0", node_name="ra-0", priority_class="low"),
                member("low-1-0", "3", "low-1", node_name="rb-0", priority_class="low"),
                group("high", min_count=1, topology=RACK, priorityClassName="high"),
                member("high-0", "3", "high", priority_class="high")]
    assert sorted(run(*objs("all")).preempted) == ["default/low-0-0", "default/low-1-0"]
    assert len(run(*objs("single")).preempted) == 1
