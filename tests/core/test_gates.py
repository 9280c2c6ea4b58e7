"""Scheduling gates (``spec.schedulingGates``): a gated pod is never attempted or bound, its gang
counts it as a member but binds only when its ungated members meet the minimum, and removing the gate
wakes the job."""

from __future__ import annotations

from typing import Any

from koordpy.core.cycle import schedule
from koordpy.core.decisions import Bind, Event, SetPodScheduledFalse
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup, run

GATE = [{"name": "kueue.x-k8s.io/admission"}]


def gated(p: dict[str, Any]) -> dict[str, Any]:
    p["spec"]["schedulingGates"] = list(GATE)
    return p


def test_a_gated_pod_is_never_bound_and_says_it_is_gated() -> None:
    out = run(node("n0"), gated(pod("held", cpu="1")), pod("free", cpu="1"))
    assert out.bound == {"default/free": "n0"}
    assert out.pending["default/held"].startswith("SchedulingGated:")
    assert "kueue.x-k8s.io/admission" in out.pending["default/held"]


def test_a_gated_pod_gets_no_decision_at_all() -> None:
    # No bind, no FailedScheduling condition or Event: the API server reports a gated pod itself.
    world = World.from_objects([("t", o) for o in (node("n0"), gated(pod("held", cpu="1")))])
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    about = [d for d in result.decisions if getattr(d, "pod", None) == "default/held"
             or getattr(d, "obj", None) == "default/held"]
    assert about == [] and "default/held" not in result.waiting


def test_a_gang_binds_when_its_ungated_members_meet_the_minimum() -> None:
    pods = [pod(f"g-{i}", cpu="1", group="g") for i in range(3)] + [gated(pod("g-3", cpu="1", group="g"))]
    out = run(node("n0"), podgroup("g", 3), *pods)
    assert sorted(out.bound) == [f"default/g-{i}" for i in range(3)]
    assert out.pending["default/g-3"].startswith("SchedulingGated:")


def test_a_gang_short_of_its_minimum_without_its_gated_members_waits_and_says_why() -> None:
    pods = [pod(f"g-{i}", cpu="1", group="g") for i in range(3)] + [gated(pod("g-3", cpu="1", group="g"))]
    out = run(node("n0"), podgroup("g", 4), *pods)
    assert out.bound == {}
    assert "waits for its gated members: 1 of its 4 pods" in out.pending["default/g-0"]


def test_removing_the_gate_wakes_the_gang() -> None:
    names = frozenset({"koordpy"})
    members = [pod(f"g-{i}", cpu="1", group="g") for i in range(3)]
    objects: list[dict[str, Any]] = [node("n0"), podgroup("g", 4), *members, gated(pod("g-3", cpu="1", group="g"))]
    state = SchedulerState()
    first = schedule(World.from_objects([("t", o) for o in objects]).snapshot(names), state, 0.0)
    assert first.binds == []
    assert any(isinstance(d, SetPodScheduledFalse) for d in first.decisions)
    # The same cluster a moment later, the gate gone (Kueue admitted the workload).
    objects[-1] = pod("g-3", cpu="1", group="g")
    second = schedule(World.from_objects([("t", o) for o in objects]).snapshot(names), state, 1.0)
    assert sorted(b.pod for b in second.binds) == [f"default/g-{i}" for i in range(4)]
    assert [d.obj for d in second.decisions if isinstance(d, Event) and d.reason == "Scheduled"] == [
        b.pod for b in second.binds if isinstance(b, Bind)]
