"""The live shell's side of stale gangs (issue 33 item 1), without an API server: the loop applies
an ``Evict`` as it applies a ``Preempt`` (the member assumed terminating at once, then
DisruptionTarget with the stale reason and a delete), and an ``ObjectAnnotate`` as a merge patch of
the object's metadata; the writer's requests."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from koordpy.api.kinds import by_id
from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.metrics import Metrics
from koordpy.controller.writer import MERGE_PATCH, ApiWriter
from koordpy.core.decisions import Evict, ObjectAnnotate
from tests.builders import node, pod
from tests.controller.test_controller_preemption import (
    NAMES,
    FakeCore,
    RecordingWriter,
    preemption_cycle,
    rv,
    writer_with,
)

MESSAGE = ("gang default/job ran below its minimum (1 member running, minimum 2) for its grace of 60s: "
           "evicted so that its controller starts it again whole")
PODGROUP = by_id("podgroups.scheduling.sigs.k8s.io")


async def test_a_stale_member_gets_the_stale_reason_then_is_deleted() -> None:
    core = FakeCore()
    writer, api = await writer_with(core)
    try:
        assert await writer.preempt("ns/job-0", "u0", MESSAGE, "StaleGangEviction")
    finally:
        await api.close()
    (what, _, name, body, _), (what2, _, _, options, _) = core.calls
    assert (what, name, what2) == ("patch_status", "job-0", "delete")
    [cond] = body["status"]["conditions"]
    assert {k: cond[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "StaleGangEviction", "message": MESSAGE}
    assert options["preconditions"] == {"uid": "u0"}


class FakeCustom:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def patch_namespaced_custom_object(self, *args: Any, **kw: Any) -> None:
        self.calls.append((*args, kw))


@pytest.mark.parametrize("value", ["2027-01-15T08:00:00Z", None])
async def test_an_object_annotation_is_a_merge_patch_of_its_metadata(value: str | None) -> None:
    api = ApiClient(Configuration())
    writer = ApiWriter(api)
    custom = writer.custom = FakeCustom()
    try:
        await writer.annotate_object(PODGROUP, "ns/job", "koordpy.io/stale-since", value)
    finally:
        await api.close()
    [(group, version, ns, plural, name, body, kw)] = custom.calls
    assert (group, version, ns, plural, name) == ("scheduling.sigs.k8s.io", "v1alpha1", "ns", "podgroups", "job")
    assert body == {"metadata": {"annotations": {"koordpy.io/stale-since": value}}}  # null removes it
    assert kw["_content_type"] == MERGE_PATCH


class StaleWriter(RecordingWriter):
    def __init__(self, ok: bool = True) -> None:
        super().__init__(ok)
        self.evictions: list[tuple[str, str, str, str]] = []
        self.annotations: list[tuple[str, str, str, str | None]] = []

    async def preempt(self, pod_key: str, uid: str, message: str, reason: str = "PreemptionByScheduler") -> bool:
        self.evictions.append((pod_key, uid, message, reason))
        return self.ok

    async def annotate_object(self, kind: Any, key: str, annotation: str, value: str | None) -> None:
        self.annotations.append((kind.id, key, annotation, value))


def stale_cache() -> Cache:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("job-0", node_name="n1", group="job"), 2, "u0"))
    return cache


@pytest.mark.parametrize("ok", [True, False])
async def test_the_loop_evicts_and_the_next_snapshot_shows_the_member_terminating(
        monkeypatch: pytest.MonkeyPatch, ok: bool) -> None:
    cache = stale_cache()
    writer = StaleWriter(ok)
    metrics = Metrics()
    loop = SchedulerLoop(cache, writer, NAMES, metrics=metrics)  # type: ignore[arg-type]
    preemption_cycle(monkeypatch, [Evict("default/job-0", MESSAGE, "default/job"),
                                   ObjectAnnotate(PODGROUP, "default/job", "koordpy.io/stale-since", None)])
    await loop.cycle()
    member = next(p for p in cache.snapshot(NAMES).pods if p.name == "job-0")
    assert member.deleting  # before any write answered: the next cycle neither counts it nor evicts it again
    await writer.settle()
    assert writer.evictions == [("default/job-0", "u0", MESSAGE, "StaleGangEviction")]
    assert writer.annotations == [(PODGROUP.id, "default/job", "koordpy.io/stale-since", None)]
    # Counted once written: a failed eviction is decided again by a later cycle, and counted then.
    assert metrics.registry.get_sample_value("koordpy_stale_gang_evictions_total") == (1 if ok else 0)
    if ok:
        assert writer.events == [("default/job-0", "u0", "Warning", "StaleGangEviction", MESSAGE)]
    else:  # the write failed: the member is shown running again, so the core decides anew
        assert writer.events == []
        assert not next(p for p in cache.snapshot(NAMES).pods if p.name == "job-0").deleting
