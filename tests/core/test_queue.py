"""The scheduling queue's requeue rules (issue 10), on the live path: watch events into the
controller's cache, a snapshot with its changes, the core's cycle with its standing view.

A job that failed is parked (the unschedulable queue) and tried again only when an event could
make it fit: a node added, a pod deleted where its pods fit, its own gang or PodGroup changed; not
on unrelated events. Woken for room within its backoff, it waits in the backoff queue first; and
after FLUSH_SECONDS parked it is tried whatever happened."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from koordpy.controller.cache import Cache
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.decisions import CycleResult
from koordpy.core.gang import Job
from koordpy.core.queue import BACKOFF_INITIAL, BACKOFF_MAX, FLUSH_SECONDS
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import Wake
from tests.builders import node, pod, podgroup

NAMES = frozenset({"koordpy"})
T0 = 1_000_000.0


class Queue:
    """A cache and a scheduler state driven as the live loop drives them, counting which jobs run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cache = Cache()
        self.state = SchedulerState()
        self.rv = 0
        self.now = T0
        self.tried: list[str] = []
        real = Cycle._job

        def counting(cycle: Cycle, job: Job, preempt: bool = True) -> Wake | None:
            self.tried.append(job.id)
            return real(cycle, job, preempt)

        monkeypatch.setattr(Cycle, "_job", counting)

    def add(self, kind: str, raw: dict[str, Any], event: str = "ADDED") -> None:
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        self.cache.observe(kind, event, raw)

    def cycle(self, after: float = 0.0) -> CycleResult:
        self.now += after
        self.tried.clear()
        result = schedule(self.cache.snapshot(NAMES), self.state, self.now)
        for bind in result.binds:
            self.cache.assume(bind.pod, bind.node)
        return result


@pytest.fixture
def q(monkeypatch: pytest.MonkeyPatch) -> Queue:
    queue = Queue(monkeypatch)
    for i in range(2):
        queue.add("Node", node(f"n{i}", cpu="8"))
    queue.add("PodGroup", podgroup("big", 3))
    for i in range(3):
        queue.add("Pod", pod(f"big-{i}", cpu="8", group="big"))
    result = queue.cycle()
    assert queue.tried == ["default/big"] and not result.binds  # three whole nodes, two exist
    assert queue.cycle().queues == {"active": 0, "backoff": 0, "unschedulable": 3}
    assert queue.tried == []
    return queue


def test_a_parked_gang_is_not_woken_by_unrelated_events(q: Queue) -> None:
    # Another gang arrives and is placed; its PodGroup changes; a node's heartbeat; a pod of
    # another scheduler takes room.
    q.add("PodGroup", podgroup("small", 1))
    q.add("Pod", pod("small-0", cpu="1", group="small"))
    assert q.cycle().binds and q.tried == ["default/small"]
    q.add("PodGroup", podgroup("small", 1, timeout=30), "MODIFIED")
    q.add("Node", node("n0", cpu="8"), "MODIFIED")
    q.add("Pod", pod("foreign", cpu="2", node_name="n1", scheduler="other"))
    result = q.cycle(after=60)
    assert "default/big" not in q.tried
    assert result.queues["unschedulable"] == 3


def test_a_parked_gang_wakes_when_a_node_is_added(q: Queue) -> None:
    q.add("Node", node("n2", cpu="8"))
    result = q.cycle()
    assert q.tried == ["default/big"] and len(result.binds) == 3


def test_a_parked_gang_wakes_when_its_podgroup_changes(q: Queue) -> None:
    q.add("PodGroup", podgroup("big", 2), "MODIFIED")  # it now needs two: those fit
    result = q.cycle()
    assert q.tried == ["default/big"] and len(result.binds) == 2


def test_a_parked_gang_wakes_when_its_own_pod_changes(q: Queue) -> None:
    q.add("Pod", pod("big-2", cpu="8", group="big"), "DELETED")
    q.add("PodGroup", podgroup("big", 2), "MODIFIED")
    q.cycle()
    assert q.tried == ["default/big"]


