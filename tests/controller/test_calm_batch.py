"""The changes of pods with a node are batched after a cycle that decided nothing (``cache.Changes``,
``loop.CALM_BATCH``; issue 33 item 4): a preemption's victims bring ~2,500 watch events, each of
which ran a cycle in which the preemptor, parked until they are gone, did nothing. What the batch
must never do: hold back an urgent change, a deadline, the change after a cycle that decided
something, or a lone change after a quiet spell."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from koordpy.controller import loop as loop_module
from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import ApiWriter
from tests.builders import node, pod
from tests.controller.test_watch_kinds import rv as _rv

NAMES = frozenset({"koordpy"})


def test_only_a_bound_pods_changes_are_calm() -> None:
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0"), 1))
    bound = _rv(pod("b", cpu="1", node_name="n0", scheduler="other"), 2)
    cache.observe("Pod", "ADDED", bound)
    cache.changed.clear()
    later = _rv(copy.deepcopy(bound), 3)
    later["status"] = {"phase": "Running"}
    cache.observe("Pod", "MODIFIED", later)
    assert cache.changed.is_set() and not cache.changed.urgent.is_set()
    cache.observe("Pod", "DELETED", _rv(copy.deepcopy(later), 4))
    assert "default/b" not in cache.pods and not cache.changed.urgent.is_set()
    cache.observe("Pod", "ADDED", _rv(pod("p", cpu="1"), 5))  # a pending pod: at once
    assert cache.changed.urgent.is_set()
    cache.changed.clear()
    assert not cache.changed.is_set() and not cache.changed.urgent.is_set()
    cache.observe("Node", "MODIFIED", _rv(node("n0", cpu="4"), 6))
    assert cache.changed.urgent.is_set()


@dataclass
class _Run:
    """A loop over one node and ``bound`` pods of another scheduler; its cycles' start times and the
    pods it sent to bind are recorded, the binds and the reports' flush stubbed."""

    cache: Cache
    loop: SchedulerLoop
    bound: list[dict[str, Any]]
    cycles: list[float] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    version: int = 100

    def calm(self, i: int = 0) -> float:
        """A status change of bound pod ``i``: calm. Returns when it was seen."""
        self.version += 1
        later = _rv(copy.deepcopy(self.bound[i]), self.version)
        later["metadata"].setdefault("labels", {})["v"] = str(self.version)
        self.cache.observe("Pod", "MODIFIED", later)
        return time.monotonic()


@asynccontextmanager
async def _loop(monkeypatch: pytest.MonkeyPatch, calm_batch: float, bound: int = 1,
                before: Callable[[_Run], None] | None = None) -> AsyncIterator[_Run]:
    """The loop running; unless ``before`` set something up first, its first cycle has run and
    decided nothing."""
    monkeypatch.setattr(loop_module, "CALM_BATCH", calm_batch)
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0", cpu="8"), 1))
    pods = [_rv(pod(f"b{i}", cpu="1", node_name="n0", scheduler="other"), 2 + i) for i in range(bound)]
    for p in pods:
        cache.observe("Pod", "ADDED", p)
    loop = SchedulerLoop(cache, ApiWriter(api=object()), NAMES, debounce=0.0, flush_every=5.0)
    run = _Run(cache, loop, pods)
    real = loop.cycle

    async def counted() -> float | None:
        run.cycles.append(time.monotonic())
        return await real()

    async def bind(d: Any, uid: str, started: float | None = None, event: Any = None) -> None:
        run.sent.append(d.pod)

    loop.cycle = counted  # type: ignore[method-assign]
    loop._bind = bind  # type: ignore[method-assign]
    if before is not None:
        before(run)
    task = asyncio.ensure_future(loop.run())
    try:
        if before is None:
            await _until(lambda: bool(run.cycles))
            await asyncio.sleep(0.05)
            assert len(run.cycles) == 1 and loop._idle  # the pods added: one cycle, nothing to decide
        yield run
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _until(check: Callable[[], bool], seconds: float = 3.0) -> None:
    end = time.monotonic() + seconds
    while not check() and time.monotonic() < end:
        await asyncio.sleep(0.01)


