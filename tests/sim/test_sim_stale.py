"""Stale gangs over time in ``koordpy simulate`` (issue 33 item 1): the clock runs to the end of the
grace and the rest of the gang is listed under ``"evicted"``; a replacement that binds inside the
grace clears it; a job's negative grace only reports; a restart reads stale-since back from where
the gang's dialect keeps it; a member whose node's taint outlasts its toleration is lost then."""

from __future__ import annotations

from typing import Any

from koordpy.api.raw import rfc3339
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Annotate, Evict
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import DEFAULT_EPOCH, SimulationResult, World, simulate
from tests.builders import node, pod, podgroup

STALE_SINCE = "koordpy.io/stale-since"
NAMES = frozenset({"koordpy"})


def running(name: str, node_name: str, group: str | None = "job", **kw: Any) -> dict[str, Any]:
    raw = pod(name, cpu="4", group=group, node_name=node_name, **kw)
    raw["status"] = {"phase": "Running"}
    return raw


def out_of_cpu(name: str, node_name: str) -> dict[str, Any]:
    raw = pod(name, cpu="4", group="job", node_name=node_name)
    raw["status"] = {"phase": "Failed", "reason": "OutOfcpu", "message": "Pod was rejected: Node didn't have "
                     "enough resource: cpu"}
    return raw


def world(*objects: dict[str, Any]) -> World:
    return World.from_objects([("test", o) for o in objects])


def run(*objects: dict[str, Any], grace: float | None = None) -> SimulationResult:
    w = world(*objects)
    return simulate(w) if grace is None else simulate(w, stale_grace=grace)


def reasons(result: SimulationResult) -> list[str]:
    return [e.reason for e in result.events if e.reason in ("GangStale", "StaleGangEvicted")]


NODES = [node(f"n{i}", cpu="4") for i in range(3)]


