"""Review of stale-gang eviction (issue 33 item 1): cases where koordpy must not evict a gang, or must
not do it twice, found by an adversarial reading."""

from __future__ import annotations

from typing import Any

from koordpy.api.raw import rfc3339
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Evict, ObjectAnnotate, Preempt
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import DEFAULT_EPOCH, World
from tests.builders import node, pod, podgroup, priority_class

NAMES = frozenset({"koordpy"})


def running(name: str, node_name: str, group: str | None = "job", **kw: Any) -> dict[str, Any]:
    raw = pod(name, cpu="4", group=group, node_name=node_name, **kw)
    raw["status"] = {"phase": "Running"}
    return raw


def world(*objects: dict[str, Any]) -> World:
    return World.from_objects([("test", o) for o in objects])


NODES = [node(f"n{i}", cpu="4") for i in range(3)]


def test_a_gang_whose_replacement_preempts_in_the_grace_end_cycle_is_not_evicted_too() -> None:
    # job-2 is gone; its replacement (high priority) needs n2, which a low-priority pod holds. The
    # grace has run out (stale since long ago, kept on the PodGroup): the cycle preempts the low pod
    # for the replacement and nominates it; evicting the gang in the same cycle would throw away
    # both the victim and the gang.
    t0 = DEFAULT_EPOCH + 100
    group = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0 - 120)})
    w = world(*NODES, priority_class("high", 1000), priority_class("low", 1), group,
              running("job-0", "n0", priority_class="high"), running("job-1", "n1", priority_class="high"),
              running("low", "n2", group=None, priority_class="low"),
              pod("job-2b", cpu="4", group="job", priority_class="high"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), t0)
    assert [d.pod for d in result.decisions if isinstance(d, Preempt)] == ["default/low"]
    assert not [d for d in result.decisions if isinstance(d, Evict)]


def out_of_cpu(name: str, node_name: str) -> dict[str, Any]:
    raw = pod(name, cpu="4", group="job", node_name=node_name)
    raw["status"] = {"phase": "Failed", "reason": "OutOfcpu"}
    return raw


def test_a_gang_stale_again_before_its_clear_is_seen_starts_a_new_clock() -> None:
    # Stale at t0 (the PodGroup says so), whole again at t0+100 (a replacement bound: the stale-since
    # is cleared, a write the cache has not seen yet), stale again a second later: the PodGroup still
    # says t0, but that is the episode that ended; the new one starts now, not 100 s ago.
    t0 = DEFAULT_EPOCH + 100
    state = SchedulerState()
    first = world(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"),
                  out_of_cpu("job-2", "n2"))
    assert not schedule(first.snapshot(NAMES), state, t0).evicted
    said = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0)})
    whole = world(*NODES, said, running("job-0", "n0"), running("job-1", "n1"), running("job-3", "n2"))
    state.view = None
    assert not schedule(whole.snapshot(NAMES), state, t0 + 100).evicted
    again = world(*NODES, said, running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-3", "n2"))
    state.view = None
    result = schedule(again.snapshot(NAMES), state, t0 + 101)
    assert not result.evicted
    assert result.next_deadline == t0 + 101 + 60
    # Cycles later, with the PodGroup still saying t0 (neither write seen), the new clock holds.
    assert not schedule(again.snapshot(NAMES), state, t0 + 120).evicted
    assert {d.pod for d in schedule(again.snapshot(NAMES), state, t0 + 161).evicted} == \
        {"default/job-0", "default/job-1"}


def test_a_gang_whose_replacement_the_round_left_for_the_next_cycle_is_not_evicted() -> None:
    # podsPerCycle 1: a higher-priority pod takes this cycle's turn, the replacement of job-2 (it fits
    # n2) goes next cycle, at once. Its grace having run out, the gang would be evicted in between.
    t0 = DEFAULT_EPOCH + 100
    group = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0 - 120)})
    w = world(*NODES, node("n3", cpu="4"), priority_class("high", 1000), priority_class("low", 1), group,
              running("job-0", "n0", priority_class="low"), running("job-1", "n1", priority_class="low"),
              out_of_cpu("job-2", "n2"), pod("first", cpu="1", priority_class="high", priority=1000),
              pod("job-2b", cpu="4", group="job", priority_class="low"))
    snap = w.snapshot(NAMES)
    snap.pods_per_cycle = 1
    state = SchedulerState()
    state.satisfied.add("default/job")  # it ran whole: taking replacements, it goes by priority
    result = schedule(snap, state, t0)
    assert result.deferred and "default/job-2b" not in result.bound
    assert not result.evicted
    w.apply(result)
    snap = w.snapshot(NAMES)
    snap.pods_per_cycle = 1
    after = schedule(snap, state, t0 + 1)
    assert after.bound == {"default/job-2b": "n3"} and not after.evicted


