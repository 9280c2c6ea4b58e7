"""A job whose preemption waits for its victims to terminate (issue 21, goal 1: GangPreemptionBasic
tried its 100-pod gang again at each of the victims' ~3,000 watch events) is parked until they
are gone, then tried at once, without backoff; a victim that stops terminating (its eviction
failed) wakes it too, and so does room freed elsewhere that fits it."""

from __future__ import annotations

from typing import Any

from koordpy.controller.cache import Cache
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.decisions import CycleResult
from koordpy.core.gang import Job
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import Wake
from tests.builders import node, pod, podgroup, priority_class

NAMES = frozenset({"koordpy"})


class Live:
    """Watch events into the cache; each cycle carries out preemption as the live loop assumes it."""

    def __init__(self) -> None:
        self.cache, self.state, self.rv, self.now = Cache(), SchedulerState(), 0, 1_000_000.0
        self.raws: dict[str, dict[str, Any]] = {}

    def add(self, kind: str, raw: dict[str, Any]) -> None:
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        if kind == "Pod":
            self.raws[f"{raw['metadata']['namespace']}/{raw['metadata']['name']}"] = raw
        self.cache.observe(kind, "ADDED", raw)

    def delete(self, key: str) -> None:
        self.rv += 1
        ns, name = key.split("/")
        self.cache.observe("Pod", "DELETED", {"metadata": {"name": name, "namespace": ns,
                                                           "resourceVersion": str(self.rv)}})

    def cycle(self, after: float = 0.0) -> CycleResult:
        self.now += after
        result = schedule(self.cache.snapshot(NAMES), self.state, self.now)
        for d in result.binds:
            self.cache.assume(d.pod, d.node)
        for v in result.preempted:
            self.cache.assume_preempted(v.pod)
        for n in result.nominations:
            self.cache.assume_nominated(n.pod, n.node)
        return result


def world(extra_node: bool = False) -> Live:
    live = Live()
    live.add("PriorityClass", priority_class("high", 1000))
    for i in range(2):
        live.add("Node", node(f"n{i}", cpu="4"))
        live.add("Pod", pod(f"low-{i}", cpu="3", node_name=f"n{i}", scheduler="default-scheduler"))
    if extra_node:  # a third node, held by a pod of higher priority than the job: never a victim
        live.add("PriorityClass", priority_class("higher", 2000))
        live.add("Node", node("n2", cpu="4"))
        live.add("Pod", pod("high-2", cpu="3", node_name="n2", scheduler="default-scheduler",
                            priority_class="higher"))
    live.add("PodGroup", podgroup("g", 2))
    for i in range(2):
        live.add("Pod", pod(f"g-{i}", cpu="3", group="g", priority_class="high"))
    return live


def tries(monkeypatch: Any) -> list[str]:
    tried: list[str] = []
    real = Cycle._job

    def counting(cycle: Cycle, job: Job, preempt: bool = True) -> Wake | None:
        tried.append(job.id)
        return real(cycle, job, preempt)

    monkeypatch.setattr(Cycle, "_job", counting)
    return tried


def test_a_job_waiting_for_its_victims_is_not_tried_again_until_they_are_gone(monkeypatch: Any) -> None:
    live = world()
    tried = tries(monkeypatch)
    first = live.cycle()
    assert sorted(v.pod for v in first.preempted) == ["default/low-0", "default/low-1"]
    assert tried == ["default/g"]
    live.cycle()  # the victims terminate: the job cannot bind yet, and says so
    parked = live.state.view.queue.parked.get("default/g") if live.state.view else None
    assert parked is not None and parked.wake == "victims"
    assert set(parked.victims) == {"default/low-0", "default/low-1"}
    # Watch events that change nothing it waits for: it is not tried again.
    tried.clear()
    for i in range(5):
        live.add("Pod", pod(f"theirs-{i}", cpu="1", scheduler="other"))
        assert live.cycle(after=0.1).binds == []
    assert tried == []
    live.delete("default/low-0")
    live.cycle(after=0.1)
    assert tried == []  # one victim left
    live.delete("default/low-1")
    done = live.cycle(after=0.1)  # well within any backoff: tried at once
    assert tried == ["default/g"]
    assert sorted(b.pod for b in done.binds) == ["default/g-0", "default/g-1"]


