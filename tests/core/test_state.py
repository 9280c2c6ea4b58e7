"""The scheduler state's transitions and the one transaction per job (koordpy.core.state, .txn):
every change a job makes to the state is journaled with its cluster moves and undone with them."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.core import cycle as cycle_module
from koordpy.core.decisions import Event
from koordpy.core.gang import GangGroupId
from koordpy.core.state import SchedulerState
from koordpy.core.txn import Txn
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup, priority_class
from tests.core.dialects.test_topology_sources import seed_004, vc_job

NONSTRICT = {"gang.scheduling.koordinator.sh/mode": "NonStrict"}


def test_every_transition_is_undone_by_the_transaction_and_only_while_one_is_open() -> None:
    state = SchedulerState(reserved={"p0": "n0"}, satisfied={"g0"}, told={"g0": "said"})
    before = SchedulerState(dict(state.reserved), dict(state.wait_since), set(state.satisfied), dict(state.told))
    txn = Txn(state)
    state.reserve("p1", "n1")
    assert state.release("p0") == "n0" and state.release("nobody") is None
    state.start_wait(GangGroupId.of("g1"), 5.0)
    mark = txn.savepoint()
    state.start_wait(GangGroupId.of("g1"), 9.0)  # a wait starts once
    state.mark_satisfied(["g1"])
    assert state.tell("g1", "dropped") and not state.tell("g1", "dropped")
    state.untell("g0")
    assert state.wait_since == {GangGroupId.of("g1"): 5.0} and state.satisfied == {"g0", "g1"}
    txn.rollback(mark)
    assert state.satisfied == {"g0"} and state.told == {"g0": "said"} and state.reserved == {"p1": "n1"}
    state.keep_satisfied([])
    state.forget_waits([])
    state.forget_told([])
    txn.discard()
    assert state == before and state.txn is None
    state.reserve("p2", "n2")  # no transaction: kept, recorded nowhere
    assert state.reserved == {"p0": "n0", "p2": "n2"}


def test_a_job_that_raises_says_its_dropped_limit_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """What was told about a gang's dropped limit is state: a job whose evaluation raised after it was
    told has its Event cut with the rest of its decisions, so the telling is rolled back too and the
    next try writes the Event (before, the state kept it and the Event was never written)."""
    world = World.from_objects([("t", o) for o in [*seed_004(), *vc_job("bad", 9, tier_name="nowhere")]])
    snap = world.snapshot(frozenset({"koordpy"}))
    state = SchedulerState()
    real = cycle_module.Cycle._place
    calls = {"n": 0}

    def exploding(self: cycle_module.Cycle, *args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real(self, *args)

    monkeypatch.setattr(cycle_module.Cycle, "_place", exploding)
    first = cycle_module.schedule(snap, state, 0.0)
    assert "boom" in first.waiting["default/bad-0"]
    assert not [d for d in first.decisions if isinstance(d, Event) and d.reason == "TopologyLimitDropped"]
    assert state.told == {}
    state.view = None  # tried again at once
    second = cycle_module.schedule(snap, state, 1.0)
    assert [d.obj for d in second.decisions if isinstance(d, Event) and d.reason == "TopologyLimitDropped"] \
        == ["default/bad"]


def test_a_job_that_raises_gives_back_the_reservations_it_took_from_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """A higher-priority job takes room reserved for a waiting NonStrict gang (preemption releases the
    reservation) and then raises: its transaction restores the other gang's reservation with the
    cluster's count of it (before, only the failing job's own reservations were restored)."""
    gang = [podgroup("low", 3, annotations=NONSTRICT), *[pod(f"low-{i}", group="low") for i in range(3)]]
    nodes = [node("n0"), node("n1")]
    state = SchedulerState()
    world = World.from_objects([("t", o) for o in [*nodes, *gang, priority_class("high", 1000)]])
    cycle_module.schedule(world.snapshot(frozenset({"koordpy"})), state, 0.0)
    reserved = dict(state.reserved)
    assert len(reserved) == 2

    real = cycle_module.Cycle.bind

    def exploding(self: cycle_module.Cycle, placed: dict[str, int]) -> None:
        if "default/hi" in placed:
            raise RuntimeError("boom")
        real(self, placed)

    monkeypatch.setattr(cycle_module.Cycle, "bind", exploding)
    world = World.from_objects([("t", o) for o in [*nodes, *gang, priority_class("high", 1000),
                                                   pod("hi", priority_class="high")]])
    result = cycle_module.schedule(world.snapshot(frozenset({"koordpy"})), state, 1.0)
    assert "boom" in result.waiting["default/hi"] and not result.binds
    assert state.reserved == reserved
    assert state.view is not None and state.view.cluster is not None
    assert all(state.view.cluster.is_held(k) for k in reserved)
