"""The device rules are built again only when a cycle kept a change to the claims (from the review of
issue 31's preemption with devices): a gang that waits, whose Reserve and preemption what-ifs were all
rolled back, leaves the claims as the snapshot gave them, so the next cycle over the same snapshot keeps
the rules and does not wake every parked job with claims; a gang that binds does change them."""

from __future__ import annotations

from typing import Any

from koordpy.core.cycle import schedule
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, podgroup
from tests.core.test_claims import devices
from tests.sim.test_dra import gpu_class, gpu_nodes, gpu_slice, koord_gang, template, upstream_gang
from tests.sim.test_dra_gang_preemption import CLASSES, high, holding
from tests.sim.test_dra_gang_search import partitionable, whole_else_half

NAMES = frozenset({"koordpy"})


def world(gang_size: int, *objs: dict[str, Any]) -> World:
    made = [*gpu_nodes("n0", "n1"), gpu_class(), template(), gpu_slice("n0"), gpu_slice("n1"),
            podgroup("g", gang_size), *koord_gang("g", gang_size), *objs]
    return World.from_objects([("t", o) for o in made])


def test_a_gang_that_waits_leaves_the_rules_as_they_were() -> None:
    # One partitionable GPU, a low-priority pod holding half of it, a high-priority gang of three
    # halves: preemption's what-ifs free the low pod's half and find it not enough, and roll back.
    objs = [node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *CLASSES,
            *holding("low", "node-a", "gpu-0-half-0"), *high(upstream_gang("g", 3))]
    w = World.from_objects([("t", o) for o in objs])
    state = SchedulerState()
    first = schedule(w.snapshot(NAMES), state, w.now)
    assert first.binds == [] and first.preemption_attempts == 1
    assert state.view is not None and state.view.devices is not None
    rules = state.view.devices
    assert not rules.assumed
    schedule(w.snapshot(NAMES), state, w.now + 1)
    assert state.view.devices is rules  # not built again: nothing changed


def test_a_gang_that_binds_changes_the_claims_and_the_rules_are_built_again() -> None:
    w = world(2)
    state = SchedulerState()
    first = schedule(w.snapshot(NAMES), state, w.now)
    assert len(first.binds) == 2
    assert state.view is not None and state.view.devices is not None
    rules = state.view.devices
    assert rules.assumed
    schedule(w.snapshot(NAMES), state, w.now + 1)
    assert state.view.devices is not rules


def test_undoing_every_change_of_a_transaction_clears_assumed() -> None:
    from koordpy.api.objects import Node, Pod
    from koordpy.core.claims import DeviceRules
    from koordpy.core.txn import Txn
    from tests.core.test_claims import claimer
    from tests.sim.test_dra import claim

    rules = DeviceRules(devices(claim("c"), claim("d")))
    n0 = Node.from_raw(node("n0", cpu="64"))
    txn = Txn()
    mark = txn.savepoint()
    assert rules.reserve(claimer("p", "c"), n0, txn) is None
    assert rules.assumed
    txn.rollback(mark)
    assert not rules.assumed
    assert rules.reserve(claimer("p", "c"), n0, txn) is None
    txn.close()  # kept
    assert rules.assumed
    p: Pod = claimer("q", "d")
    txn2 = Txn()
    assert rules.reserve(p, n0, txn2) is not None  # n0's GPUs are taken: nothing changes
    assert rules.assumed  # the kept change still holds
