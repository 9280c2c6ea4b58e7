"""What the writer owes and when (issue 29, items 5 and 16): a condition's reason goes with its message;
one status write of a PodGroup in flight at a time, but one that never ends does not hold the next."""

from __future__ import annotations

import asyncio
from typing import Any

from koordpy.controller.reports import STATUS_INTERVAL, Reports
from tests.controller.test_shell import FakeCore, make_writer

POD = "default/p"


async def test_a_newer_conditions_reason_survives_the_write_before_it_landing() -> None:
    # Found by a review: the reason was kept beside the coalesced message and dropped when a write
    # landed, whatever reason was owed since, so a message owed while an older write was in flight
    # went out as Unschedulable (and a pod deleted before its write left its reason behind for ever).
    # The reason now travels with its message in the coalesced record.
    release = asyncio.Event()
    bodies: list[Any] = []

    class Slow(FakeCore):
        async def patch_namespaced_pod_status(self, name: str, ns: str, body: Any, **kw: Any) -> dict[str, Any]:
            bodies.append(body)
            if len(bodies) == 1:
                await release.wait()  # the first write is slow to land
            return {}

    writer = make_writer(Slow())
    writer.reports.settle = writer.reports.cooldown = 0.0
    on_pod = {"uid": "uid", "message": ""}
    writer.unschedulable(POD, "refused: priority", "SchedulerError")
    writer.flush(lambda pod: on_pod)
    await asyncio.sleep(0.01)
    writer.unschedulable(POD, "refused: preemption policy", "SchedulerError")  # owed while the first is in flight
    release.set()
    await asyncio.sleep(0.01)
    on_pod["message"] = "refused: priority"  # the first write landed
    writer.flush(lambda pod: on_pod)
    await writer.drain(1.0)
    reasons = [(b["status"]["conditions"][0]["message"], b["status"]["conditions"][0]["reason"]) for b in bodies]
    assert reasons == [("refused: priority", "SchedulerError"), ("refused: preemption policy", "SchedulerError")]


def test_a_status_write_that_never_ends_does_not_hold_the_podgroup_for_ever() -> None:
    # Found by a review: a PodGroup's next status waited for the write in flight (``_status_writing``)
    # with no limit. Writes through a proxy go on aiohttp with no timeout (transport._NO_TIMEOUT; the Wire,
    # with its 60 s, is not used then), so one request that never ends freezes the PodGroup's status
    # until the scheduler restarts or loses the Lease: the job's Finished is never written.
    r = Reports()
    group = "scheduling.sigs.k8s.io"
    running: dict[str, object] = {"phase": "Running", "running": 4}
    r.podgroup_status("default/g", running, group)
    assert r.due(0.0, lambda _: None, lambda g, k: None).statuses == [(group, "default/g", running)]
    finished: dict[str, object] = {"phase": "Finished", "running": 0, "succeeded": 4}
    r.podgroup_status("default/g", finished, group)
    # An hour on, the first write has not ended (it never will): the latest status must go.
    later = 3600.0 + STATUS_INTERVAL
    assert r.due(later, lambda _: None, lambda g, k: None).statuses == [(group, "default/g", finished)]
