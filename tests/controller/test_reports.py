"""The writer's pacing policy (koordpy.controller.reports) on a fake clock: no I/O, no sleeping.

The same rules are exercised through ApiWriter in tests/controller/test_scale.py; here the clock is a number
the test moves, which the policy can take only because it is injected (``now``)."""

from __future__ import annotations

from koordpy.api.kinds import by_id
from koordpy.controller.reports import STATUS_INTERVAL, Reports

POD = "default/p"

# Statuses are paced by the object's kind, a ``Kind.id`` (the registry's): two kinds' objects of one
# namespace/name are two objects.
KOORD = by_id("podgroups.scheduling.sigs.k8s.io").id
VOLCANO = by_id("podgroups.scheduling.volcano.sh").id


def waiting(message: str = "") -> dict[str, str]:
    return {"uid": "u", "message": message}


def test_a_condition_waits_to_settle_then_for_its_cooldown() -> None:
    r = Reports(settle=1.0, cooldown=5.0, now=100.0)
    r.unschedulable(POD, "no room", now=100.0)
    assert r.due(100.5, lambda _: waiting(), lambda g, k: None).conditions == []  # still settling
    due = r.due(101.0, lambda _: waiting(), lambda g, k: None)
    assert due.conditions == [(POD, "u", "no room", "Unschedulable")]
    r.unschedulable(POD, "still no room", now=102.0)
    r.condition_failed(POD, "no room")  # the write failed: not in flight any more
    assert r.due(105.9, lambda _: waiting(), lambda g, k: None).conditions == []  # within the cooldown
    assert r.due(106.0, lambda _: waiting(), lambda g, k: None).conditions == [
        (POD, "u", "still no room", "Unschedulable")]


def test_a_condition_in_flight_or_on_the_pod_is_skipped_and_a_bound_pod_owes_none() -> None:
    r = Reports(settle=0.0, cooldown=0.0)
    r.unschedulable(POD, "no room", now=0.0)
    assert r.due(0.0, lambda _: waiting(), lambda g, k: None).conditions == [(POD, "u", "no room", "Unschedulable")]
    r.unschedulable(POD, "no room", now=1.0)  # sent, not yet back on the watch
    assert r.due(1.0, lambda _: waiting(), lambda g, k: None).skipped == [("pod-status", "unchanged")]
    r.unschedulable(POD, "no room", now=2.0)  # on the pod already
    assert r.due(2.0, lambda _: waiting("no room"), lambda g, k: None).skipped == [("pod-status", "unchanged")]
    r.unschedulable(POD, "other", now=3.0)
    assert r.due(3.0, lambda _: None, lambda g, k: None).conditions == []  # bound or gone meanwhile
    r.unschedulable(POD, "other", now=4.0)
    r.bound(POD)
    assert r.due(4.0, lambda _: waiting(), lambda g, k: None).conditions == []


def test_a_podgroup_status_is_paced_within_a_phase_and_written_at_once_on_a_new_one() -> None:
    r = Reports()
    base: dict[str, object] = {"phase": "Scheduled", "running": 0}
    r.gang_status("default/g", base, KOORD)
    assert r.due(10.0, lambda _: None, lambda g, k: None).statuses == [
        (KOORD, "default/g", base)]
    r.status_done(KOORD, "default/g")  # the write ended
    later = {**base, "running": 3}
    r.gang_status("default/g", later, KOORD)
    assert r.due(10.0 + STATUS_INTERVAL / 2, lambda _: None, lambda g, k: None).statuses == []  # paced
    assert r.due(10.0 + STATUS_INTERVAL, lambda _: None, lambda g, k: None).statuses == [
        (KOORD, "default/g", later)]
    r.status_done(KOORD, "default/g")
    running = {"phase": "Running", "running": 4}
    r.gang_status("default/g", running, KOORD)
    assert r.due(10.0 + STATUS_INTERVAL, lambda _: None, lambda g, k: None).statuses != []  # a new phase: at once
    # What the object says already is not written (the values compared as the dialect spells them).
    r.gang_status("default/g", {"phase": "Running", "since": "1970-01-01T00:00:07Z"}, KOORD)
    due = r.due(100.0, lambda _: None, lambda g, k: {"phase": "Running", "since": "1970-01-01T00:00:07Z"})
    assert due.statuses == [] and due.skipped == [("podgroup-status", "unchanged")]


