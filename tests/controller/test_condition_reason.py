"""What the writer owes (issue 29, item 5): a condition's reason goes with its message."""

from __future__ import annotations

import asyncio
from typing import Any

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