def test_a_victim_whose_eviction_failed_wakes_the_job(monkeypatch: Any) -> None:
    live = world()
    tried = tries(monkeypatch)
    live.cycle()
    live.cycle()
    tried.clear()
    live.cache.forget_preempted("default/low-1")  # its condition or deletion did not go through
    live.cycle(after=0.1)
    assert tried == ["default/g"]  # woken: it decides again what to do about low-1


def test_room_freed_elsewhere_wakes_it_as_any_parked_job(monkeypatch: Any) -> None:
    live = world(extra_node=True)
    tried = tries(monkeypatch)
    first = live.cycle()
    assert len(first.preempted) == 2
    live.cycle()
    parked = live.state.view.queue.parked.get("default/g") if live.state.view else None
    assert parked is not None and parked.wake == "victims"
    tried.clear()
    assert set(parked.victims) == {"default/low-0", "default/low-1"}
    live.delete("default/high-2")  # not a victim: room on a node the job was not nominated to
    live.cycle(after=30.0)  # past the backoff
    assert tried == ["default/g"]


def test_a_pod_of_higher_priority_terminating_there_is_not_waited_for(monkeypatch: Any) -> None:
    # A pod of higher priority than the job, terminating on its nominated node because some other
    # preemption (kube-scheduler's, say) chose it, is not what the job waits for (the core's "waiting"
    # counts only victims of lower priority): its own victim gone, the job binds at once, as it did
    # when it was tried every cycle, rather than parked until that pod's long grace period ends.
    live = Live()
    live.add("PriorityClass", priority_class("high", 1000))
    live.add("PriorityClass", priority_class("higher", 2000))
    live.add("Node", node("n0", cpu="8"))
    theirs = pod("theirs", cpu="2", node_name="n0", scheduler="default-scheduler", priority_class="higher",
                 terminationGracePeriodSeconds=3600)
    theirs["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    theirs["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "PreemptionByScheduler"}]}
    live.add("Pod", theirs)
    live.add("Pod", pod("low-0", cpu="5", node_name="n0", scheduler="default-scheduler"))
    live.add("Pod", pod("p", cpu="5", priority_class="high"))
    tried = tries(monkeypatch)
    first = live.cycle()
    assert [v.pod for v in first.preempted] == ["default/low-0"]
    live.cycle()  # low-0 terminates: p waits for it
    tried.clear()
    live.delete("default/low-0")
    done = live.cycle(after=0.1)
    assert tried == ["default/p"]
    assert [b.pod for b in done.binds] == ["default/p"]


def test_a_nominated_node_the_pod_can_no_longer_use_is_not_waited_on(monkeypatch: Any) -> None:
    # Its victim's node cordoned (or tainted unreachable: its kubelet gone, the victim never finishes
    # terminating), the pod preempts again elsewhere, as kube-scheduler's does when its nominated node
    # is UnschedulableAndUnresolvable, rather than wait there for ever.
    live = Live()
    live.add("PriorityClass", priority_class("high", 1000))
    for i in range(2):
        live.add("Node", node(f"n{i}", cpu="4"))
        live.add("Pod", pod(f"low-{i}", cpu="3", node_name=f"n{i}", scheduler="default-scheduler"))
    live.add("Pod", pod("p", cpu="3", priority_class="high"))
    first = live.cycle()
    assert [(n.pod, n.node) for n in first.nominations] == [("default/p", "n0")]
    live.cycle()  # low-0 terminates: p waits for it
    cordoned = node("n0", cpu="4")
    cordoned["spec"] = {"unschedulable": True}
    live.add("Node", cordoned)
    again = live.cycle(after=1.0)
    assert [v.pod for v in again.preempted] == ["default/low-1"]
    assert [(n.pod, n.node) for n in again.nominations] == [("default/p", "n1")]