def _past_grace(replacement_cpu: str) -> tuple[World, SchedulerState, float]:
    """A gang of three that ran whole, stale for two minutes (its grace run out): job-2 failed on
    n2 (OutOfcpu) and its replacement job-2b asks ``replacement_cpu``."""
    t0 = DEFAULT_EPOCH + 100
    group = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0 - 120)})
    w = world(*NODES, group, running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-2", "n2"),
              pod("job-2b", cpu=replacement_cpu, group="job"))
    state = SchedulerState()
    state.satisfied.add("default/job")
    return w, state, t0


def test_a_replacement_that_fits_in_the_grace_end_cycle_binds_and_nothing_is_evicted() -> None:
    # The grace has run out, and in the same cycle the replacement of job-2 fits n2: it binds (the
    # jobs go before the stale phase) and the gang, whole, is neither evicted nor stale any more.
    w, state, t0 = _past_grace("4")
    result = schedule(w.snapshot(NAMES), state, t0)
    assert result.bound == {"default/job-2b": "n2"} and not result.evicted
    w.apply(result)
    assert "koordpy.io/stale-since" not in w.stores["podgroups"]["default/job"].annotations
    assert "default/job" not in state.stale_since


def test_a_gang_whose_replacements_fit_nowhere_is_evicted_after_its_grace() -> None:
    # The replacement asks for more than any node has (ReplacementsDoNotFit): no nomination holds the
    # gang, so once its grace has run it is evicted whole.
    w, state, t0 = _past_grace("5")
    result = schedule(w.snapshot(NAMES), state, t0)
    assert not result.bound
    assert {d.pod for d in result.evicted} == {"default/job-0", "default/job-1"}
    assert "default/job-2b" in result.waiting


def test_a_whole_gang_loses_a_stamp_left_from_before_a_restart_once() -> None:
    # A new scheduler finds a whole gang whose PodGroup still says stale-since (the old leader died
    # before clearing it): cleared in its first cycle, and not written again while the clear is in
    # flight and nothing changes.
    t0 = DEFAULT_EPOCH + 100
    group = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0 - 500)})
    w = world(*NODES, group, running("job-0", "n0"), running("job-1", "n1"), running("job-2", "n2"))
    state = SchedulerState()
    first = schedule(w.snapshot(NAMES), state, t0)
    marks = [d for d in first.decisions if isinstance(d, ObjectAnnotate)]
    assert [(d.key, d.value) for d in marks] == [("default/job", None)]
    assert not first.evicted
    again = schedule(w.snapshot(NAMES), state, t0 + 1)
    assert not again.decisions


def test_another_schedulers_gang_is_neither_marked_nor_evicted() -> None:
    t0 = DEFAULT_EPOCH + 100
    group = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0 - 500)})
    w = world(*NODES, group, running("job-0", "n0", scheduler="default-scheduler"),
              running("job-1", "n1", scheduler="default-scheduler"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), t0)
    assert not result.decisions



def test_a_composite_that_needs_two_of_three_children_is_not_stale_for_a_child_below_its_own() -> None:
    # minGroupCount 2 of three children (minCount 2 each): c2 lost a member, c0 and c1 run whole.
    # The composite meets its minimum; neither it nor the child c2 is stale.
    from tests.core.dialects.test_upstream_composite import child, composite
    from tests.core.test_stale import child_pod

    t0 = DEFAULT_EPOCH + 100
    objs = [node("node-1", cpu="64"), composite("job-1", count=2),
            *(child(f"c{i}", 2, parent="job-1") for i in range(3)),
            child_pod("a0", "c0", "Running"), child_pod("a1", "c0", "Running"),
            child_pod("b0", "c1", "Running"), child_pod("b1", "c1", "Running"),
            child_pod("d0", "c2", "Running"), child_pod("d1", "c2", "Failed")]
    w = world(*objs)
    state = SchedulerState()
    snap = w.snapshot(NAMES)
    snap.stale_grace = 0
    result = schedule(snap, state, t0)
    assert not result.evicted and not state.stale_since


