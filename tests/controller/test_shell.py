"""The live shell's writes and metrics, with the API server faked (issue 17, items 15 and 16).

- Scheduled Events follow their binds (never a bind the API server refused), many at once, and a
  stop flushes the ones still owed before it ends; a stop with the API server not answering does
  not wait for them.
- The metrics mean what kube-scheduler's mean: ``scheduler_scheduling_attempt_duration_seconds``
  is one pod's attempt, labelled with that pod's profile; the cycle's time is
  ``koordpy_scheduling_cycle_duration_seconds``; ``scheduler_pending_pods`` has a ``gated`` queue.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.metrics import Metrics
from koordpy.controller.writer import EVENT_CONCURRENCY, ApiWriter
from tests.builders import FakeApiClient, node, pod, podgroup

NAMES = frozenset({"koordpy", "gang"})


class FakeCore:
    """The CoreV1Api calls the writer makes, each taking ``delay`` seconds; records what was written
    and when, and how many event creates were in flight at most."""

    def __init__(self, delay: float = 0.0, event_delay: float = 0.0, hang_events: bool = False) -> None:
        self.delay = delay
        self.event_delay = event_delay
        self.hang_events = hang_events
        self.bound: dict[str, float] = {}  # pod -> when its bind was written
        self.events: list[tuple[str, str, float]] = []  # (reason, pod, when)
        self.in_flight = 0
        self.most_in_flight = 0
        self.refuse: set[str] = set()  # pods whose bind is refused (the pod gone: 404)

    async def create_namespaced_pod_binding(self, name: str, ns: str, body: Any, **kw: Any) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        if name in self.refuse:
            from kubernetes_asyncio.client.exceptions import ApiException
            raise ApiException(status=404, reason="Not Found")
        self.bound[f"{ns}/{name}"] = time.monotonic()
        return {}

    async def create_namespaced_event(self, ns: str, body: Any, **kw: Any) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if self.hang_events:
                await asyncio.Event().wait()  # an API server that never answers
            await asyncio.sleep(self.event_delay)
        finally:
            self.in_flight -= 1
        obj = body["involvedObject"]
        self.events.append((body["reason"], f"{obj.get('namespace', '')}/{obj['name']}", time.monotonic()))
        return {"metadata": {"name": f"{obj['name']}.{len(self.events)}"}}

    async def patch_namespaced_pod_status(self, *args: Any, **kw: Any) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        return {}


def make_writer(core: FakeCore, metrics: Metrics | None = None, fence: Any = None) -> ApiWriter:
    writer = ApiWriter(FakeApiClient(), metrics=metrics, fence=fence)
    writer.core = core
    return writer


def gang_cluster(pods: int, nodes: int = 40) -> Cache:
    cache = Cache()
    objs = [*(node(f"n{i}", cpu="64") for i in range(nodes)), podgroup("big", pods),
            *(pod(f"big-{i}", cpu="1", group="big") for i in range(pods))]
    for version, obj in enumerate(objs, start=1):
        obj["metadata"]["resourceVersion"] = str(version)
        obj["metadata"]["uid"] = f"uid-{obj['metadata']['name']}"
        cache.observe(obj["kind"], "ADDED", obj)
    return cache


async def test_each_pod_gets_its_scheduled_event_after_its_bind_and_a_stop_flushes_what_is_owed() -> None:
    # A 300-pod gang: its binds and then its Events are written; the stop comes right after the
    # cycle, with every bind in flight and every Event owed. The binds take a second in all (64 at
    # once, 0.2 s each), longer than the stop's grace: decided and assumed, they are finished
    # under the Lease rather than cut off (one cut off mid-request may land without its Event).
    core = FakeCore(delay=0.2, event_delay=0.02)
    writer = make_writer(core)
    cache = gang_cluster(300)
    loop = SchedulerLoop(cache, writer, NAMES)
    await loop.cycle()
    assert len(writer._tasks) == 300 and not core.events  # nothing written yet: the binds are in flight
    await writer.drain(0.5, flush=10.0, stall=1.0)
    assert len(core.bound) == 300
    scheduled = {p: at for reason, p, at in core.events if reason == "Scheduled"}
    assert sorted(scheduled) == sorted(core.bound)  # every pod bound has its Event, and only those
    assert all(scheduled[p] >= core.bound[p] for p in scheduled)  # each written after its bind
    # Written many at once (bounded), not through the reports' 8 connections: 300 Events take
    # 300 x 20 ms / 32, a fifth of a second, instead of 0.75 s.
    assert 8 < core.most_in_flight <= EVENT_CONCURRENCY
    assert not writer._tasks


async def test_a_refused_bind_gets_no_scheduled_event() -> None:
    core = FakeCore()
    core.refuse = {"big-0"}
    writer = make_writer(core)
    loop = SchedulerLoop(gang_cluster(4, nodes=1), writer, NAMES)
    await loop.cycle()
    await writer.drain(2.0)
    assert sorted(p for _, p, _ in core.events) == ["default/big-1", "default/big-2", "default/big-3"]


async def test_a_stop_does_not_wait_for_events_the_api_server_never_takes() -> None:
    core = FakeCore(hang_events=True)
    writer = make_writer(core)
    loop = SchedulerLoop(gang_cluster(50, nodes=4), writer, NAMES)
    await loop.cycle()
    started = time.monotonic()
    await writer.drain(0.3, flush=10.0, stall=0.5)
    took = time.monotonic() - started
    assert len(core.bound) == 50 and not core.events
    assert took < 2.0, took  # the grace and one stall, not the flush limit
    await asyncio.sleep(0.05)  # the cancelled writes end
    assert not writer._tasks


async def test_a_fenced_writer_writes_no_event_and_stops_at_once() -> None:
    # The lease is lost right after the binds were sent (the fence is asked before each write):
    # the Events they owe are not written by a replica that is no longer the leader.
    core = FakeCore()
    asked = 0

    def fence() -> bool:
        nonlocal asked
        asked += 1
        return asked <= 10

    writer = make_writer(core, fence=fence)
    loop = SchedulerLoop(gang_cluster(10, nodes=1), writer, NAMES)
    await loop.cycle()
    started = time.monotonic()
    await writer.drain(1.0, flush=10.0, stall=0.5)
    assert len(core.bound) == 10 and core.events == []
    assert time.monotonic() - started < 2.0


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_attempt_duration_is_one_pods_attempt_labelled_with_its_profile() -> None:
    # Profile "koordpy": a 2-pod gang that fits and a pod too big for any node; profile "gang": one
    # more pod that fits; a gated pod (spec.schedulingGates) waiting in the gated queue.
    cache = Cache()
    metrics = Metrics()
    objs = [node("n0", cpu="8"), podgroup("fits", 2), pod("fits-0", cpu="1", group="fits"),
            pod("fits-1", cpu="1", group="fits"), pod("too-big", cpu="64"), pod("other", cpu="1", scheduler="gang"),
            pod("gated", cpu="64", schedulingGates=[{"name": "example.com/quota"}]),
            pod("theirs-gated", cpu="1", scheduler="default-scheduler", schedulingGates=[{"name": "x"}])]
    for i, obj in enumerate(objs, start=1):
        obj["metadata"]["resourceVersion"] = str(i)
        cache.observe(obj["kind"], "ADDED", obj)
    core = FakeCore(delay=0.05)
    writer = make_writer(core, metrics=metrics)
    loop = SchedulerLoop(cache, writer, NAMES, metrics=metrics)
    await loop.cycle()
    count = "scheduler_scheduling_attempt_duration_seconds_count"
    total = "scheduler_scheduling_attempt_duration_seconds_sum"
    # The cycle is over; the binds are not written yet, so no pod's attempt has ended as scheduled.
    assert sample(metrics, count, result="scheduled", profile="koordpy") == 0
    assert sample(metrics, count, result="unschedulable", profile="koordpy") == 1  # too-big; the gated pod is not tried
    assert sample(metrics, "koordpy_scheduling_cycle_duration_seconds_count", result="scheduled") == 1
    cycle_seconds = sample(metrics, "koordpy_scheduling_cycle_duration_seconds_sum", result="scheduled")
    await writer.drain(2.0)
    # One observation per pod, each with its own profile; none carries profile="".
    assert sample(metrics, count, result="scheduled", profile="koordpy") == 2
    assert sample(metrics, count, result="scheduled", profile="gang") == 1
    assert sample(metrics, "scheduler_schedule_attempts_total", result="scheduled", profile="gang") == 1
    assert sample(metrics, "scheduler_schedule_attempts_total", result="unschedulable", profile="koordpy") == 1
    for result in ("scheduled", "unschedulable", "error"):
        assert sample(metrics, count, result=result, profile="") == 0
    # A bound pod's attempt includes its bind (50 ms here), as kube-scheduler's does.
    assert sample(metrics, total, result="scheduled", profile="gang") >= cycle_seconds + 0.05
    assert sample(metrics, "scheduler_pending_pods", queue="gated") == 1  # not the other scheduler's
    assert sample(metrics, "scheduler_pending_pods", queue="active") == 4  # fits-0, fits-1, too-big, other
    # Gone or ungated, it leaves the queue.
    ungated = pod("gated", cpu="64")
    ungated["metadata"]["resourceVersion"] = "100"
    cache.observe("Pod", "MODIFIED", ungated)
    await loop.cycle()
    assert sample(metrics, "scheduler_pending_pods", queue="gated") == 0


async def test_a_condition_carries_the_reason_it_was_owed_with() -> None:
    # A group kube-scheduler's validation refuses: its pods' PodScheduled=False says SchedulerError, as
    # kube-scheduler's failure handler writes it; any other wait says Unschedulable (issue 29, item 5).
    bodies: dict[str, Any] = {}

    class Capturing(FakeCore):
        async def patch_namespaced_pod_status(self, name: str, ns: str, body: Any, **kw: Any) -> dict[str, Any]:
            bodies[f"{ns}/{name}"] = body
            return {}

    writer = make_writer(Capturing())
    writer.reports.settle = 0.0
    writer.unschedulable("default/refused", "all pods ... preemption policy", "SchedulerError")
    writer.unschedulable("default/waits", "0/1 nodes are available: 1 Insufficient cpu.")
    writer.flush(lambda pod: {"uid": f"uid-{pod}", "message": ""})
    await asyncio.sleep(0.05)
    reasons = {k: b["status"]["conditions"][0]["reason"] for k, b in bodies.items()}
    assert reasons == {"default/refused": "SchedulerError", "default/waits": "Unschedulable"}
    await writer.drain(2.0)