def test_a_failed_status_write_is_sent_again() -> None:
    r = Reports()
    st: dict[str, object] = {"phase": "Scheduled"}
    r.gang_status("default/g", st, VOLCANO)
    assert r.due(0.0, lambda _: None, lambda g, k: None).statuses
    r.gang_status("default/g", st, VOLCANO)
    assert r.due(5.0, lambda _: None, lambda g, k: None).skipped == [("podgroup-status", "unchanged")]
    r.status_done(VOLCANO, "default/g")
    r.status_failed(VOLCANO, "default/g", st)
    r.gang_status("default/g", st, VOLCANO)
    assert r.due(6.0, lambda _: None, lambda g, k: None).statuses == [(VOLCANO, "default/g", st)]


GROUP = KOORD


def in_flight(status: dict[str, object]) -> Reports:
    """Reports with ``status`` of PodGroup default/g sent at time 0 and its write not ended."""
    r = Reports()
    r.gang_status("default/g", status, GROUP)
    assert r.due(0.0, lambda _: None, lambda g, k: None).statuses == [(GROUP, "default/g", status)]
    return r


def test_a_status_waits_for_the_write_of_the_same_podgroup_in_flight() -> None:
    # Issue 29, item 16: two merge patches of one PodGroup in flight at once may land in either
    # order; "Scheduling, scheduled: 3" landing after "Scheduled, scheduled: 4" stood.
    group = GROUP
    first: dict[str, object] = {"phase": "Scheduling", "scheduled": 3}
    r = in_flight(first)
    latest: dict[str, object] = {"phase": "Scheduled", "scheduled": 4}
    r.gang_status("default/g", latest, group)  # a new phase, which would go at once
    r.gang_status("default/h", first, group)  # another PodGroup is not held
    assert r.due(0.1, lambda _: None, lambda g, k: None).statuses == [(group, "default/h", first)]
    assert r.due(5.0, lambda _: None, lambda g, k: None).statuses == []
    r.status_done(group, "default/g")
    assert r.due(5.1, lambda _: None, lambda g, k: None).statuses == [(group, "default/g", latest)]


def test_the_policy_reads_no_clock_of_its_own() -> None:
    import ast
    import inspect

    import koordpy.controller.reports as reports

    tree = ast.parse(inspect.getsource(reports))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"time", "asyncio", "datetime", "aiohttp", "kubernetes_asyncio"}, imported


def test_a_status_write_that_never_ends_does_not_hold_the_podgroup_for_ever() -> None:
    # Found by a review: a PodGroup's next status waited for the write in flight (``_status_writing``)
    # with no limit. Writes through a proxy go on aiohttp with no timeout (transport._NO_TIMEOUT; the Wire,
    # with its 60 s, is not used then), so one request that never ends froze the PodGroup's status
    # until the scheduler restarted or lost the Lease: the job's Finished was never written.
    r = in_flight({"phase": "Running", "running": 4})
    finished: dict[str, object] = {"phase": "Finished", "running": 0, "succeeded": 4}
    r.gang_status("default/g", finished, GROUP)
    # An hour on, the first write has not ended (it never will): the latest status must go.
    later = 3600.0 + STATUS_INTERVAL
    assert r.due(later, lambda _: None, lambda g, k: None).statuses == [(GROUP, "default/g", finished)]


def test_two_gang_kinds_objects_of_one_name_are_paced_apart() -> None:
    """A scheduler-plugins and a Volcano PodGroup both named default/g: each one's status goes at once,
    and neither's write in flight holds the other's."""
    r = Reports()
    koord: dict[str, object] = {"phase": "Scheduled", "scheduled": 2}
    volcano: dict[str, object] = {"phase": "Inqueue", "running": 0}
    r.gang_status("default/g", koord, KOORD)
    r.gang_status("default/g", volcano, VOLCANO)
    assert r.due(0.0, lambda _: None, lambda g, k: None).statuses == [(KOORD, "default/g", koord),
                                                                      (VOLCANO, "default/g", volcano)]
    later: dict[str, object] = {"phase": "Running", "running": 2}
    r.gang_status("default/g", later, VOLCANO)  # a new phase while KOORD's write is in flight
    assert r.due(0.1, lambda _: None, lambda g, k: None).statuses == []  # its own write is in flight
    r.status_done(VOLCANO, "default/g")
    assert r.due(0.2, lambda _: None, lambda g, k: None).statuses == [(VOLCANO, "default/g", later)]
    # What the cache says of one kind's object is not taken for the other's.
    r.status_done(KOORD, "default/g")
    running: dict[str, object] = {"phase": "Running", "running": 3}
    r.gang_status("default/g", running, KOORD)
    r.gang_status("default/g", running, VOLCANO)
    r.status_done(VOLCANO, "default/g")
    due = r.due(10.0, lambda _: None, lambda g, k: running if g == VOLCANO else None)
    assert due.statuses == [(KOORD, "default/g", running)] and due.skipped == [("podgroup-status", "unchanged")]
