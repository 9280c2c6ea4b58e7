"""Issue 20: the ``PodGroupInitiallyScheduled`` condition koordpy writes on Kubernetes' own PodGroups
(``scheduling.k8s.io/v1beta1``), as kube-scheduler v1.37 writes it: True with reason ``Scheduled`` once
the group's minimum is bound, and terminal from then on; False with reason ``Unschedulable`` and why
the pods wait; False with reason ``SchedulerError`` for a group refused as kube-scheduler refuses it.
The whole conditions list is written (a merge patch replaces it), and only when it changes."""

from __future__ import annotations

from typing import Any

from koordpy.api.workload import INITIALLY_SCHEDULED, GroupCondition, WorkloadPodGroup
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult, GangStatusUpdate, SetPodScheduledFalse
from koordpy.core.dialects import upstream
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World, simulate
from tests.builders import node, priority_class
from tests.core.dialects.test_upstream import group, member

NAMES = frozenset({"koordpy"})


def world(*objects: dict[str, Any]) -> World:
    return World.from_objects([("t", o) for o in objects])


def updates(result: CycleResult) -> dict[str, GangStatusUpdate]:
    return {d.object_key: d for d in result.decisions if isinstance(d, GangStatusUpdate)}


def written(result: CycleResult, key: str = "default/train") -> GroupCondition:
    update = updates(result)[key]
    assert update.status.kind.group == "scheduling.k8s.io" and update.status.kind.version == "v1beta1"
    conditions = update.status.wire()["conditions"]
    assert isinstance(conditions, list)
    found = [c for c in conditions if c["type"] == INITIALLY_SCHEDULED]
    assert len(found) == 1
    c = found[0]
    return GroupCondition(type=c["type"], status=c["status"], reason=c["reason"], message=c["message"])


def with_condition(body: dict[str, Any], *conditions: dict[str, Any]) -> dict[str, Any]:
    body["metadata"]["generation"] = 3
    body["status"] = {"conditions": list(conditions)}
    return body


