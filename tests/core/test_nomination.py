"""Nominated room (``koordpy.core.nomination``): a nomination preemption can no longer help is
dropped, written as an empty ``Nominate`` and no longer counted; a pod placed on its nominated node
takes that node when its filters and its devices (with the other members') still allow it there; a
plan carried out dooms its victims, takes the room of the lower-priority pods it names back and
nominates the job's pods."""

from __future__ import annotations

from typing import Any

from koordpy.api import Node, Pod
from koordpy.core.cycle import Cycle
from koordpy.core.decisions import Nominate, Preempt
from koordpy.core.gang import Job
from koordpy.core.preemption import Plan
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from koordpy.sim.simulator import World
from tests.builders import node, pod, priority_class
from tests.sim.test_dra import claiming, gpu_class, gpu_slice, template


def _nominated(raw: dict[str, Any], on: str) -> dict[str, Any]:
    raw.setdefault("status", {})["nominatedNodeName"] = on
    return raw


def _cycle(nominated_on: str) -> tuple[Cycle, Pod]:
    p = Pod.from_raw(_nominated(pod("p", "1"), nominated_on))
    snap = Snapshot(nodes=[Node.from_raw(node(f"n{i}", cpu="4")) for i in range(2)], pods=[p])
    return Cycle(snap, SchedulerState(), 0.0), p


def _placed_on_nominated(cycle: Cycle, pods: list[Pod]) -> tuple[bool, Statement]:
    """``place_on_nominated`` as the cycle calls it: the pods' nominated room given up first."""
    stmt = Statement(cycle.cluster)
    for p in pods:
        if cycle.cluster.is_held(p.key):
            stmt.evict(p.key)
    return cycle.nominations.place_on_nominated(pods, stmt), stmt


def test_a_pod_goes_on_its_nominated_node_when_it_fits_there() -> None:
    cycle, p = _cycle("n1")
    placed, stmt = _placed_on_nominated(cycle, [p])
    assert placed and stmt.placed == {p.key: 1}


def test_a_pod_its_filters_now_keep_off_its_nominated_node_is_not_placed_there() -> None:
    # The pod's nodeSelector (changed since it was nominated) rules n1 out; n1 has the room.
    p = Pod.from_raw(_nominated(pod("p", "1", nodeSelector={"pool": "a"}), "n1"))
    nodes = [Node.from_raw(node("n0", cpu="4", labels={"pool": "a"})), Node.from_raw(node("n1", cpu="4"))]
    cycle = Cycle(Snapshot(nodes=nodes, pods=[p]), SchedulerState(), 0.0)
    placed, stmt = _placed_on_nominated(cycle, [p])
    assert not placed and stmt.placed == {}


def test_members_whose_devices_do_not_fit_their_nominated_node_together_are_not_placed_there() -> None:
    # Each member claims all 8 GPUs of n1, where both are nominated: either alone passes its filters
    # and the CPUs hold both, but the devices hold one.
    raws = [node("n1", cpu="16"), gpu_class(), gpu_slice("n1"), template(),
            *(claiming(_nominated(pod(f"m-{i}", "1"), "n1"), template_name="gpus") for i in range(2))]
    snap = World.from_objects([("test", r) for r in raws]).snapshot(frozenset({"koordpy"}))
    cycle = Cycle(snap, SchedulerState(), 0.0)
    members = [p for p in snap.pods if p.key.startswith("default/m-")]
    assert len(members) == 2
    placed, stmt = _placed_on_nominated(cycle, members[:1])
    assert placed  # alone, a member takes its nominated node and its devices there
    stmt.discard()
    placed, stmt = _placed_on_nominated(cycle, members)
    assert not placed and stmt.placed == {}


def test_a_plan_carried_out_dooms_its_victims_takes_back_lower_room_and_nominates_the_job() -> None:
    raws = [node("n0", cpu="16"), priority_class("high", 1000), priority_class("mid", 100),
            priority_class("low", 10), pod("v", "8", node_name="n0", priority_class="low", scheduler="other"),
            _nominated(pod("mid", "8", priority_class="mid"), "n0"), pod("top", "16", priority_class="high")]
    snap = World.from_objects([("test", r) for r in raws]).snapshot(frozenset({"koordpy"}))
    cycle = Cycle(snap, SchedulerState(), 0.0)
    top = next(p for p in snap.pods if p.key == "default/top")
    assert cycle.cluster.is_held("default/mid")
    plan = Plan("nominated", "", ("default/v",), ("default/mid",), {top.key: 0})
    cycle.nominations.carry_out(Job(top.key, [], [top], 1000, 0.0), plan, None)
    decided = cycle.result.decisions
    assert [d.pod for d in decided if isinstance(d, Preempt)] == ["default/v"]
    row = cycle.cluster.index.row["default/v"]
    # Doomed: no later job of the cycle counts it as a victim again.
    assert bool(cycle.cluster.index.doomed[row]) and bool(cycle.cluster.index.protected[row])
    assert Nominate("default/mid", "") in decided and not cycle.cluster.is_held("default/mid")
    assert Nominate(top.key, "n0") in decided and cycle.cluster.is_held(top.key)


def test_a_stale_nomination_is_dropped_and_written_empty() -> None:
    cycle, p = _cycle("n1")
    cycle.nominations.drop(Job("default/p", [], [p], 0, 0.0))
    assert cycle.result.decisions == [Nominate(p.key, "")]
    assert not cycle.cluster.is_held(p.key)
