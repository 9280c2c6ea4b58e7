"""Issue 20: a CompositePodGroup (``scheduling.k8s.io/v1alpha3``) and its child PodGroups, rule by rule
as kube-scheduler v1.37 applies them: ``minGroupCount`` children placed at once or none, each child
whole with its own minimum and inside one domain of its own topology key, every child inside one
domain of the composite's key; waiting for the composite and for that many children with their pods;
the Workload ``workloadRef`` names is not read; ``PodGroupInitiallyScheduled`` on each child."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.workload import INITIALLY_SCHEDULED, WorkloadPodGroup
from koordpy.core.cycle import schedule
from koordpy.core.decisions import GangStatusUpdate
from koordpy.core.dialects import upstream
from koordpy.core.state import SchedulerState
from koordpy.errors import KoordpyError
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import node, priority_class
from tests.core.dialects.test_upstream import RACK, group, member, run

HOST = "kubernetes.io/hostname"
NAMES = frozenset({"koordpy"})
REF = {"workloadName": "train", "templateName": "replicas"}


def composite(name: str = "train", *, count: int | None = 2, topology: str | None = None,
              **spec: Any) -> dict[str, Any]:
    policy: dict[str, Any] = {"gang": {"minGroupCount": count}} if count is not None else {"basic": {}}
    body: dict[str, Any] = {"workloadRef": REF, "schedulingPolicy": policy, **spec}
    if topology is not None:
        body["schedulingConstraints"] = {"topology": [{"key": topology}]}
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": body}


def child(name: str, min_count: int = 2, parent: str = "train", topology: str | None = None) -> dict[str, Any]:
    return group(name, min_count=min_count, topology=topology, parentCompositePodGroupName=parent,
                 workloadRef={"workloadName": "train", "templateName": "workers"})


def pods_of(name: str, n: int = 2, cpu: str = "3", **kw: Any) -> list[dict[str, Any]]:
    return [member(f"{name}-{i}", cpu=cpu, group_name=name, **kw) for i in range(n)]


def family(children: int = 3, per_child: int = 2, cpu: str = "3", **kw: Any) -> list[dict[str, Any]]:
    """``train`` (minGroupCount 2) with ``children`` gangs of ``per_child`` pods, ``c0``, ``c1``..."""
    out = [composite(**kw)]
    for c in range(children):
        out += [child(f"c{c}", per_child), *pods_of(f"c{c}", per_child, cpu)]
    return out


def per_child(out: SimulationResult, children: int = 3, per: int = 2) -> list[int]:
    return sorted(sum(f"default/c{c}-{i}" in out.bound for i in range(per)) for c in range(children))


def nodes(n: int, cpu: str = "4", **labels: str) -> list[dict[str, Any]]:
    return [node(f"n{i}", cpu=cpu, labels=dict(labels)) for i in range(n)]


# -- minGroupCount ---------------------------------------------------------------------------------

def test_min_group_count_children_bind_whole_and_the_rest_wait() -> None:
    # 4 nodes a pod fills: room for two children of two. Two bind whole, the third binds nothing.
    out = run(nodes(4), family())
    assert per_child(out) == [0, 2, 2]
    assert len(set(out.bound.values())) == 4


def test_nothing_binds_until_min_group_count_children_fit() -> None:
    # Room for one child only: each child's own gang would fit, but minGroupCount 2 does not.
    out = run(nodes(3), family())
    assert out.bound == {}
    assert len(out.pending) == 6
    out = run(nodes(4), family())
    assert per_child(out) == [0, 2, 2]


def test_every_child_that_fits_binds_with_the_minimum() -> None:
    out = run(nodes(6), family())
    assert per_child(out) == [2, 2, 2]


def test_a_basic_composite_needs_one_child() -> None:
    out = run(nodes(3), family(count=None))
    assert per_child(out) == [0, 0, 2]


def test_the_composite_waits_until_min_group_count_children_have_their_pods() -> None:
    # c0 has 3 pods (2 needed), c1 one of 2: four pods, as many as two children need, but one child
    # is ready and the composite needs 2 (kube-scheduler's PreEnqueue waits for the tree's quorum).
    objs = [composite(), child("c0"), *pods_of("c0", 3), child("c1"), *pods_of("c1", 1)]
    out = run(nodes(4), objs)
    assert out.bound == {}
    msg = out.pending["default/c0-0"]
    assert "CompositePodGroup default/train waits for 2 child PodGroups (minGroupCount) to have their minimum " \
           "of pods: 1 of its 2 have (c0 3/2, c1 1/2)" in msg, msg
    out = run(nodes(5), objs, member("c1-1", cpu="3", group_name="c1"))
    assert len(out.bound) == 5


# -- each child's own minimum and topology ----------------------------------------------------------

def test_a_child_binds_whole_or_not_at_all() -> None:
    # minGroupCount 1, two children of 2 on 3 nodes: one child binds whole, the other none of its pods
    # (not one pod of it on the third node).
    out = run(nodes(3), family(children=2, count=1))
    assert per_child(out, 2) == [0, 2]


def test_a_child_counts_only_with_its_own_minimum() -> None:
    # c0 needs 2 pods, c1 needs 3: minGroupCount 2 needs 5 pods at once; 4 nodes hold 4.
    objs = [composite(), child("c0", 2), *pods_of("c0", 2), child("c1", 3), *pods_of("c1", 3)]
    assert run(nodes(4), objs).bound == {}
    assert len(run(nodes(5), objs).bound) == 5


def test_bound_members_of_a_child_count_towards_its_minimum() -> None:
    # c0 already runs whole; c1 has one pod running, one pending: one free node meets minGroupCount 2.
    objs = [composite(), child("c0"), *pods_of("c0", 1, node_name="n0"),
            member("c0-1", cpu="3", group_name="c0", node_name="n1"),
            child("c1"), member("c1-0", cpu="3", group_name="c1", node_name="n2"),
            member("c1-1", cpu="3", group_name="c1")]
    out = run(nodes(4), objs)
    assert out.bound["default/c1-1"] == "n3"


def test_each_child_keeps_to_one_domain_of_its_own_key() -> None:
    # Racks ra and rb have one node each, rc two: with the children keyed by rack only one child
    # fits (in rc), so minGroupCount 2 is not met; without their key two children bind (one spans
    # ra and rb).
    racked = [node("ra-0", cpu="4", labels={RACK: "ra"}), node("rb-0", cpu="4", labels={RACK: "rb"}),
              node("rc-0", cpu="4", labels={RACK: "rc"}), node("rc-1", cpu="4", labels={RACK: "rc"})]
    keyed = [composite(), child("c0", topology=RACK), *pods_of("c0"), child("c1", topology=RACK), *pods_of("c1")]
    assert run(racked, keyed).bound == {}
    plain = [composite(), child("c0"), *pods_of("c0"), child("c1"), *pods_of("c1")]
    assert len(run(racked, plain).bound) == 4


def test_a_child_keyed_by_hostname_shares_one_node() -> None:
    hosts = [node(f"n{i}", cpu="8", labels={HOST: f"n{i}"}) for i in range(3)]
    objs = [composite(), *(x for c in range(2) for x in (child(f"c{c}", topology=HOST), *pods_of(f"c{c}", cpu="4")))]
    out = run(hosts, objs)
    assert len(out.bound) == 4
    assert out.bound["default/c0-0"] == out.bound["default/c0-1"]
    assert out.bound["default/c1-0"] == out.bound["default/c1-1"]


# -- the composite's topology ---------------------------------------------------------------------

def test_the_composites_key_holds_every_child_in_one_domain() -> None:
    # Two racks of two nodes, one node of each taken: each rack has room for one child only. With
    # the composite keyed by rack minGroupCount 2 cannot be met in one rack; without its key the
    # two children bind, one per rack.
    racked = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("ra", "rb") for i in range(2)]
    taken = [member(f"x-{r}", cpu="4", group_name="x", node_name=f"{r}-0") for r in ("ra", "rb")]
    for p in taken:
        del p["spec"]["schedulingGroup"]
    kids = [x for c in range(2) for x in (child(f"c{c}", 1), *pods_of(f"c{c}", 1))]
    assert run(racked, taken, composite(topology=RACK), kids).bound == {}
    assert len(run(racked, taken, composite(), kids).bound) == 2
    # With room in one rack for both, they share it.
    out = run(racked, taken[:1], composite(topology=RACK), kids)
    assert {out.bound["default/c0-0"], out.bound["default/c1-0"]} == {"rb-0", "rb-1"}


def test_a_composite_keyed_by_a_label_no_node_carries_says_so() -> None:
    out = run(nodes(4), family(topology="example.com/block"))
    assert out.bound == {}
    assert "needs nodes labelled example.com/block, and no node carries that label" in out.pending["default/c0-0"]


# -- objects that are missing ---------------------------------------------------------------------

def test_the_workload_is_not_read() -> None:
    # kube-scheduler reads neither the Workload nor its template: the family binds without one.
    # (The API server requires workloadRef; the Workload it names need not exist for scheduling.)
    out = run(nodes(4), family())
    assert len(out.bound) == 4


def test_a_composite_without_workload_ref_is_refused_as_the_api_server_refuses_it() -> None:
    bad = composite()
    del bad["spec"]["workloadRef"]
    with pytest.raises(KoordpyError, match=r"CompositePodGroup default/train.*spec\.workloadRef.*required"):
        run(nodes(4), bad, child("c0"), *pods_of("c0"))
    orphan = child("c0")
    del orphan["spec"]["workloadRef"]
    with pytest.raises(KoordpyError, match=r"spec\.workloadRef.*must be set when spec\.parentCompositePodGroupName"):
        run(nodes(4), composite(), orphan, *pods_of("c0"))


def test_children_wait_for_their_composite_to_exist() -> None:
    objs = family()[1:]  # the children and their pods, no CompositePodGroup
    out = run(nodes(4), objs)
    assert out.bound == {}
    assert out.pending["default/c0-0"] == (
        "waiting for CompositePodGroup default/train (scheduling.k8s.io/v1alpha3), which PodGroup default/c0 of pod "
        "default/c0-0 names in spec.parentCompositePodGroupName, to exist")


def test_pods_seen_before_their_child_podgroup_join_the_composite_when_it_comes() -> None:
    # The standing view filed the pods under their PodGroup's key while it did not exist; the
    # PodGroups that come (the pods themselves unchanged) name a parent, and the pods move to the
    # composite's gang.
    state = SchedulerState()
    w = World.from_objects([("t", o) for o in [*nodes(4), composite(), *pods_of("c0"), *pods_of("c1")]])
    assert schedule(w.snapshot(NAMES), state, w.now).binds == []
    view = state.view
    assert view is not None and view.member_of["default/c0-0"] == "default/c0"
    for name in ("c0", "c1"):
        w.stores[upstream.STORE][f"default/{name}"] = WorkloadPodGroup.from_raw(child(name))
    result = schedule(w.snapshot(NAMES), state, w.now)
    assert state.view is view and view.member_of["default/c0-0"] == "default/train"
    assert len(result.binds) == 4


# -- what the group's pods must share ---------------------------------------------------------------

def test_pods_must_have_the_composites_priority() -> None:
    objs = [priority_class("high", 1000), *family(priorityClassName="high")]
    out = run(nodes(4), objs)
    assert out.bound == {}
    assert ("CompositePodGroup default/train (scheduling.k8s.io) is refused: pod default/c0-0 has priority 0 and "
            "the group 1000") in out.pending["default/c0-0"]
    objs = [priority_class("high", 1000), composite(priorityClassName="high")]
    for c in range(2):
        objs += [child(f"c{c}"), *pods_of(f"c{c}", priority_class="high")]
    assert len(run(nodes(4), objs).bound) == 4


def test_a_tree_whose_pods_name_two_schedulers_is_refused() -> None:
    objs = [composite(), child("c0"), *pods_of("c0"), child("c1"), *pods_of("c1", scheduler="other")]
    out = run(nodes(4), objs)
    assert out.bound == {}
    assert "CompositePodGroup default/train (scheduling.k8s.io) is refused: its pods name different schedulerNames " \
           "(koordpy, other)" in out.pending["default/c0-0"]


def test_a_nested_composite_is_refused() -> None:
    out = run(nodes(4), composite(parentCompositePodGroupName="top"), child("c0"), *pods_of("c0"))
    assert out.bound == {}
    assert "CompositePodGroup default/train with spec.parentCompositePodGroupName" in out.pending["default/c0-0"]


def test_a_podgroup_and_a_composite_of_one_name_are_refused() -> None:
    # A root PodGroup c0 (no parent) beside a CompositePodGroup c0 with a child of its own.
    out = run(nodes(4), composite("c0"), group("c0", min_count=2), *pods_of("c0"), child("k", parent="c0"),
              *pods_of("k"))
    assert out.bound == {}
    assert "share a namespace and name" in out.pending["default/c0-0"]


# -- status --------------------------------------------------------------------------------------

def test_each_child_gets_initially_scheduled_and_the_composite_nothing() -> None:
    w = World.from_objects([("t", o) for o in [*nodes(4), *family()]])
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    written = {d.object_key: d.status.wire() for d in result.decisions if isinstance(d, GangStatusUpdate)}
    assert "default/train" not in written
    conds = [c for v in written.values() for c in v["conditions"]  # type: ignore[attr-defined]
             if c["type"] == INITIALLY_SCHEDULED]
    assert sorted((c["status"], c["reason"]) for c in conds) == [
        ("False", "Unschedulable"), ("True", "Scheduled"), ("True", "Scheduled")]
    w = World.from_objects([("t", o) for o in [*nodes(4), *family()]])
    simulate(w)
    found = {k: g.condition(INITIALLY_SCHEDULED) for k, g in w.stores[upstream.STORE].items()}
    assert sorted(c.status for c in found.values() if c is not None) == ["False", "True", "True"]
