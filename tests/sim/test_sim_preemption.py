"""Issue 29, items 9 and 4, end to end in the simulator with Kubernetes' own PodGroups, as kube-scheduler
v1.37.2 decides them: the cheapest victims when the rules between pods (host ports) make one rack
dearer than another; a CompositePodGroup child in ``disruptionMode: all`` under a composite in
``single`` mode is one victim (the highest group above a pod in mode all decides), evicted and
priced whole, while the rest of the composite keeps running."""

from __future__ import annotations

from typing import Any

from tests.builders import node, priority_class
from tests.core.dialects.test_upstream import RACK, group, member, run
from tests.core.dialects.test_upstream_composite import composite

CLASSES = [priority_class("low", 1000), priority_class("high", 2000)]


def ported(p: dict[str, Any], port: int) -> dict[str, Any]:
    p["spec"]["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    return p


def low(name: str, where: str, group_name: str, cpu: str = "3") -> dict[str, Any]:
    return member(name, cpu, group_name, node_name=where, priority_class="low", scheduler="other")


def test_a_rack_gang_goes_to_the_rack_its_host_ports_make_cheaper() -> None:
    # A gang of two pods, one rack, each taking host port 9000. Rack ra's two nodes each run a low pod
    # holding the port, rack rb's one: by resources both racks have room and ra comes first by name.
    nodes = [node(f"{r}-{i}", cpu="8", labels={RACK: r}) for r in ("ra", "rb") for i in range(2)]
    holders = [ported(low(f"h-{n}", n, f"h-{n}", cpu="1"), 9000) for n in ("ra-0", "ra-1", "rb-0")]
    groups = [group(f"h-{n}", min_count=1, priorityClassName="low") for n in ("ra-0", "ra-1", "rb-0")]
    out = run(CLASSES, nodes, *groups, *holders,
              group("high", min_count=2, topology=RACK, priorityClassName="high"),
              *(ported(member(f"high-{i}", "1", "high", priority_class="high"), 9000) for i in range(2)))
    assert out.preempted == ["default/h-rb-0"]
    assert sorted(out.bound.values()) == ["rb-0", "rb-1"]


def _tree(kid_a_mode: str, composite_mode: str = "single") -> list[Any]:
    """Composite ``low`` (minGroupCount 1) of child ``low-a`` (two pods, on ra-0 and rb-0, in
    ``kid_a_mode``) and child ``low-b`` (one pod on rc-0, single). ``high`` needs one node of the
    pool ra-0 and rb-0 are in; every node is full."""
    pool = {"pool": "a"}
    nodes = [node("ra-0", cpu="4", labels={RACK: "ra", **pool}), node("rb-0", cpu="4", labels={RACK: "rb", **pool}),
             node("rc-0", cpu="4", labels={RACK: "rc"})]
    kids = [group("low-a", min_count=1, parentCompositePodGroupName="low", priorityClassName="low",
                  disruptionMode={kid_a_mode: {}}, workloadRef={"workloadName": "train", "templateName": "a"}),
            group("low-b", min_count=1, parentCompositePodGroupName="low", priorityClassName="low",
                  workloadRef={"workloadName": "train", "templateName": "b"})]
    high = member("high-0", "3", "high", priority_class="high", nodeSelector=pool)
    return [CLASSES, nodes, composite("low", count=1, priorityClassName="low", disruptionMode={composite_mode: {}}),
            *kids, low("low-a-0", "ra-0", "low-a"), low("low-a-1", "rb-0", "low-a"), low("low-b-0", "rc-0", "low-b"),
            group("high", min_count=1, priorityClassName="high"), high]


def test_a_child_in_mode_all_under_a_single_composite_is_evicted_whole() -> None:
    out = run(*_tree("all"))
    assert sorted(out.preempted) == ["default/low-a-0", "default/low-a-1"]
    assert out.bound["default/high-0"] in ("ra-0", "rb-0")


def test_a_child_in_mode_single_loses_only_the_pod_in_the_way() -> None:
    assert len(run(*_tree("single")).preempted) == 1


def test_a_composite_in_mode_all_goes_whole_whatever_its_children_say() -> None:
    out = run(*_tree("single", composite_mode="all"))
    assert sorted(out.preempted) == ["default/low-a-0", "default/low-a-1", "default/low-b-0"]


def test_a_child_unit_is_priced_at_all_its_members_so_the_cheaper_rack_wins() -> None:
    # Rack ra holds one member of child ``low-a`` (three pods, mode all, under a single composite),
    # rack rb two pods of group ``mid``. One pod in ra, two in rb by the pods in the way; evicting
    # low-a disrupts its three members, so rb is the cheaper rack.
    nodes = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("ra", "rb", "rc") for i in range(2)]
    kid = group("low-a", min_count=1, parentCompositePodGroupName="low", priorityClassName="low",
                disruptionMode={"all": {}}, workloadRef={"workloadName": "train", "templateName": "a"})
    top = composite("low", count=1, priorityClassName="low", disruptionMode={"single": {}})
    objs: list[Any] = [
        CLASSES, nodes, top, kid,
        low("low-a-0", "ra-0", "low-a"), low("low-a-1", "rc-0", "low-a"), low("low-a-2", "rc-1", "low-a"),
        low("spare", "ra-1", "spare", cpu="1"), group("spare", min_count=1, priorityClassName="low"),
        group("mid", min_count=1, priorityClassName="low"), low("mid-0", "rb-0", "mid"), low("mid-1", "rb-1", "mid"),
        group("high", min_count=2, topology=RACK, priorityClassName="high"),
        *(member(f"high-{i}", "3", "high", priority_class="high") for i in range(2))]
    out = run(*objs)
    assert sorted(out.preempted) == ["default/mid-0", "default/mid-1"]
    assert sorted(out.bound.values()) == ["rb-0", "rb-1"]
