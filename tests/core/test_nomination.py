"""Nominated room (``koordpy.core.nomination``): a nomination preemption can no longer help is
dropped, written as an empty ``Nominate`` and no longer counted; a pod placed on its nominated node
takes that node when it fits there."""

from __future__ import annotations

from koordpy.api import Node, Pod
from koordpy.core.cycle import Cycle
from koordpy.core.decisions import Nominate
from koordpy.core.gang import Job
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from tests.builders import node, pod


def _cycle(nominated_on: str) -> tuple[Cycle, Pod]:
    raw = pod("p", "1")
    raw.setdefault("status", {})["nominatedNodeName"] = nominated_on
    p = Pod.from_raw(raw)
    snap = Snapshot(nodes=[Node.from_raw(node(f"n{i}", cpu="4")) for i in range(2)], pods=[p])
    return Cycle(snap, SchedulerState(), 0.0), p


def test_a_pod_goes_on_its_nominated_node_when_it_fits_there() -> None:
    cycle, p = _cycle("n1")
    stmt = Statement(cycle.cluster)
    if cycle.cluster.is_held(p.key):
        stmt.evict(p.key)
    assert cycle.nominations.place_on_nominated([p], stmt)
    assert stmt.placed == {p.key: 1}


def test_a_stale_nomination_is_dropped_and_written_empty() -> None:
    cycle, p = _cycle("n1")
    cycle.nominations.drop(Job("default/p", [], [p], 0, 0.0))
    assert cycle.result.decisions == [Nominate(p.key, "")]
    assert not cycle.cluster.is_held(p.key)
