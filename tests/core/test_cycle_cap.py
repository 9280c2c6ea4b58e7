"""A cap on one cycle's work (``podsPerCycle``, issue 21 goal 4): once a cycle has placed that many
pods, the active jobs after it keep their place in the queue for the next cycle, which follows at
once (no backoff, not parked, nothing written for them). A job is never split, so a gang larger
than the cap still goes whole; and over consecutive cycles the decisions are those of one cycle
without the cap."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from koordpy.controller.cache import Cache
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.decisions import CycleResult, Event, GangStatusUpdate, SetPodScheduledFalse
from koordpy.core.gang import Job
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import Wake
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, spine_block_nodes

NAMES = frozenset({"koordpy"})
T0 = 1_000_000.0


class Live:
    """The live path: watch events into the cache, each cycle a snapshot carrying the cap."""

    def __init__(self, cap: int) -> None:
        self.cache = Cache()
        self.state = SchedulerState()
        self.cap = cap
        self.rv = 0
        self.now = T0

    def add(self, kind: str, raw: dict[str, Any]) -> None:
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        raw["metadata"].setdefault("creationTimestamp", f"2026-01-01T00:00:{self.rv % 60:02d}Z")
        self.cache.observe(kind, "ADDED", raw)

    def gang(self, name: str, size: int, cpu: str = "1", **extra: Any) -> None:
        self.add("PodGroup", podgroup(name, size))
        for i in range(size):
            self.add("Pod", pod(f"{name}-{i}", cpu, group=name, **extra))

    def cycle(self, after: float = 0.0) -> CycleResult:
        self.now += after
        snap = self.cache.snapshot(NAMES)
        snap.pods_per_cycle = self.cap
        result = schedule(snap, self.state, self.now)
        for bind in result.binds:
            self.cache.assume(bind.pod, bind.node)
        return result


def bound_gangs(result: CycleResult) -> list[str]:
    return sorted({b.pod.rsplit("-", 1)[0].split("/")[1] for b in result.binds})


def test_rest_of_queue_goes_next_cycle_at_once_without_backoff_or_writes() -> None:
    live = Live(cap=8)
    for node_i in range(4):
        live.add("Node", node(f"n{node_i}", cpu="8"))
    for g in "abcde":
        live.gang(g, 4)
    first = live.cycle()
    assert bound_gangs(first) == ["a", "b"]
    assert first.deferred == 12
    assert first.queues["active"] == 20  # the jobs left over are active, not parked or backing off
    assert first.next_deadline == live.now  # the next cycle at once, not after a change or a backoff
    view = live.state.view
    assert view is not None and not view.queue.parked and not view.queue.backing_off
    # Nothing is written for a job that was not tried: no condition, no Event, no PodGroup status.
    left = {f"default/{g}-{i}" for g in "cde" for i in range(4)}
    for d in first.decisions:
        if isinstance(d, SetPodScheduledFalse):
            assert d.pod not in left
        if isinstance(d, Event):
            assert d.obj not in left and d.obj not in {"default/c", "default/d", "default/e"}
        if isinstance(d, GangStatusUpdate):
            assert d.object_key.split("/")[-1] in ("a", "b"), d
    assert bound_gangs(live.cycle()) == ["c", "d"]  # the same instant: no backoff
    third = live.cycle()
    assert bound_gangs(third) == ["e"] and third.deferred == 0 and third.next_deadline is None


def test_a_gang_larger_than_the_cap_goes_whole() -> None:
    live = Live(cap=3)
    for node_i in range(4):
        live.add("Node", node(f"n{node_i}", cpu="8"))
    live.gang("big", 10)
    live.gang("after", 2)
    first = live.cycle()
    assert len(first.binds) == 10 and bound_gangs(first) == ["big"]
    assert first.deferred == 2
    assert bound_gangs(live.cycle()) == ["after"]


def test_queue_order_is_kept_a_small_job_does_not_pass_a_deferred_one() -> None:
    live = Live(cap=4)
    for node_i in range(4):
        live.add("Node", node(f"n{node_i}", cpu="8"))
    live.add("PriorityClass", priority_class("high", 1000))
    live.gang("first", 4, priority_class="high")
    live.gang("middle", 8)
    live.add("Pod", pod("lone", "1"))
    first = live.cycle()
    assert bound_gangs(first) == ["first"]
    second = live.cycle()
    assert bound_gangs(second) == ["middle"]  # 8 pods over a cap of 4, whole; the lone pod waits its turn
    assert [b.pod for b in live.cycle().binds] == ["default/lone"]


def test_failed_jobs_do_not_count_so_the_queue_behind_them_is_never_starved() -> None:
    live = Live(cap=2)
    for node_i in range(2):
        live.add("Node", node(f"n{node_i}", cpu="8"))
    live.add("PriorityClass", priority_class("high", 1000))
    for g in range(5):  # ahead in the queue and never fitting: nothing placed, nothing counted
        live.gang(f"huge{g}", 2, cpu="64", priority_class="high")
    live.gang("small", 2)
    first = live.cycle()
    assert bound_gangs(first) == ["small"] and first.deferred == 0


def test_parked_jobs_behind_the_cap_keep_their_messages() -> None:
    live = Live(cap=2)
    live.add("Node", node("n0", cpu="8"))
    live.add("PriorityClass", priority_class("high", 1000))
    live.gang("never", 2, cpu="64")
    live.cycle()  # parked
    live.gang("now", 2, priority_class="high")
    live.gang("later", 2, priority_class="high")
    result = live.cycle()
    # "never" is not looked at behind the cap (whether room woke it is judged at its turn): left over
    # too, parked as it was.
    assert bound_gangs(result) == ["now"] and result.deferred == 4
    assert set(result.pending) == {"default/never-0", "default/never-1"}
    assert result.queues == {"active": 4, "backoff": 0, "unschedulable": 2}


def test_a_woken_job_left_over_keeps_the_messages_it_was_parked_with() -> None:
    live = Live(cap=2)
    live.add("Node", node("n0", cpu="8"))
    live.add("PriorityClass", priority_class("high", 1000))
    live.add("Pod", pod("running", "4", node_name="n0"))
    live.gang("never", 2, cpu="6")
    live.cycle()  # parked
    # Room where one of its pods fits: the parked job is woken (and past its backoff), then left over.
    live.rv += 1
    live.cache.observe("Pod", "DELETED", {"metadata": {"name": "running", "namespace": "default",
                                                       "resourceVersion": str(live.rv)}})
    live.gang("now", 2, priority_class="high")
    result = live.cycle(after=30.0)
    assert bound_gangs(result) == ["now"] and result.deferred == 2
    assert set(result.pending) == {"default/never-0", "default/never-1"}
    assert not any(isinstance(d, SetPodScheduledFalse) for d in result.decisions)


def test_a_round_tries_each_job_once_as_one_long_cycle_would(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[list[str]] = []
    real = Cycle._job

    def counting(cycle: Cycle, job: Job, preempt: bool = True) -> Wake | None:
        tried[-1].append(job.id)
        return real(cycle, job, preempt)

    monkeypatch.setattr(Cycle, "_job", counting)
    live = Live(cap=2)
    for node_i in range(2):
        live.add("Node", node(f"n{node_i}", cpu="8"))
    live.add("PriorityClass", priority_class("high", 1000))
    # Two of three members fit; the third, beyond the minimum, is a job of its own tried every cycle.
    live.add("PodGroup", podgroup("lead", 1))
    for i in range(3):
        live.add("Pod", pod(f"lead-{i}", "5", group="lead", priority_class="high"))
    for i in range(3):
        live.add("Pod", pod(f"lone-{i}", "1"))
    for _ in range(4):
        tried.append([])
        live.cycle()
    assert tried == [["default/lead"], ["default/lone-0", "default/lone-1"], ["default/lone-2"],
                     ["default/lead-2"]]  # the leftover member goes again in the next round, not mid-round


def test_no_cap_by_default() -> None:
    assert Snapshot(nodes=[], pods=[]).pods_per_cycle == 0
    live = Live(cap=0)
    live.add("Node", node("n0", cpu="64"))
    for g in range(10):
        live.gang(f"g{g}", 3)
    result = live.cycle()
    assert len(result.binds) == 30 and result.deferred == 0


# -- capped against uncapped, over consecutive cycles of a simulated run ---------------------------


def simulated(objects: list[dict[str, Any]], cap: int) -> SimulationResult:
    world = World.from_objects([("test", o) for o in objects])
    plain = world.snapshot

    def capped(names: frozenset[str]) -> Snapshot:
        snap = plain(names)
        snap.pods_per_cycle = cap
        return snap

    world.snapshot = capped  # type: ignore[method-assign,assignment]
    return simulate(world)


def same(a: SimulationResult, b: SimulationResult) -> None:
    assert a.bound == b.bound
    assert a.pending == b.pending
    assert sorted(a.preempted) == sorted(b.preempted)
    assert a.nominated == b.nominated
    assert a.groups == b.groups
    key = lambda e: (e.kind, e.obj, e.type, e.reason, e.message)  # noqa: E731
    assert sorted(map(key, a.events)) == sorted(map(key, b.events))


gangs = st.lists(st.tuples(st.integers(1, 6), st.integers(1, 6), st.sampled_from(["1", "2", "3", "5", "9"]),
                           st.sampled_from([None, "low", "high"]), st.booleans()), min_size=1, max_size=9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gangs=gangs, lone=st.integers(0, 4), cap=st.integers(1, 12), running=st.integers(0, 6))
# Found by this test (2026-11-26): a parked job woken when the round first stopped, and left over, was
# parked again by the next cycle of the round once the jobs before it had taken the room that woke
# it; one long cycle tries it (and writes that attempt's message).
@example(gangs=[(1, 1, "1", None, False), (1, 1, "1", None, False), (5, 1, "3", "high", False),
                (5, 1, "3", "high", False), (1, 1, "3", "high", False)], lone=0, cap=1, running=6)
@example(gangs=[(1, 1, "1", "high", False), (1, 1, "3", None, False), (5, 1, "3", "high", False),
                (5, 1, "3", "high", False), (1, 1, "3", "high", False)], lone=0, cap=1, running=6)
# Found by this test (2026-11-27): a pod assumed on a node and then bound there was counted as room freed
# there (its requests parsed again into a new array), which woke a parked job for nothing in one run
# and not in the other; and a parked job behind the cap was judged woken before the jobs ahead of it
# took the room, where one long cycle judges it at its turn.
@example(gangs=[(1, 1, "1", None, False), (2, 2, "1", None, False), (3, 3, "1", "low", False),
                (5, 1, "5", "high", False), (6, 1, "1", "high", False), (1, 1, "1", None, False),
                (1, 1, "1", None, False), (4, 2, "2", "high", False)], lone=0, cap=1, running=2)
@example(gangs=[(1, 1, "1", None, False), (1, 1, "1", None, False), (1, 1, "1", None, False),
                (1, 1, "1", None, False), (3, 3, "1", "low", False), (5, 1, "5", "high", False),
                (6, 1, "1", "high", False), (4, 2, "2", "high", False)], lone=0, cap=1, running=2)
def test_capped_run_decides_as_the_uncapped_one(gangs: list[tuple[int, int, str, str | None, bool]], lone: int,
                                                cap: int, running: int) -> None:
    objects: list[dict[str, Any]] = [
        *spine_block_nodes({"s0": {"b0": [0, 1], "b1": [2]}, "s1": {"b2": [3, 4]}}), SPINE_BLOCK_CNT,
        priority_class("low", 10), priority_class("high", 1000)]
    gather = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    for i in range(running):  # lower-priority pods already running: room preemption may take
        objects.append(pod(f"run-{i}", "3", node_name=f"node-{i % 5}", priority_class="low"))
    for g, (size, minimum, cpu, klass, gathered) in enumerate(gangs):
        name = f"g{g}"
        objects.append(podgroup(name, min(size, minimum), gather=gather if gathered else None))
        for i in range(size):
            objects.append(pod(f"{name}-{i}", cpu, group=name, index=i, priority_class=klass))
    objects += [pod(f"lone-{i}", "2") for i in range(lone)]
    same(simulated(objects, cap), simulated(objects, 0))


@pytest.mark.parametrize("cap", [1, 3, 7])
def test_capped_run_decides_as_the_uncapped_one_with_preemption(cap: int) -> None:
    objects: list[dict[str, Any]] = [
        *[node(f"n{i}", cpu="8") for i in range(4)], priority_class("low", 10), priority_class("high", 1000)]
    objects += [pod(f"run-{i}", "4", node_name=f"n{i % 4}", priority_class="low") for i in range(8)]
    for g in range(4):
        objects.append(podgroup(f"hi{g}", 2))
        objects += [pod(f"hi{g}-{i}", "4", group=f"hi{g}", priority_class="high") for i in range(2)]
    uncapped = simulated(objects, 0)
    assert uncapped.preempted  # the case is one where preemption decides
    same(simulated(objects, cap), uncapped)
