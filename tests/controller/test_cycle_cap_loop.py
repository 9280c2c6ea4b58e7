"""The live loop and podsPerCycle (issue 21, goal 4): the setting reaches the core through the
snapshot, a cycle that leaves jobs over asks for the next cycle at once (its deadline is now), and
its log line says how many pods it left, and how many conditions and nominations it wrote."""

from __future__ import annotations

import time
from typing import Any

from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import ApiWriter
from tests.builders import node, pod

NAMES = frozenset({"koordpy"})


def _rv(raw: dict[str, Any], rv: int) -> dict[str, Any]:
    raw["metadata"]["resourceVersion"] = str(rv)
    return raw


async def test_the_loop_passes_the_cap_and_runs_the_rest_at_once() -> None:
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0", cpu="8"), 1))
    for i in range(3):
        cache.observe("Pod", None, _rv(pod(f"p{i}", cpu="1"), 2 + i))
    cache.observe("Pod", None, _rv(pod("huge", cpu="64"), 9))
    loop = SchedulerLoop(cache, ApiWriter(api=object()), NAMES, pods_per_cycle=2)
    sent: list[str] = []

    async def bind(d: Any, uid: str, started: float | None = None, event: Any = None) -> None:
        sent.append(d.pod)

    loop._bind = bind  # type: ignore[method-assign]
    before = time.time()
    deadline = await loop.cycle()
    assert deadline is not None and before <= deadline <= time.time()  # the next cycle at once
    # In queue order: the 64-CPU pod (told why it waits), p0 and p1; p2 is left for the next cycle.
    assert loop._told == {"deferred": 1, "unschedulable": 1, "nominated": 0}
    assert await loop.cycle() is not None
    assert loop._told == {"deferred": 0, "unschedulable": 0, "nominated": 0}
    assert sorted(cache.assumed) == ["default/p0", "default/p1", "default/p2"]
