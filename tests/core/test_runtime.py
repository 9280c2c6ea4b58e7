"""Issue 33, items 3b and 3c: a job's minimum runtime protects it as a victim, and a job's preemption
delay holds its preemption back, in every dialect. Cases translated from KAI-Scheduler's
``minruntime_test.go`` (the victim filter and the scenario validator), ``resolver_test.go`` (a queue's
minimum runtime, up its parents), ``job_info_test.go`` ``TestPreemptionDelayEnd`` and ``preempt_test.go``
(a pending job within its delay, after it, and a running job with a delay as a victim)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from koordpy.core import dialects
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult, Event, Preempt
from koordpy.core.dialects.kai import queue_min_runtime
from koordpy.core.gang import resolve_gangs
from koordpy.core.runtime import duration
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup, priority_class

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
CLASSES = [priority_class("low", 1), priority_class("high", 100)]


def at(minutes: float) -> str:
    return (EPOCH + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds(minutes: float) -> float:
    return (EPOCH + timedelta(minutes=minutes)).timestamp()


def running(name: str, where: str, started: float | None, cpu: str = "8", **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu, node_name=where, scheduler="other", priority_class="low", **kw)
    p["metadata"]["creationTimestamp"] = at(0)
    p["status"] = {"phase": "Running", **({"startTime": at(started)} if started is not None else {})}
    return p


def pending(name: str, cpu: str = "8", created: float = 5, **kw: Any) -> dict[str, Any]:
    p = pod(name, cpu, priority_class="high", **kw)
    p["metadata"]["creationTimestamp"] = at(created)
    return p


def world(*objects: dict[str, Any] | list[dict[str, Any]]) -> World:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return World.from_objects([("test", o) for o in flat])


def cycle(w: World, minute: float) -> CycleResult:
    return schedule(w.snapshot(frozenset({"koordpy"})), SchedulerState(), seconds(minute))


def victims(result: CycleResult) -> list[str]:
    return sorted(d.pod for d in result.decisions if isinstance(d, Preempt))


MIN_10 = {"koordpy.io/min-runtime": "10m"}


# -- the victim filter (minruntime_test.go, preemptFilterFn) --------------------------------------


def test_a_protected_job_is_no_victim_and_its_pending_preemptor_says_why() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=2, annotations=MIN_10), pending("p"))
    out = cycle(w, 5)
    assert victims(out) == []
    assert "victim default/v is protected by its minimum runtime: runs for 3 min of its 10" in out.waiting["default/p"]
    assert out.next_deadline == seconds(12)  # tried again when the protection ends


def test_a_job_that_ran_longer_than_its_minimum_is_a_victim() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=0, annotations=MIN_10), pending("p", created=30))
    assert victims(cycle(w, 30)) == ["default/v"]


def test_a_job_with_no_start_time_is_not_protected() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=None, annotations=MIN_10), pending("p"))
    assert victims(cycle(w, 5)) == ["default/v"]


def test_protection_is_judged_again_at_each_time() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=2, annotations=MIN_10), pending("p"))
    assert victims(cycle(w, 11)) == []
    assert victims(cycle(w, 12)) == ["default/v"]


def test_an_unprotected_pod_is_taken_before_a_job_is_left_without_room() -> None:
    # Two nodes: the protected pod's and a free one's worth of an unprotected pod.
    w = world(CLASSES, node("n1"), node("n2"), running("v", "n1", started=2, annotations=MIN_10),
              running("u", "n2", started=2), pending("p"))
    assert victims(cycle(w, 5)) == ["default/u"]


def test_the_default_minimum_runtime_protects_jobs_that_set_none() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=2), pending("p"))
    snap = w.snapshot(frozenset({"koordpy"}))
    snap.default_min_runtime = 600.0
    out = schedule(snap, SchedulerState(), seconds(5))
    assert victims(out) == []
    assert "protected" in out.waiting["default/p"]


def test_a_bad_minimum_runtime_counts_as_zero_and_is_told() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=2, annotations={"koordpy.io/min-runtime": "ten"}),
              pending("p"))
    out = cycle(w, 5)
    assert victims(out) == ["default/v"]
    told = [d for d in out.decisions if isinstance(d, Event) and d.reason == "InvalidPreemptionSetting"]
    assert [(e.obj, "koordpy.io/min-runtime" in e.message) for e in told] == [("default/v", True)]


# -- the scenario validator (preemptScenarioValidatorFn): elastic gangs ----------------------------


def _elastic(preemptor_pods: int) -> World:
    """A protected gang of 4 bound members (minimum 2) filling four nodes; a higher-priority job of
    ``preemptor_pods`` pods needing a node each."""
    gang = [running(f"g-{i}", f"n{i}", started=2, group="g") for i in range(4)]
    wanted = [pending(f"p-{i}", group="p") for i in range(preemptor_pods)]
    return world(CLASSES, [node(f"n{i}") for i in range(4)], podgroup("g", 2, annotations=MIN_10), *gang,
                 podgroup("p", preemptor_pods), *wanted)


def test_an_elastic_protected_gang_gives_the_members_above_its_minimum() -> None:
    assert len(victims(cycle(_elastic(2), 5))) == 2


def test_an_elastic_protected_gang_is_not_taken_below_its_minimum() -> None:
    out = cycle(_elastic(3), 5)
    assert victims(out) == []
    assert "protected" in out.waiting["default/p-0"]


def test_a_protected_gang_at_its_minimum_is_no_victim() -> None:
    gang = [running(f"g-{i}", f"n{i}", started=2, group="g") for i in range(2)]
    w = world(CLASSES, node("n0"), node("n1"), podgroup("g", 2, annotations=MIN_10), *gang, pending("p"))
    assert victims(cycle(w, 5)) == []
    assert len(victims(cycle(w, 12))) == 1


# -- the resolver (resolver_test.go, getPreemptMinRuntime) ----------------------------------------


def kai_queue(name: str, parent: str = "", minimum: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentQueue"] = parent
    if minimum:
        spec["preemptMinRuntime"] = minimum
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def kai_group(name: str, queue: str = "", annotations: dict[str, str] | None = None, created: float = 0,
              **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "annotations": dict(annotations or {}),
                         "creationTimestamp": at(created)},
            "spec": {"minMember": 1, **({"queue": queue} if queue else {}), **spec}}


def _queues(*queues: dict[str, Any]) -> dict[str, Any]:
    from koordpy.api.kueue import KaiQueue
    return {q["metadata"]["name"]: KaiQueue.from_raw(q) for q in queues}


def test_a_queue_with_its_own_minimum_runtime() -> None:
    found = queue_min_runtime("leaf", _queues(kai_queue("top", minimum="1h"), kai_queue("leaf", "top", "5m")))
    assert found is not None and found.seconds == 300


def test_a_queue_inherits_its_parents_minimum_runtime() -> None:
    queues = _queues(kai_queue("top", minimum="1h"), kai_queue("mid", "top"), kai_queue("leaf", "mid"))
    found = queue_min_runtime("leaf", queues)
    assert found is not None and found.seconds == 3600
    mid = _queues(kai_queue("top", minimum="1h"), kai_queue("mid", "top", "2m"), kai_queue("leaf", "mid"))
    found = queue_min_runtime("leaf", mid)
    assert found is not None and found.seconds == 120


def test_a_top_level_queue_and_a_missing_one() -> None:
    found = queue_min_runtime("top", _queues(kai_queue("top", minimum="30s")))
    assert found is not None and found.seconds == 30
    assert queue_min_runtime("nowhere", _queues(kai_queue("top", minimum="30s"))) is None
    assert queue_min_runtime("top", _queues(kai_queue("top"))) is None  # none set: the default


def test_a_bad_or_negative_duration_counts_as_zero() -> None:
    assert duration("soon", "x").seconds == 0 and duration("soon", "x").problem
    assert duration("-5m", "x").seconds == 0 and duration("-5m", "x").problem
    assert duration("1h30m", "x").seconds == 5400 and duration("1h30m", "x").problem is None


def _kai_runtime(*objects: dict[str, Any], default: float = 0.0) -> float | None:
    snap = world(CLASSES, node("n1"), *objects).snapshot(frozenset({"koordpy"}))
    snap.default_min_runtime = default
    gangs, _ = resolve_gangs(snap)
    runtime, _ = dialects.runtime(gangs["default/g"], snap)
    return runtime.protected_until


def test_a_kai_job_takes_its_queues_minimum_from_its_last_start_annotation() -> None:
    member = running("m", "n1", started=1, annotations={"pod-group-name": "g"})
    group = kai_group("g", "leaf", {"kai.scheduler/last-start-timestamp": at(3)})
    until = _kai_runtime(kai_queue("top", minimum="10m"), kai_queue("leaf", "top"), group, member)
    assert until == seconds(13)
    # No such queue: the default, from the members' start when the PodGroup has no stamp.
    assert _kai_runtime(kai_group("g", "gone"), member, default=60) == seconds(2)


# -- the preemption delay (job_info_test.go, TestPreemptionDelayEnd) --------------------------------


def _kai_delay_end(group: dict[str, Any]) -> float | None:
    member = pending("m", annotations={"pod-group-name": "g"})
    snap = world(CLASSES, node("n1"), group, member).snapshot(frozenset({"koordpy"}))
    gangs, _ = resolve_gangs(snap)
    return dialects.delay(gangs["default/g"], snap).ends


def test_no_delay_and_a_zero_delay_end_nowhere() -> None:
    assert _kai_delay_end(kai_group("g")) is None
    assert _kai_delay_end(kai_group("g", preemptionDelay="0s")) is None


def test_the_delay_counts_from_a_later_eviction() -> None:
    group = kai_group("g", annotations={"kai.scheduler/last-eviction-timestamp": at(20)}, created=10,
                      preemptionDelay="5m")
    assert _kai_delay_end(group) == seconds(25)


def test_an_eviction_before_the_creation_is_ignored() -> None:
    group = kai_group("g", annotations={"kai.scheduler/last-eviction-timestamp": at(1)}, created=10,
                      preemptionDelay="5m")
    assert _kai_delay_end(group) == seconds(15)


def test_the_kai_annotation_stands_in_for_the_spec() -> None:
    group = kai_group("g", annotations={"kai.scheduler/preemption-delay": "2m"}, created=10)
    assert _kai_delay_end(group) == seconds(12)


# -- the delay in preemption (preempt_test.go) ------------------------------------------------------


DELAY_3 = {"koordpy.io/preemption-delay": "3m"}


def test_a_pending_job_within_its_delay_does_not_preempt() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=0), pending("p", created=5, annotations=DELAY_3))
    out = cycle(w, 6)
    assert victims(out) == []
    assert "would preempt in 2 min (at 2026-01-01T00:08:00Z)" in out.waiting["default/p"]
    assert out.next_deadline == seconds(8)


def test_a_pending_job_whose_delay_passed_preempts() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=0), pending("p", created=5, annotations=DELAY_3))
    assert victims(cycle(w, 8)) == ["default/v"]


def test_a_running_job_with_a_delay_is_still_a_victim() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=0, annotations=DELAY_3), pending("p", created=5))
    assert victims(cycle(w, 5.1)) == ["default/v"]


def test_free_room_is_taken_at_once_within_the_delay() -> None:
    w = world(CLASSES, node("n1"), node("n2"), running("v", "n1", started=0),
              pending("p", created=5, annotations=DELAY_3))
    out = cycle(w, 5.1)
    assert [b.node for b in out.binds] == ["n2"] and victims(out) == []


def test_the_default_delay_holds_back_jobs_that_set_none() -> None:
    w = world(CLASSES, node("n1"), running("v", "n1", started=0), pending("p", created=5))
    snap = w.snapshot(frozenset({"koordpy"}))
    snap.default_preemption_delay = 60.0
    out = schedule(snap, SchedulerState(), seconds(5.5))
    assert victims(out) == [] and "would preempt in 30 s" in out.waiting["default/p"]


def test_a_gangs_delay_on_its_podgroup_holds_back_its_preemption() -> None:
    # Koordinator's (scheduler-plugins') PodGroup carries koordpy's annotation; its creation anchors it.
    group = podgroup("p", 1, annotations=DELAY_3)
    group["metadata"]["creationTimestamp"] = at(5)
    w = world(CLASSES, node("n1"), running("v", "n1", started=0), group, pending("p-0", created=5, group="p"))
    assert victims(cycle(w, 6)) == []
    assert victims(cycle(w, 8)) == ["default/v"]


def test_a_recreated_member_restarts_the_delay() -> None:
    # The gang's object is old; its pending member was created (recreated after an eviction) at 10.
    group = podgroup("p", 1, annotations=DELAY_3)
    group["metadata"]["creationTimestamp"] = at(0)
    w = world(CLASSES, node("n1"), running("v", "n1", started=0), group, pending("p-0", created=10, group="p"))
    assert victims(cycle(w, 11)) == []
    assert victims(cycle(w, 13)) == ["default/v"]


@pytest.mark.parametrize("policy", ["once-satisfied", "waiting-and-running"])
def test_members_beyond_a_met_minimum_wait_out_the_delay_and_the_cycle_comes_back_for_them(policy: str) -> None:
    # Gang p (minimum 1) runs one member; its second waits for the room of a lower-priority pod, as a
    # pod of its own (once-satisfied) or with its running member counted (waiting-and-running: not
    # parked, as its gang's minimum holds). Either is woken when the delay ends.
    group = podgroup("p", 1, annotations={**DELAY_3, "gang.scheduling.koordinator.sh/match-policy": policy})
    group["metadata"]["creationTimestamp"] = at(5)
    first = running("p-0", "n0", started=5, group="p")
    first["spec"]["priorityClassName"] = "high"
    w = world(CLASSES, node("n0"), node("n1"), running("v", "n1", started=0), group, first,
              pending("p-1", created=5, group="p"))
    out = cycle(w, 6)
    assert victims(out) == [] and "would preempt in 2 min" in out.waiting["default/p-1"]
    assert out.next_deadline == seconds(8)
    assert victims(cycle(w, 8)) == ["default/v"]


# -- review (issue 33, items 3b/3c) ------------------------------------------------------------------


def test_two_preemptors_of_one_cycle_take_no_more_of_an_elastic_gang_than_it_holds_above_its_minimum() -> None:
    # Gang g: 4 bound members of minimum 2, protected; two lone higher-priority pods, each needing a
    # node. Together they may take 2 members, not 2 each (the second would break g's minimum).
    gang = [running(f"g-{i}", f"n{i}", started=2, group="g") for i in range(4)]
    w = world(CLASSES, [node(f"n{i}") for i in range(4)], podgroup("g", 2, annotations=MIN_10), *gang,
              pending("a"), pending("b"), pending("c"))
    assert len(victims(cycle(w, 5))) == 2


def test_a_protected_gangs_last_start_is_its_live_members_not_one_terminating() -> None:
    # The job restarted whole at minute 20 (its members started then); a member of the run before,
    # started at minute 0, is still terminating on n2. Its start is no longer the job's.
    old = running("g-old", "n2", started=0, group="g")
    old["metadata"]["deletionTimestamp"] = at(21)
    gang = [running(f"g-{i}", f"n{i}", started=20, group="g") for i in range(2)]
    w = world(CLASSES, [node(f"n{i}") for i in range(3)], podgroup("g", 2, annotations=MIN_10), *gang, old,
              pending("p"))
    out = cycle(w, 25)
    assert victims(out) == []
    assert "protected" in out.waiting["default/p"]


def test_a_bad_minimum_runtime_is_told_once_not_every_cycle() -> None:
    # The job cannot fit anyway; a node added each cycle has it tried (and preemption read) again.
    state = SchedulerState()
    told = []
    for minute in (5, 6, 7):
        w = world(CLASSES, node("n1"), node("n2"), node(f"x{minute}", cpu="1"),
                  running("v", "n1", started=2, annotations={"koordpy.io/min-runtime": "ten"}),
                  running("u", "n2", started=2), pending("p", cpu="16"))
        out = schedule(w.snapshot(frozenset({"koordpy"})), state, seconds(minute))
        told += [d for d in out.decisions if isinstance(d, Event) and d.reason == "InvalidPreemptionSetting"]
    assert len(told) == 1


def test_no_shield_is_built_when_nothing_sets_a_minimum_runtime() -> None:
    from koordpy.core.cycle import Cycle
    w = world(CLASSES, node("n1"), running("v", "n1", started=2), pending("p"))
    c = Cycle(w.snapshot(frozenset({"koordpy"})), SchedulerState(), seconds(5))
    assert c.preemptor._shielded() is None


def test_a_protection_that_would_not_make_room_anyway_is_not_what_the_preemptor_waits_for() -> None:
    # One node: even with the protected pod gone, a gang of two pods of a node each cannot fit.
    w = world(CLASSES, node("n1"), running("v", "n1", started=2, annotations=MIN_10),
              podgroup("p", 2), pending("p-0", group="p"), pending("p-1", group="p"))
    out = cycle(w, 5)
    assert victims(out) == []
    assert "protected" not in out.waiting["default/p-0"]
    assert out.next_deadline != seconds(12)


def test_no_gang_is_asked_its_minimum_runtime_when_nothing_sets_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # The usual cluster: no default, no annotation, no queue: a preemption costs no question per gang.
    from koordpy.core.cycle import Cycle
    gang = [running(f"g-{i}", f"n{i}", started=2, group="g") for i in range(2)]
    w = world(CLASSES, node("n0"), node("n1"), podgroup("g", 2), *gang, pending("p"))
    c = Cycle(w.snapshot(frozenset({"koordpy"})), SchedulerState(), seconds(5))

    def asked(*_: object) -> None:
        raise AssertionError("a gang was asked its minimum runtime")

    monkeypatch.setattr(dialects, "runtime", asked)
    assert c.preemptor._shielded() is None


# koordpy never writes KAI's stamps: a stamp KAI wrote before koordpy took over does not stand for
# what happened since.


def test_a_kai_job_restarted_since_its_last_start_stamp_counts_from_its_members_start() -> None:
    members = [running(f"m-{i}", "n1", started=20, cpu="1", annotations={"pod-group-name": "g"}) for i in range(2)]
    group = kai_group("g", "leaf", {"kai.scheduler/last-start-timestamp": at(0)})
    until = _kai_runtime(kai_queue("top", minimum="10m"), kai_queue("leaf", "top"), group, *members)
    assert until == seconds(30)


def test_a_kai_job_whose_members_were_recreated_counts_its_delay_from_them() -> None:
    member = pending("m", created=20, annotations={"pod-group-name": "g"})
    snap = world(CLASSES, node("n1"), kai_group("g", created=0, preemptionDelay="5m"), member).snapshot(
        frozenset({"koordpy"}))
    gangs, _ = resolve_gangs(snap)
    assert dialects.delay(gangs["default/g"], snap).ends == seconds(25)


def test_a_gang_with_a_bad_minimum_runtime_and_a_bad_delay_is_told_both_once() -> None:
    bad = {"koordpy.io/min-runtime": "ten", "koordpy.io/preemption-delay": "soon"}
    state = SchedulerState()
    told = []
    for minute in (5, 6, 7):
        w = world(CLASSES, node("n1"), node(f"x{minute}", cpu="1"), running("v", "n1", started=2),
                  podgroup("p", 1, annotations=bad), pending("p-0", group="p"))
        out = schedule(w.snapshot(frozenset({"koordpy"})), state, seconds(minute))
        told += [d.message for d in out.decisions if isinstance(d, Event) and d.reason == "InvalidPreemptionSetting"]
    assert sorted("min-runtime" in m for m in told) == [False, True]