def test_initially_scheduled_is_true_with_reason_scheduled_once_min_count_is_bound() -> None:
    w = world(node("n0"), node("n1"), group(min_count=2), member("t-0"), member("t-1"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    assert len(result.binds) == 2
    assert written(result) == GroupCondition(type=INITIALLY_SCHEDULED, status="True", reason="Scheduled")
    wire = updates(result)["default/train"].status.wire()
    assert wire == {"conditions": [{"type": INITIALLY_SCHEDULED, "status": "True", "reason": "Scheduled",
                                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def test_initially_scheduled_is_false_unschedulable_with_the_waiting_message() -> None:
    w = world(node("n0"), group(min_count=2), member("t-0"), member("t-1"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    assert result.binds == []
    cond = written(result)
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message == result.waiting["default/t-0"] and cond.message


def test_a_gang_waiting_for_its_pods_to_exist_is_unschedulable_in_those_words() -> None:
    w = world(node("n0"), node("n1"), node("n2"), group(min_count=3), member("t-0"), member("t-1"))
    cond = written(schedule(w.snapshot(NAMES), SchedulerState(), w.now))
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message == ("waiting for minCount pods of PodGroup default/train to exist: 2 of minCount 3 "
                            "created")


def test_a_group_whose_pods_name_different_schedulers_gets_scheduler_error() -> None:
    w = world(node("n0"), node("n1"), group(min_count=1), member("t-0"), member("t-1", scheduler="default-scheduler"))
    cond = written(schedule(w.snapshot(NAMES), SchedulerState(), w.now))
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert "different schedulerNames (default-scheduler, koordpy)" in cond.message


def test_a_group_whose_pods_priority_differs_gets_scheduler_error() -> None:
    w = world(node("n0"), node("n1"), priority_class("high", 1000), group(min_count=2), member("t-0"),
              member("t-1", priority_class="high"))
    cond = written(schedule(w.snapshot(NAMES), SchedulerState(), w.now))
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert "pod default/t-1 has priority 1000 and the group 0" in cond.message


def test_a_group_with_resource_claims_is_scheduled_not_refused() -> None:
    claimed = group(min_count=1, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}])
    w = world(node("n0"), claimed, member("t-0"))
    cond = written(schedule(w.snapshot(NAMES), SchedulerState(), w.now))
    assert (cond.status, cond.reason) == ("True", "Scheduled")


def test_a_group_whose_pods_preemption_policy_differs_gets_scheduler_error() -> None:
    # Issue 29, item 5: as kube-scheduler's validatePodGroup with PodGroupPreemptionPolicy on.
    w = world(node("n0"), priority_class("never", 0, policy="Never"), group(min_count=1),
              member("t-0", priority_class="never"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    cond = written(result)
    assert (cond.status, cond.reason) == ("False", "SchedulerError")
    assert "pod default/t-0 has preemptionPolicy Never and the group PreemptLowerPriority" in cond.message
    # Its pods too, as kube-scheduler's failure handler writes a validation error (not Unschedulable).
    said = [d for d in result.decisions if isinstance(d, SetPodScheduledFalse)]
    assert [(d.pod, d.reason) for d in said] == [("default/t-0", "SchedulerError")]


def test_a_pod_that_waits_for_room_is_unschedulable() -> None:
    w = world(node("n0", cpu="1"), group(min_count=1), member("t-0", cpu="2"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    said = [d for d in result.decisions if isinstance(d, SetPodScheduledFalse)]
    assert [(d.pod, d.reason) for d in said] == [("default/t-0", "Unschedulable")]


def test_initially_scheduled_true_is_terminal() -> None:
    # Scheduled once (its pods since gone or recreated): a member that cannot be placed now does not
    # turn the condition back to False, as kube-scheduler never regresses it.
    done = with_condition(group(min_count=2), {"type": INITIALLY_SCHEDULED, "status": "True", "reason": "Scheduled",
                                               "message": "", "lastTransitionTime": "2025-12-01T00:00:00Z"})
    w = world(node("n0"), done, member("t-0"), member("t-1"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    # Held to minCount again (issue 29), room for one of two: both wait, and the condition stays True.
    assert result.binds == [] and len(result.waiting) == 2
    assert "default/train" not in updates(result)


def test_a_status_is_written_only_when_it_changes_and_keeps_its_transition_time() -> None:
    w = world(node("n0"), group(min_count=2), member("t-0"), member("t-1"))
    state = SchedulerState()
    first = schedule(w.snapshot(NAMES), state, w.now)
    w.apply(first)
    assert "default/train" in updates(first)
    w.now += 30
    again = w.stores[upstream.STORE]["default/train"]
    snap = w.snapshot(NAMES)
    members = list(snap.pods)
    # The next cycle finds the same: the object says so already, nothing to write.
    assert "default/train" not in updates(schedule(snap, state, w.now))
    assert upstream.group_status(again, members, {}, first.waiting, w.now, snap) is None
    # A new message, still False: written, with the time it first became False.
    moved = upstream.group_status(again, members, {}, {"default/t-0": "other words"}, w.now, snap)
    assert moved is not None
    [cond] = moved.conditions
    assert cond.message == "other words" and cond.last_transition_time == w.now - 30
    # Bound now: True, at this cycle's time.
    bound = upstream.group_status(again, members, {"default/t-0": "n0", "default/t-1": "n0"}, {}, w.now, snap)
    assert bound is not None and bound.conditions[0].status == "True"
    assert bound.conditions[0].last_transition_time == w.now


def test_other_conditions_are_written_back_and_the_generation_observed() -> None:
    # A merge patch of status replaces the whole list: DisruptionTarget (another writer's) must survive.
    disrupted = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "preempted", "lastTransitionTime": "2025-12-01T00:00:00Z", "observedGeneration": 2}
    w = world(node("n0"), with_condition(group(min_count=2), disrupted), member("t-0"), member("t-1"))
    wire = updates(schedule(w.snapshot(NAMES), SchedulerState(), w.now))["default/train"].status.wire()
    conditions = wire["conditions"]
    assert isinstance(conditions, list)
    assert conditions[0] == disrupted
    assert conditions[1]["type"] == INITIALLY_SCHEDULED and conditions[1]["observedGeneration"] == 3


def test_the_parsed_status_reads_back_as_it_is_written() -> None:
    # What the shells compare a write with (``status.written()``) spells the conditions as the wire does.
    cond = {"type": INITIALLY_SCHEDULED, "status": "False", "reason": "Unschedulable", "message": "no room",
            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}
    parsed = WorkloadPodGroup.from_raw(with_condition(group(min_count=2), cond))
    assert parsed.status.written() == {"conditions": [cond]}
    assert parsed.generation == 3


def test_simulate_writes_the_condition_on_the_podgroup() -> None:
    w = world(node("n0"), node("n1"), group(min_count=2), member("t-0"), member("t-1"))
    out = simulate(w)
    assert len(out.bound) == 2
    cond = w.stores[upstream.STORE]["default/train"].condition(INITIALLY_SCHEDULED)
    assert cond is not None and (cond.status, cond.reason) == ("True", "Scheduled")


def test_a_scheduler_error_for_two_schedulers_is_not_reworded() -> None:
    # kube-scheduler writes the same refusal in its words on the same group: koordpy leaves it, or the
    # two would rewrite the message in turn.
    theirs = with_condition(group(min_count=1), {"type": INITIALLY_SCHEDULED, "status": "False",
                                                 "reason": "SchedulerError", "message": "scheduler name mismatch",
                                                 "lastTransitionTime": "2025-12-01T00:00:00Z"})
    w = world(node("n0"), node("n1"), theirs, member("t-0"), member("t-1", scheduler="default-scheduler"))
    assert "default/train" not in updates(schedule(w.snapshot(NAMES), SchedulerState(), w.now))