def test_a_pod_deleted_where_it_fits_wakes_it_after_its_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(monkeypatch)
    for i in range(3):
        queue.add("Node", node(f"n{i}", cpu="8"))
    queue.add("Pod", pod("foreign", cpu="8", node_name="n2", scheduler="other"))
    queue.add("PodGroup", podgroup("big", 3))
    for i in range(3):
        queue.add("Pod", pod(f"big-{i}", cpu="8", group="big"))
    queue.cycle()
    assert queue.tried == ["default/big"]
    queue.add("Pod", pod("foreign", cpu="8", node_name="n2", scheduler="other"), "DELETED")
    # Woken a moment after it failed: it backs off (kube-scheduler's initial 1 s), and the cycle
    # says when to come back.
    result = queue.cycle(after=0.2)
    assert queue.tried == [] and result.queues == {"active": 0, "backoff": 3, "unschedulable": 0}
    assert result.next_deadline == pytest.approx(T0 + BACKOFF_INITIAL)
    result = queue.cycle(after=BACKOFF_INITIAL)
    assert queue.tried == ["default/big"] and len(result.binds) == 3


def test_room_freed_where_it_cannot_fit_does_not_wake_it(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(monkeypatch)
    queue.add("Node", node("n0", cpu="8"))
    queue.add("Node", node("small", cpu="2"))
    queue.add("Pod", pod("tiny", cpu="1", node_name="small", scheduler="other"))
    queue.add("PodGroup", podgroup("big", 2))
    for i in range(2):
        queue.add("Pod", pod(f"big-{i}", cpu="8", group="big"))
    queue.cycle()
    queue.add("Pod", pod("tiny", cpu="1", node_name="small", scheduler="other"), "DELETED")
    assert queue.cycle(after=BACKOFF_MAX).queues["unschedulable"] == 2 and queue.tried == []


def test_backoff_doubles_with_each_failure_up_to_its_maximum(monkeypatch: pytest.MonkeyPatch) -> None:
    queue = Queue(monkeypatch)
    queue.add("Node", node("n0", cpu="8"))
    queue.add("PodGroup", podgroup("big", 2))
    for i in range(2):
        queue.add("Pod", pod(f"big-{i}", cpu="8", group="big"))
    queue.cycle()
    waits = []
    for n in range(6):  # room appears again and again, never enough
        queue.add("Pod", pod(f"r{n}", cpu="1", node_name="n0", scheduler="other"))
        queue.cycle()
        queue.add("Pod", pod(f"r{n}", cpu="1", node_name="n0", scheduler="other"), "DELETED")
        result = queue.cycle()
        assert queue.tried == [] and result.next_deadline is not None
        waits.append(result.next_deadline - queue.now)
        queue.cycle(after=waits[-1])
        assert queue.tried == ["default/big"]
    assert [round(w) for w in waits] == [1, 2, 4, 8, 10, 10]


def test_a_job_parked_for_five_minutes_is_tried_again(q: Queue) -> None:
    q.cycle(after=FLUSH_SECONDS - 1)
    assert q.tried == []
    q.cycle(after=1)
    assert q.tried == ["default/big"]
    q.cycle(after=1)
    assert q.tried == []  # and parked again


def test_the_queue_is_its_own_room_and_reads_time_only_from_what_it_is_given() -> None:
    """koordpy.core.queue on its own, with no cycle: a parked job stays parked while nothing it waits
    for happens, waits out its backoff when woken, and is flushed after FLUSH_SECONDS, all by the
    ``now`` passed in; the view's jobs are its jobs, in queue order."""
    state = SchedulerState()
    snap = Cache()
    snap.observe("Node", "ADDED", {**node("n0", cpu="8"), "metadata": {"name": "n0", "resourceVersion": "1"}})
    schedule(snap.snapshot(NAMES), state, 0.0)
    view = state.view
    assert view is not None and view.cluster is not None
    jobs = [*view.group_jobs.values(), *view.single_jobs.values()]
    assert view.queue.jobs() == sorted(jobs, key=Job.queue_key)
    lone = Job("default/x", [], [], 0, 0.0)
    view.queue.park(lone, {"default/x": "waits"}, None, {}, "any-room", now=T0)
    assert view.queue.still_parked(lone, T0 + 1) is view.queue.parked["default/x"]
    room = np.zeros(len(view.cluster.resources), dtype=np.int64)
    view.cluster.change(0, room, 1)
    view.cluster.change(0, room, -1, frees=True)  # room freed on n0
    assert view.queue.still_parked(lone, T0 + BACKOFF_INITIAL / 2) is not None  # woken, backing off
    assert view.queue.backing_off == {"default/x": T0 + BACKOFF_INITIAL}
    assert view.queue.still_parked(lone, T0 + BACKOFF_INITIAL) is None  # the backoff ended: active
    view.queue.park(lone, {}, None, {}, "changed", now=T0)
    assert view.queue.still_parked(lone, T0 + FLUSH_SECONDS - 1) is not None
    assert view.queue.still_parked(lone, T0 + FLUSH_SECONDS) is None  # flushed

