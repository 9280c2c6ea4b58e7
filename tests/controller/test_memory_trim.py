"""Handing malloc's free memory back (issue 21, goal 2; ``controller.memory``): the loop trims once it
goes idle after cycles, never during a burst, at most once in TRIM_SECONDS, and not again while
nothing ran; the C library calls are glibc's and a no-op elsewhere. Scheduling is untouched (the
loop's other tests run with it)."""

from __future__ import annotations

import asyncio
import ctypes
import time
from typing import Any

import pytest

from koordpy.controller import loop as loop_module
from koordpy.controller import memory
from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import ApiWriter
from tests.builders import node, pod

NAMES = frozenset({"koordpy"})


def _rv(raw: dict[str, Any], rv: int) -> dict[str, Any]:
    raw["metadata"]["resourceVersion"] = str(rv)
    return raw


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def malloc_trim(self, pad: int) -> int:
        self.calls.append(("malloc_trim", (pad,)))
        return 1

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append(("mallopt", (param, value)))
        return 1


def test_without_glibc_the_calls_are_no_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert memory.limit_arenas() is False
    assert memory.trim_memory() is False


def test_the_calls_are_glibcs_malloc_trim_and_mallopt_arena_max(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = _FakeLibc()
    monkeypatch.setattr(memory, "_glibc", lambda: libc)
    assert memory.limit_arenas() is True
    assert memory.trim_memory() is True
    assert libc.calls == [("mallopt", (-8, 1)), ("malloc_trim", (0,))]  # M_ARENA_MAX = -8 in malloc.h


def test_on_this_machines_c_library_trim_runs_and_rss_is_read() -> None:
    if memory._glibc() is None:  # not glibc: the no-op is the first test's
        assert memory.trim_memory() is False
        return
    ctypes.CDLL(None)  # the process's own C library is the one found
    assert isinstance(memory.trim_memory(), bool)
    rss = memory.rss()
    assert rss is not None and rss > 1 << 20


async def _run_loop(monkeypatch: pytest.MonkeyPatch, trim_seconds: float) -> tuple[SchedulerLoop, Cache, list[float]]:
    trims: list[float] = []

    def trim() -> bool:
        trims.append(time.monotonic())
        return True

    monkeypatch.setattr(memory, "trim_memory", trim)
    monkeypatch.setattr(loop_module, "TRIM_SECONDS", trim_seconds)
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0", cpu="1000", memory="1000Gi", extra={"pods": "1000"}), 1))
    loop = SchedulerLoop(cache, ApiWriter(api=object()), NAMES, debounce=0.001, flush_every=0.05)

    async def bind(d: Any, uid: str, started: float | None = None, event: Any = None) -> None:
        return None

    loop._bind = bind  # type: ignore[method-assign]
    return loop, cache, trims


async def _until(cond: Any, seconds: float = 10.0) -> None:
    """Waits for ``cond()`` (a loaded machine makes cycles slow); the assertion after says what."""
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        await asyncio.sleep(0.02)


async def _burst(loop: SchedulerLoop, cache: Cache, first: int, cycles: int) -> int:
    """A pod every 10 ms (the loop never waits a whole flush period without a change) until ``cycles``
    more cycles ran (a slow machine makes them long), at least 10 pods; returns how many."""
    until = loop.cycles + cycles
    i = first
    while i < first + 10 or (loop.cycles < until and i < first + 3000):
        cache.observe("Pod", None, _rv(pod(f"p{i}", cpu="1"), 10 + i))
        i += 1
        await asyncio.sleep(0.01)
    return i - first


async def test_the_loop_trims_once_idle_after_cycles_never_during_a_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    loop, cache, trims = await _run_loop(monkeypatch, trim_seconds=0.0)
    task = asyncio.ensure_future(loop.run())
    try:
        await _until(lambda: trims)  # the first cycle (the node), then idle
        assert len(trims) == 1 and loop.cycles == 1
        await asyncio.sleep(0.3)  # still idle, no cycle since: nothing more to hand back
        assert len(trims) == 1
        sent = await _burst(loop, cache, 0, 3)
        assert len(trims) == 1 and loop.cycles >= 4  # cycles ran, none idle in between
        await _until(lambda: len(trims) == 2)
        assert len(trims) == 2
        assert sorted(cache.assumed) == sorted(f"default/p{i}" for i in range(sent))  # scheduling as before
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_loop_trims_at_most_once_in_trim_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    loop, cache, trims = await _run_loop(monkeypatch, trim_seconds=60.0)
    task = asyncio.ensure_future(loop.run())
    try:
        await _until(lambda: trims)
        assert len(trims) == 1
        await _burst(loop, cache, 0, 1)
        await asyncio.sleep(0.5)  # idle after cycles, but the last trim was less than a minute ago
        assert len(trims) == 1 and loop._untrimmed
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
