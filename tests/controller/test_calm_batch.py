"""Bound pods' changes wait for one batch after a cycle that decided nothing (``cache.Changes``,
``loop.CALM_BATCH``; issue 33 item 4): a preemption's victims bring ~2,500 watch events, each of
which ran a cycle in which the preemptor, parked until they are gone, did nothing."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

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


async def test_after_an_idle_cycle_bound_pods_changes_make_one_cycle(monkeypatch: Any) -> None:
    monkeypatch.setattr(loop_module, "CALM_BATCH", 1.0)
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0", cpu="8"), 1))
    pods = [_rv(pod(f"b{i}", cpu="1", node_name="n0", scheduler="other"), 2 + i) for i in range(5)]
    for p in pods:
        cache.observe("Pod", "ADDED", p)
    loop = SchedulerLoop(cache, ApiWriter(api=object()), NAMES, debounce=0.0, flush_every=5.0)
    cycles: list[float] = []
    real = loop.cycle

    async def counted() -> float | None:
        cycles.append(asyncio.get_running_loop().time())
        return await real()

    loop.cycle = counted  # type: ignore[method-assign]
    sent: list[str] = []

    async def bind(d: Any, uid: str, started: float | None = None, event: Any = None) -> None:
        sent.append(d.pod)

    loop._bind = bind  # type: ignore[method-assign]
    task = asyncio.ensure_future(loop.run())
    try:
        await asyncio.sleep(0.3)
        assert len(cycles) == 1 and loop._idle  # the pods added: one cycle, nothing to decide
        for i, p in enumerate(pods):  # five bound pods' changes, 20 ms apart
            cache.observe("Pod", "DELETED", _rv(copy.deepcopy(p), 20 + i))
            await asyncio.sleep(0.02)
        await asyncio.sleep(1.5)
        assert len(cycles) == 2, cycles  # one cycle for the five
        cache.observe("Pod", "ADDED", _rv(pod("p", cpu="1"), 40))  # urgent: not held for the batch
        added = asyncio.get_running_loop().time()
        for _ in range(100):
            if sent:
                break
            await asyncio.sleep(0.02)
        assert len(cycles) == 3 and sent == ["default/p"]
        assert cycles[2] - added < 0.5  # its cycle started at once, not after CALM_BATCH
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