def test_a_gang_with_a_member_refused_out_of_cpu_is_evicted_whole_after_the_grace() -> None:
    # The kubelet refused job-2 at admission (a race with another scheduler): the gang runs 2 of its 3.
    w = world(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-2", "n2"))
    start = w.now
    result = simulate(w)
    assert result.evicted == {"default/job-0": "StaleGangEviction", "default/job-1": "StaleGangEviction"}
    assert result.to_json()["evicted"] == result.evicted
    assert result.preempted == []
    assert reasons(result) == ["GangStale", "StaleGangEvicted"]
    stale, gone = [e for e in result.events if e.reason in ("GangStale", "StaleGangEvicted")]
    assert stale.message == (f"gang default/job is stale since {rfc3339(start)}: 2 members running, minimum 3; "
                             f"its running members are evicted at {rfc3339(start + 60)} unless replacements bind")
    assert "for its grace of 60s" in gone.message
    assert w.now == start + 60 + 30  # the clock ran to the grace's end, then the evicted pods' grace period


def test_the_evicted_gang_is_listed_in_the_table() -> None:
    import io

    from koordpy.cli.simulate import print_table
    result = run(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"),
                 out_of_cpu("job-2", "n2"))
    out = io.StringIO()
    print_table(result, out)
    assert "default/job-0" in out.getvalue() and "Evicted" in out.getvalue()
    assert out.getvalue().endswith("0 bound, 0 pending, 0 preempted, 2 evicted\n")


def test_a_replacement_that_binds_inside_the_grace_makes_the_gang_whole_again() -> None:
    # job-2's replacement waits 30 s for n2, which a pod of another scheduler holds while it
    # terminates; then it binds, inside the 60 s grace: nothing is evicted, stale-since is cleared.
    leaving = pod("other", cpu="4", node_name="n2", scheduler="default-scheduler",
                  terminationGracePeriodSeconds=30)
    leaving["metadata"]["deletionTimestamp"] = rfc3339(DEFAULT_EPOCH + 30)
    w = world(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"),
              out_of_cpu("job-2", "n2"), leaving, pod("job-2b", cpu="4", group="job"))
    result = simulate(w)
    assert result.evicted == {}
    assert result.bound == {"default/job-2b": "n2"}
    assert reasons(result) == ["GangStale"]
    assert STALE_SINCE not in w.stores["podgroups"]["default/job"].annotations  # written, then cleared


def test_a_replacement_that_comes_too_late_finds_the_gang_evicted() -> None:
    # The same with the other pod terminating for 200 s: the grace ends first, and the replacement
    # then waits for the whole gang (its controller's new pods) to come back.
    leaving = pod("other", cpu="4", node_name="n2", scheduler="default-scheduler",
                  terminationGracePeriodSeconds=200)
    leaving["metadata"]["deletionTimestamp"] = rfc3339(DEFAULT_EPOCH + 200)
    result = run(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"),
                 out_of_cpu("job-2", "n2"), leaving, pod("job-2b", cpu="4", group="job"))
    assert set(result.evicted) == {"default/job-0", "default/job-1"}
    assert "default/job-2b" in result.pending


def test_a_job_with_a_negative_grace_is_only_reported() -> None:
    never = podgroup("job", 3, annotations={"koordpy.io/staleness-grace-period": "-1s"})
    result = run(*NODES, never, running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-2", "n2"))
    assert result.evicted == {}
    [told] = [e for e in result.events if e.reason == "GangStale"]
    assert told.type == "Warning" and "reported only, never evicted" in told.message


def test_the_setting_is_the_grace_of_jobs_without_their_own() -> None:
    objs = [*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-2", "n2")]
    assert run(*objs, grace=-1).evicted == {}
    assert set(run(*objs, grace=5).evicted) == {"default/job-0", "default/job-1"}


def test_a_restart_keeps_the_clock_from_the_gang_object() -> None:
    objs = [*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-2", "n2")]
    w = world(*objs)
    t0 = DEFAULT_EPOCH + 100
    first = schedule(w.snapshot(NAMES), SchedulerState(), t0)
    assert not first.evicted and first.next_deadline == t0 + 60
    w.apply(first)  # the stale-since is written on the PodGroup
    assert w.stores["podgroups"]["default/job"].annotations[STALE_SINCE] == rfc3339(t0)
    # A new scheduler (no memory) 61 s later: the clock read from the object has run out.
    again = schedule(w.snapshot(NAMES), SchedulerState(), t0 + 61)
    assert {d.pod for d in again.evicted} == {"default/job-0", "default/job-1"}
    assert not [e for e in again.decisions if getattr(e, "reason", "") == "GangStale"]  # told once, before
    # Without the object's word, the new scheduler would start the clock over.
    fresh = schedule(world(*objs).snapshot(NAMES), SchedulerState(), t0 + 61)
    assert not fresh.evicted and fresh.next_deadline == t0 + 121


def annotation_gang(name: str, node_name: str, *, phase: str = "Running", reason: str = "") -> dict[str, Any]:
    raw = pod(name, cpu="4", node_name=node_name, annotations={
        "gang.scheduling.koordinator.sh/name": "job", "gang.scheduling.koordinator.sh/min-available": "3"})
    raw["status"] = {"phase": phase, **({"reason": reason} if reason else {})}
    return raw


def test_a_gang_with_no_object_keeps_its_stale_since_on_its_live_members() -> None:
    objs = [*NODES, annotation_gang("job-0", "n0"), annotation_gang("job-1", "n1"),
            annotation_gang("job-2", "n2", phase="Failed", reason="OutOfmemory")]
    w = world(*objs)
    t0 = DEFAULT_EPOCH + 100
    first = schedule(w.snapshot(NAMES), SchedulerState(), t0)
    marks = [d for d in first.decisions if isinstance(d, Annotate)]
    assert {(d.pod, d.key, d.value) for d in marks} == {("default/job-0", STALE_SINCE, rfc3339(t0)),
                                                        ("default/job-1", STALE_SINCE, rfc3339(t0))}
    w.apply(first)
    again = schedule(w.snapshot(NAMES), SchedulerState(), t0 + 60)
    assert {d.pod for d in again.decisions if isinstance(d, Evict)} == {"default/job-0", "default/job-1"}


def test_a_member_on_a_node_whose_taint_outlasts_its_toleration_is_lost_then() -> None:
    # n1 is unreachable since the start; job-1 tolerates that for 100 s (the DefaultTolerationSeconds
    # shape): the gang is whole until then, stale from then, evicted 60 s later.
    tainted = node("n1", cpu="4")
    tainted["spec"] = {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                                   "timeAdded": rfc3339(DEFAULT_EPOCH)}]}
    tolerate = [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 100}]
    w = world(node("n0", cpu="4"), tainted, podgroup("job", 2), running("job-0", "n0"),
              running("job-1", "n1", tolerations=tolerate))
    first = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    assert first.next_deadline == DEFAULT_EPOCH + 100 and not first.evicted
    result = simulate(w)
    assert result.evicted == {"default/job-0": "StaleGangEviction", "default/job-1": "StaleGangEviction"}
    [told] = [e for e in result.events if e.reason == "GangStale"]
    assert f"stale since {rfc3339(DEFAULT_EPOCH + 100)}" in told.message


def test_a_workload_podgroup_keeps_its_stale_since_in_a_gang_stale_condition() -> None:
    # Kubernetes' own PodGroup: the condition GangStale (True, lastTransitionTime = since) is both
    # what a user reads and the clock a new scheduler reads back; removed once the gang is whole.
    from tests.core.dialects.test_upstream import group, member

    def upstream(name: str, node_name: str, phase: str, reason: str = "") -> dict[str, Any]:
        raw = member(name, cpu="4", node_name=node_name)
        raw["status"] = {"phase": phase, **({"reason": reason} if reason else {})}
        return raw

    train = group(min_count=3)
    objs = [*NODES, train, upstream("t-0", "n0", "Running"), upstream("t-1", "n1", "Running"),
            upstream("t-2", "n2", "Failed", "OutOfcpu")]
    w = world(*objs)
    t0 = DEFAULT_EPOCH + 100
    first = schedule(w.snapshot(NAMES), SchedulerState(), t0)
    w.apply(first)
    [stale] = [c for c in w.stores["workload_podgroups"]["default/train"].conditions if c.type == "GangStale"]
    assert (stale.status, stale.reason, stale.last_transition_time) == ("True", "BelowMinimum", t0)
    again = schedule(w.snapshot(NAMES), SchedulerState(), t0 + 61)
    assert {d.pod for d in again.evicted} == {"default/t-0", "default/t-1"}
    # Both conditions stand: PodGroupInitiallyScheduled, written in the same cycle, kept.
    types = [c.type for c in w.stores["workload_podgroups"]["default/train"].conditions]
    assert sorted(types) == ["GangStale", "PodGroupInitiallyScheduled"]
    # The same group whole again (a replacement bound meanwhile): the condition goes, the other stays.
    done = {**train, "status": {"conditions": [stale_wire(t0), scheduled_wire(t0)]}}
    whole = world(*NODES, done, upstream("t-0", "n0", "Running"), upstream("t-1", "n1", "Running"),
                  upstream("t-3", "n2", "Running"))
    whole.apply(schedule(whole.snapshot(NAMES), SchedulerState(), t0 + 10))
    assert [c.type for c in whole.stores["workload_podgroups"]["default/train"].conditions] == \
        ["PodGroupInitiallyScheduled"]


def scheduled_wire(since: float) -> dict[str, Any]:
    return {"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled", "message": "",
            "lastTransitionTime": rfc3339(since)}


def stale_wire(since: float) -> dict[str, Any]:
    return {"type": "GangStale", "status": "True", "reason": "BelowMinimum", "message": "m",
            "lastTransitionTime": rfc3339(since)}
