"""Pod-spec fields kube-scheduler acts on that koordpy does not honour yet are refused, never dropped:
the pod stays pending with a condition and a FailedScheduling Event naming the field, and a gang
holding such a pod waits as a whole (koordpy.core.refusals; docs/reference.md lists every field)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.objects import Pod
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Event, SetPodScheduledFalse
from koordpy.core.gang import SchedulerState
from koordpy.core.refusals import CLAIMS, SCHEDULING_GROUP
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup, run

NAMES = frozenset({"koordpy"})


def claiming(p: dict[str, Any], *names: str) -> dict[str, Any]:
    p["spec"]["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": f"{n}-template"} for n in names or ("gpu",)]
    return p


def grouped(p: dict[str, Any], group: str = "workers") -> dict[str, Any]:
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


# -- ResourceClaims (kube-scheduler's DynamicResources) -------------------------------------------

def test_a_pod_with_resource_claims_is_never_bound_and_says_why() -> None:
    out = run(node("n0"), claiming(pod("dra", cpu="1"), "gpu", "nic"), pod("plain", cpu="1"))
    assert out.bound == {"default/plain": "n0"}
    assert out.pending["default/dra"].startswith(f"{CLAIMS}: pod default/dra has spec.resourceClaims (gpu, nic)")


def test_a_refused_pod_gets_a_condition_and_a_failed_scheduling_event_once() -> None:
    world = World.from_objects([("t", o) for o in (node("n0"), claiming(pod("dra", cpu="1")))])
    state = SchedulerState()
    first = schedule(world.snapshot(NAMES), state, world.now)
    conditions = [d for d in first.decisions if isinstance(d, SetPodScheduledFalse)]
    events = [d for d in first.decisions if isinstance(d, Event)]
    assert [c.pod for c in conditions] == ["default/dra"] and CLAIMS in conditions[0].message
    assert [(e.obj, e.type, e.reason) for e in events] == [("default/dra", "Warning", "FailedScheduling")]
    assert events[0].message == conditions[0].message
    assert first.binds == []
    # Once written, the same message is not written again; the pod stays parked.
    world.apply(first)
    second = schedule(world.snapshot(NAMES), state, world.now + 1)
    assert second.decisions == [] and second.binds == []


def test_a_gang_holding_a_pod_with_claims_waits_as_a_whole() -> None:
    pods = [pod(f"g-{i}", cpu="1", group="g") for i in range(3)] + [claiming(pod("g-3", cpu="1", group="g"))]
    out = run(node("n0"), podgroup("g", 3), *pods)
    assert out.bound == {}  # three members would meet minMember 3, but the gang is refused whole
    for i in range(4):
        message = out.pending[f"default/g-{i}"]
        assert message.startswith('GangGroup "default/g" waits as a whole: ') and CLAIMS in message
        assert "pod default/g-3 has spec.resourceClaims" in message


def test_claims_are_parsed_and_a_nameless_claim_is_refused_naming_the_field() -> None:
    assert Pod.from_raw(claiming(pod("p"), "a", "b")).resource_claims == ("a", "b")
    bad = pod("p")
    bad["spec"]["resourceClaims"] = [{"resourceClaimName": "x"}]
    with pytest.raises(ParseError, match=r"spec.resourceClaims\[0\].name.*required"):
        Pod.from_raw(bad)


def test_a_running_pod_with_claims_counts_on_its_node_as_any_other() -> None:
    # Bound by someone else (kube-scheduler allocated its claims): its requests hold room.
    out = run(node("n0", cpu="2"), claiming(pod("bound", cpu="2", node_name="n0")), pod("new", cpu="1"))
    assert out.bound == {}
    assert "Insufficient cpu" in out.pending["default/new"]


# -- Workload PodGroups (kube-scheduler's GangScheduling, spec.schedulingGroup) -------------------

def test_a_pod_in_a_workload_podgroup_is_refused_not_scheduled_alone() -> None:
    out = run(node("n0"), grouped(pod("w-0", cpu="1")), pod("plain", cpu="1"))
    assert out.bound == {"default/plain": "n0"}
    assert out.pending["default/w-0"].startswith(f"{SCHEDULING_GROUP}: pod default/w-0 belongs to PodGroup "
                                                 "'workers'")


def test_a_scheduling_group_named_by_another_field_is_refused_too() -> None:
    p = pod("w-0", cpu="1")
    p["spec"]["schedulingGroup"] = {"compositePodGroupName": "x"}
    assert Pod.from_raw(p).scheduling_group == "compositePodGroupName"
    assert SCHEDULING_GROUP in run(node("n0"), p).pending["default/w-0"]