async def test_after_an_idle_cycle_bound_pods_changes_make_one_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _loop(monkeypatch, 1.0, bound=5) as run:
        for i, p in enumerate(run.bound):  # five bound pods' deletions, 20 ms apart
            run.cache.observe("Pod", "DELETED", _rv(copy.deepcopy(p), 20 + i))
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.5)
        assert len(run.cycles) == 2, run.cycles  # one cycle for the five
        run.cache.observe("Pod", "ADDED", _rv(pod("p", cpu="1"), 40))  # urgent: not held for the batch
        added = time.monotonic()
        await _until(lambda: bool(run.sent))
        assert len(run.cycles) == 3 and run.sent == ["default/p"]
        assert run.cycles[2] - added < 0.5  # its cycle started at once, not after CALM_BATCH


async def test_a_lone_change_after_a_quiet_spell_goes_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _loop(monkeypatch, 0.5) as run:
        await asyncio.sleep(0.6)  # quiet for longer than CALM_BATCH since the last cycle
        seen = run.calm()
        await _until(lambda: len(run.cycles) > 1)
        assert len(run.cycles) == 2 and run.cycles[1] - seen < 0.2, run.cycles[-1] - seen
        run.calm()  # right after an idle cycle: this one waits for the batch
        await asyncio.sleep(0.25)
        assert len(run.cycles) == 2
        await _until(lambda: len(run.cycles) > 2)
        assert run.cycles[2] - run.cycles[1] >= 0.45, run.cycles


async def test_an_urgent_change_ends_a_calm_wait_under_way(monkeypatch: pytest.MonkeyPatch) -> None:
    async with _loop(monkeypatch, 1.0) as run:
        run.calm()  # the loop waits for the batch
        await asyncio.sleep(0.1)
        assert len(run.cycles) == 1
        run.cache.observe("Pod", "ADDED", _rv(pod("p", cpu="1"), 40))  # urgent, during the wait
        added = time.monotonic()
        await _until(lambda: len(run.cycles) > 1)
        assert len(run.cycles) == 2 and run.cycles[1] - added < 0.4, run.cycles[-1] - added


async def test_after_a_cycle_that_decided_something_calm_changes_go_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def pending(run: _Run) -> None:
        run.cache.observe("Pod", "ADDED", _rv(pod("p", cpu="1"), 40))

    async with _loop(monkeypatch, 1.0, before=pending) as run:
        await _until(lambda: bool(run.sent))
        await asyncio.sleep(0.05)
        assert run.sent == ["default/p"] and len(run.cycles) == 1 and not run.loop._idle
        changed = run.calm()  # calm, but the last cycle decided something
        await _until(lambda: len(run.cycles) > 1)
        assert len(run.cycles) == 2 and run.cycles[1] - changed < 0.4, run.cycles[-1] - changed


async def test_a_deadline_inside_the_calm_wait_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    due: list[float] = []

    def stub(run: _Run) -> None:
        async def cycle() -> float | None:  # the core stubbed: an idle cycle that owes one at +0.3 s
            run.cycles.append(time.monotonic())
            run.loop._idle = True
            if len(run.cycles) == 1:
                due.append(time.monotonic() + 0.3)
                return time.time() + 0.3
            return None

        run.loop.cycle = cycle  # type: ignore[method-assign]

    async with _loop(monkeypatch, 1.0, before=stub) as run:
        await _until(lambda: bool(run.cycles))
        await asyncio.sleep(0.05)
        run.calm()  # calm, 0.25 s before the deadline: the batch would end 0.95 s after it
        await _until(lambda: len(run.cycles) > 1)
        assert len(run.cycles) == 2 and run.cycles[1] - due[0] < 0.2, run.cycles[-1] - due[0]
