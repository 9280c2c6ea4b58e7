"""Issue 20: the live scheduler writes the ``PodGroupInitiallyScheduled`` condition the core decides for
Kubernetes' own PodGroups to their API group (``scheduling.k8s.io/v1beta1``, ``podgroups/status``), as
the whole conditions list (a merge patch replaces the list), and reads the object's status back in
the same words so that a write already landed is not sent again."""

from __future__ import annotations

import asyncio
from typing import Any

from koordpy.api.workload import INITIALLY_SCHEDULED
from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import ApiWriter
from tests.builders import node
from tests.core.dialects.test_upstream import group, member

NAMES = frozenset({"koordpy"})
DISRUPTED = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "preempted", "lastTransitionTime": "2025-12-01T00:00:00Z"}


def rv(raw: dict[str, Any], version: int) -> dict[str, Any]:
    raw["metadata"]["resourceVersion"] = str(version)
    raw["metadata"]["uid"] = raw["metadata"]["name"]
    return raw


class Custom:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str, str, str, dict[str, Any]]] = []

    async def patch_namespaced_custom_object_status(self, group: str, version: str, ns: str, plural: str,
                                                    name: str, body: dict[str, Any], **_: Any) -> None:
        self.calls.append((group, version, ns, plural, name, body))


class Quiet:
    """Pods' conditions and Events: not what this test looks at."""

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> None:
            return None
        return call


async def test_the_writer_is_asked_for_the_whole_conditions_list_of_the_v1beta1_podgroup() -> None:
    cache = Cache()
    cache.observe("Node", None, rv(node("n0"), 1))
    pg = group(min_count=2)
    pg["status"] = {"conditions": [DISRUPTED]}
    cache.observe("WorkloadPodGroup", None, rv(pg, 2))
    cache.observe("Pod", None, rv(member("t-0"), 3))
    cache.observe("Pod", None, rv(member("t-1"), 4))
    writer = ApiWriter(api=object())
    custom = Custom()
    writer.custom = custom
    writer.core = Quiet()
    loop = SchedulerLoop(cache, writer, NAMES)
    await loop.cycle()
    writer.flush(loop._pending_info, loop._status_now)
    for _ in range(5):
        await asyncio.sleep(0)
    if writer._tasks:
        await asyncio.wait(set(writer._tasks), timeout=10)
    [(api_group, version, ns, plural, name, body)] = custom.calls
    assert (api_group, version, ns, plural, name) == ("scheduling.k8s.io", "v1beta1", "default", "podgroups", "train")
    conditions = body["status"]["conditions"]
    assert conditions[0] == DISRUPTED  # another writer's condition, written back
    ours = conditions[1]
    assert (ours["type"], ours["status"], ours["reason"]) == (INITIALLY_SCHEDULED, "False", "Unschedulable")
    assert ours["message"] and isinstance(ours["lastTransitionTime"], str)
    assert set(body["status"]) == {"conditions"}
    # The write comes back on the watch: the cache's status reads as what was written.
    pg["status"] = body["status"]
    cache.observe("WorkloadPodGroup", "MODIFIED", rv(pg, 5))
    assert loop._status_now("podgroups.scheduling.k8s.io", "default/train") == body["status"]