def test_a_clear_in_flight_is_not_written_again_each_time_the_gang_changes() -> None:
    # Whole again at t0+100: the clear of its stale-since is written. Until the cache sees it, the
    # gang's pods change (the replacement starts running, its status updated): each such cycle must
    # not write the same clear again.
    t0 = DEFAULT_EPOCH + 100
    state = SchedulerState()
    first = world(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"),
                  out_of_cpu("job-2", "n2"))
    schedule(first.snapshot(NAMES), state, t0)
    said = podgroup("job", 3, annotations={"koordpy.io/stale-since": rfc3339(t0)})
    whole = world(*NODES, said, running("job-0", "n0"), running("job-1", "n1"), running("job-3", "n2"))
    state.view = None
    cleared = schedule(whole.snapshot(NAMES), state, t0 + 100)
    assert [type(d).__name__ for d in cleared.decisions].count("ObjectAnnotate") == 1
    for i in range(3):
        changed = world(*NODES, said, running("job-0", "n0"), running("job-1", "n1"),
                        running("job-3", "n2", labels={"step": str(i)}))
        state.view = None
        again = schedule(changed.snapshot(NAMES), state, t0 + 101 + i)
        assert not [d for d in again.decisions if type(d).__name__ == "ObjectAnnotate"]
    # Once the cache shows it cleared, the memory of it goes.
    seen = world(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"), running("job-3", "n2"))
    state.view = None
    last = schedule(seen.snapshot(NAMES), state, t0 + 110)
    assert not [d for d in last.decisions if type(d).__name__ == "ObjectAnnotate"]
    assert not state.stale_cleared


def test_an_eviction_skips_members_already_terminating_and_their_room_waits_until_they_are_gone() -> None:
    # Stale past its grace with job-1 already being deleted: only job-0 and job-3 are evicted. A pod
    # of another job that needs a whole node waits until an evicted member is gone (30 s), never
    # binding on room still held.
    from koordpy.sim.simulator import simulate

    t0 = DEFAULT_EPOCH
    group = podgroup("job", 4, annotations={"koordpy.io/stale-since": rfc3339(t0 - 120)})
    leaving = running("job-1", "n1")
    leaving["metadata"]["deletionTimestamp"] = rfc3339(t0 + 30)
    w = world(*NODES, node("n3", cpu="4"), group, running("job-0", "n0"), leaving, running("job-3", "n3"),
              out_of_cpu("job-2", "n2"))
    first = schedule(w.snapshot(NAMES), SchedulerState(), t0)
    assert {d.pod for d in first.evicted} == {"default/job-0", "default/job-3"}
    w.apply(first)
    again = schedule(w.snapshot(NAMES), SchedulerState(), t0 + 1)
    assert not again.evicted  # all terminating: nothing left to evict, not stale
    w2 = world(*NODES, node("n3", cpu="4"), group, running("job-0", "n0"), leaving, running("job-3", "n3"),
               out_of_cpu("job-2", "n2"), running("n2-user", "n2", group=None), pod("big", cpu="4"))
    state = SchedulerState()
    evicting = schedule(w2.snapshot(NAMES), state, t0)
    assert {d.pod for d in evicting.evicted} == {"default/job-0", "default/job-3"} and not evicting.bound
    w2.apply(evicting)
    assert not schedule(w2.snapshot(NAMES), state, t0 + 1).bound  # their room is still theirs
    result = simulate(w2)
    assert result.bound["default/big"] in {"n0", "n1", "n3"}


def _whole() -> World:
    """A gang of three running whole, one member a node."""
    return world(*NODES, podgroup("job", 3), running("job-0", "n0"), running("job-1", "n1"), running("job-2", "n2"))


def test_a_gang_on_a_node_whose_object_does_not_parse_is_not_lost_nor_evicted() -> None:
    # The live cache files a Node that does not parse (a field koordpy cannot read) under its invalid
    # objects, not its nodes. The node is there and its pods run: they still count, so the gang is
    # neither stale nor evicted (nor would it take replacements for members still running).
    t0 = DEFAULT_EPOCH + 100
    snap = _whole().snapshot(NAMES)
    snap.nodes = [n for n in snap.nodes if n.name != "n1"]
    snap.invalid_nodes = {"n1": "Node n1: status.allocatable.cpu: not a quantity: 'bogus'"}
    snap.stale_grace = 0
    state = SchedulerState()
    result = schedule(snap, state, t0)
    assert not result.evicted and not state.stale_since
    assert not state.standing_view().gangs["default/job"].lost


def test_a_node_deleted_while_its_object_did_not_parse_takes_its_members_then() -> None:
    # The same node n1 read, then unreadable (its members still count), then deleted: only then are
    # they lost, though the snapshot's nodes did not change between the last two cycles.
    t0 = DEFAULT_EPOCH + 100
    w = _whole()
    state = SchedulerState()

    def cycle(now: float, unread: dict[str, str] | None) -> Any:
        snap = w.snapshot(NAMES)
        snap.stale_grace = 0
        if unread is not None:
            snap.nodes = [n for n in snap.nodes if n.name != "n1"]
            snap.invalid_nodes = unread
        return schedule(snap, state, now)

    w.apply(cycle(t0, None))
    assert not cycle(t0 + 1, {"n1": "cannot be read"}).evicted
    assert not state.standing_view().gangs["default/job"].lost
    gone = cycle(t0 + 2, {})
    assert state.standing_view().gangs["default/job"].lost == {"default/job-1"}
    assert {d.pod for d in gone.evicted} == {"default/job-0", "default/job-1", "default/job-2"}


def test_a_gang_is_not_evicted_while_a_bound_pod_of_its_namespace_cannot_be_read() -> None:
    # job-2's object stopped parsing (the live cache files it under its invalid objects, out of the
    # snapshot's pods): its gang looks two short of three, but job-2 may run fine. Reported stale,
    # it is not evicted while a pod of its namespace cannot be read.
    t0 = DEFAULT_EPOCH + 100
    snap = _whole().snapshot(NAMES)
    snap.pods = [p for p in snap.pods if p.name != "job-2"]
    snap.invalid_pods = {"default/job-2": "Pod default/job-2: status.phase: cannot be read"}
    snap.stale_grace = 0
    assert not schedule(snap, SchedulerState(), t0).evicted
    snap.invalid_pods = {}
    assert schedule(snap, SchedulerState(), t0).evicted
