"""The live shell's side of preemption, without an API server: the cache's optimistic victims and
nominations, the writer's requests, and the loop's dispatch of Preempt and Nominate decisions.

tests/integration/test_preemption.py runs the same on a real control plane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.controller import loop as loop_module
from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import MERGE_PATCH, ApiWriter
from koordpy.core.decisions import CycleResult, Nominate, Preempt
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from tests.builders import node, pod

NAMES = frozenset({"koordpy"})
MESSAGE = ("koordpy: preempting to accommodate higher priority pods, preemptor: default/job, "
           "triggerpod: default/job-0")


def rv(obj: dict[str, Any], version: int, uid: str = "") -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(version)
    if uid:
        obj["metadata"]["uid"] = uid
    return obj


def terminating_victim(version: int) -> dict[str, Any]:
    raw = rv(pod("victim", node_name="n1"), version, "v1")
    raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    raw["status"] = {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                     "reason": "PreemptionByScheduler", "message": MESSAGE}]}
    return raw


def shown(cache: Cache, name: str) -> Any:
    return next(p for p in cache.snapshot(NAMES).pods if p.name == name)


# -- cache -------------------------------------------------------------------------------------


def test_a_victim_is_terminating_in_the_next_snapshot_until_the_watch_says_so() -> None:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("victim", node_name="n1"), 2, "v1"))
    cache.assume_preempted("default/victim")
    first = shown(cache, "victim")
    assert first.deleting and first.preempted and first.node_name == "n1"  # still holds its room
    assert shown(cache, "victim") is first  # the same object: the core sees no change
    assert not cache.pods["default/victim"].deleting  # the cached object itself is untouched
    cache.observe("Pod", "MODIFIED", terminating_victim(3))
    assert cache.preempting == {}
    assert shown(cache, "victim") is cache.pods["default/victim"]
    cache.observe("Pod", "DELETED", terminating_victim(4))
    assert [p.name for p in cache.snapshot(NAMES).pods] == []


def test_a_failed_preemption_is_undone() -> None:
    cache = Cache()
    cache.observe("Pod", None, rv(pod("victim", node_name="n1"), 2, "v1"))
    cache.assume_preempted("default/victim")
    cache.changed.clear()
    cache.forget_preempted("default/victim")
    assert cache.changed.is_set()
    assert not shown(cache, "victim").deleting


def test_a_victim_whose_condition_came_back_but_not_its_deletion_stays_terminating() -> None:
    cache = Cache()
    cache.observe("Pod", None, rv(pod("victim", node_name="n1"), 2, "v1"))
    cache.assume_preempted("default/victim")
    marked = terminating_victim(3)
    del marked["metadata"]["deletionTimestamp"]  # the condition is written before the delete
    cache.observe("Pod", "MODIFIED", marked)
    assert "default/victim" in cache.preempting
    victim = shown(cache, "victim")
    assert victim.deleting and victim.preempted


def test_a_nomination_shows_at_once_and_the_watch_event_replaces_it() -> None:
    cache = Cache()
    cache.observe("Pod", None, rv(pod("member"), 2, "m1"))
    assert cache.nominated_node("default/member") == ""
    assert cache.nominated_node("default/nobody") is None
    cache.assume_nominated("default/member", "n5")
    assert shown(cache, "member").nominated_node_name == "n5"
    assert cache.nominated_node("default/member") == "n5"
    unrelated = rv(pod("member", memory="2Gi"), 3, "m1")  # an event from before the write landed
    cache.observe("Pod", "MODIFIED", unrelated)
    assert shown(cache, "member").nominated_node_name == "n5"
    confirmed = rv(pod("member", memory="2Gi"), 4, "m1")
    confirmed["status"] = {"nominatedNodeName": "n5"}
    cache.observe("Pod", "MODIFIED", confirmed)
    assert cache.nominated == {}
    assert shown(cache, "member") is cache.pods["default/member"]
    cache.assume_nominated("default/member", "")  # cleared
    assert shown(cache, "member").nominated_node_name == ""
    cache.forget_nominated("default/member")  # the write failed
    assert shown(cache, "member").nominated_node_name == "n5"


def test_a_nominated_pod_that_binds_drops_its_nomination() -> None:
    cache = Cache()
    cache.observe("Pod", None, rv(pod("member"), 2, "m1"))
    cache.assume_nominated("default/member", "n5")
    cache.observe("Pod", "MODIFIED", rv(pod("member", node_name="n5"), 3, "m1"))
    assert cache.nominated == {}


# -- writer ------------------------------------------------------------------------------------


class FakeCore:
    """CoreV1Api's pod writes, recorded; ``fail`` maps a call to the ApiException statuses it raises
    first, one per call."""

    def __init__(self, **fail: list[int]) -> None:
        self.calls: list[tuple[str, str, str, Any, dict[str, Any]]] = []
        self.fail = fail

    def _answer(self, call: str) -> None:
        failures = self.fail.get(call) or []
        if failures:
            exc = ApiException(status=failures.pop(0), reason="test")
            if exc.status == 422:  # what the API server says when the patch's uid is not the pod's
                exc.body = b'{"message": "metadata.uid: Invalid value: \\"v1\\": field is immutable"}'
            raise exc

    async def patch_namespaced_pod_status(self, name: str, ns: str, body: Any, **kw: Any) -> None:
        self.calls.append(("patch_status", ns, name, body, kw))
        self._answer("patch_status")

    async def delete_namespaced_pod(self, name: str, ns: str, **kw: Any) -> None:
        self.calls.append(("delete", ns, name, kw.pop("body", None), kw))
        self._answer("delete")


async def writer_with(core: FakeCore) -> tuple[ApiWriter, ApiClient]:
    api = ApiClient(Configuration())
    writer = ApiWriter(api)
    writer.core = core
    return writer, api


async def test_a_victim_gets_its_condition_then_is_deleted_with_its_own_grace_period() -> None:
    core = FakeCore()
    writer, api = await writer_with(core)
    try:
        assert await writer.preempt("ns/victim", "v1", MESSAGE)
    finally:
        await api.close()
    (what, ns, name, body, kw), (what2, ns2, name2, options, kw2) = core.calls
    assert (what, ns, name, what2, ns2, name2) == ("patch_status", "ns", "victim", "delete", "ns", "victim")
    [cond] = body["status"]["conditions"]
    assert {k: cond[k] for k in ("type", "status", "reason", "message")} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "message": MESSAGE}
    assert cond["lastTransitionTime"].endswith("Z")
    assert body["metadata"] == {"uid": "v1"}
    assert "_content_type" not in kw  # a strategic merge: the pod's other conditions stay
    assert options["preconditions"] == {"uid": "v1"}
    assert "gracePeriodSeconds" not in options and "grace_period_seconds" not in kw2


@pytest.mark.parametrize(("fail", "deleted"), [
    ({"delete": [404]}, True),  # gone between the two writes
    ({"delete": [409]}, True),  # the uid precondition failed: another pod holds the name
    ({"patch_status": [404]}, False),  # gone before the condition
    ({"patch_status": [422]}, False),  # the name belongs to another pod: it is left alone
])
async def test_a_victim_already_gone_is_no_error(fail: dict[str, list[int]], deleted: bool) -> None:
    core = FakeCore(**fail)
    writer, api = await writer_with(core)
    try:
        assert await writer.preempt("ns/victim", "v1", MESSAGE)
    finally:
        await api.close()
    assert [c[0] for c in core.calls] == (["patch_status", "delete"] if deleted else ["patch_status"])


async def test_a_victim_that_cannot_be_marked_is_not_deleted_and_the_caller_is_told() -> None:
    core = FakeCore(patch_status=[403])
    writer, api = await writer_with(core)
    try:
        assert not await writer.preempt("ns/victim", "v1", MESSAGE)
    finally:
        await api.close()
    assert [c[0] for c in core.calls] == ["patch_status"]


async def test_a_nomination_is_a_merge_patch_and_an_empty_node_removes_it() -> None:
    core = FakeCore()
    writer, api = await writer_with(core)
    try:
        assert await writer.nominate("ns/member", "m1", "node-5")
        assert await writer.nominate("ns/member", "m1", "")
        core.fail["patch_status"] = [403]
        assert not await writer.nominate("ns/member", "m1", "node-6")
        core.fail["patch_status"] = [404]
        assert await writer.nominate("ns/gone", "g1", "node-6")  # nothing left to nominate
    finally:
        await api.close()
    bodies = [c[3] for c in core.calls]
    assert bodies[0] == {"status": {"nominatedNodeName": "node-5"}, "metadata": {"uid": "m1"}}
    assert bodies[1]["status"] == {"nominatedNodeName": None}  # JSON null deletes the field
    assert all(c[4]["_content_type"] == MERGE_PATCH for c in core.calls)


async def test_a_nomination_refused_because_the_pod_is_bound_already_is_no_failure() -> None:
    """A nomination written in the background can land after the pod's own bind (a gang's victims
    went fast and the next cycle bound it): the API server then refuses the nomination (422, "may
    not be set on pods that are already bound"). The pod has its node, so nothing is left to
    nominate: it is no error (bench_workloads' preemption rounds logged one per gang member)."""
    class BoundCore(FakeCore):
        def _answer(self, call: str) -> None:
            exc = ApiException(status=422, reason="Unprocessable Entity")
            exc.body = (b'{"kind":"Status","message":"Pod \\"member\\" is invalid: status.nominatedNodeName: '
                        b'Forbidden: may not be set on pods that are already bound to a node","reason":"Invalid"}')
            raise exc

    writer, api = await writer_with(BoundCore())
    try:
        assert await writer.nominate("ns/member", "m1", "node-5")
    finally:
        await api.close()


async def test_a_nomination_found_moot_when_its_turn_comes_is_not_sent() -> None:
    core = FakeCore()
    writer, api = await writer_with(core)
    try:
        assert await writer.nominate("ns/member", "m1", "node-5", moot=lambda: True)
        assert await writer.nominate("ns/other", "o1", "node-5", moot=lambda: False)
    finally:
        await api.close()
    assert [c[2] for c in core.calls] == ["other"]
    assert writer.skipped == {("pod-status", "moot"): 1}


async def test_a_nomination_does_not_wait_behind_the_victims_writes() -> None:
    """A job's victims are two writes each; its nominations went through the same few connections
    after them and landed once the pods were bound already (refused, 62 of 100 in a GangPreemptionPodGroups
    round). kube-scheduler sets the nominated node as it starts deleting the victims."""
    release = asyncio.Event()

    class SlowDeletes(FakeCore):
        async def delete_namespaced_pod(self, name: str, ns: str, **kw: Any) -> None:
            await release.wait()
            await super().delete_namespaced_pod(name, ns, **kw)

    core = SlowDeletes()
    writer, api = await writer_with(core)
    try:
        victims = [asyncio.ensure_future(writer.preempt(f"ns/v{i}", f"v{i}", MESSAGE)) for i in range(40)]
        await asyncio.sleep(0)
        assert await asyncio.wait_for(writer.nominate("ns/member", "m1", "node-5"), 5)
        assert ("patch_status", "ns", "member") in [c[:3] for c in core.calls]
        release.set()
        assert all(await asyncio.gather(*victims))
    finally:
        await api.close()


# -- loop --------------------------------------------------------------------------------------


class RecordingWriter:
    """The writer's surface the loop uses; preempt and nominate answer ``ok`` and are awaited."""

    def __init__(self, ok: bool = True) -> None:
        self.ok = ok
        self.preempts: list[tuple[str, str, str]] = []
        self.nominations: list[tuple[str, str, str]] = []
        self.moot: list[str] = []
        self.events: list[tuple[str, str, str, str, str]] = []
        self.tasks: list[asyncio.Future[None]] = []

    def spawn(self, what: Coroutine[Any, Any, None]) -> None:
        self.tasks.append(asyncio.ensure_future(what))

    spawn_owed = spawn

    async def preempt(self, pod_key: str, uid: str, message: str) -> bool:
        self.preempts.append((pod_key, uid, message))
        return self.ok

    async def nominate(self, pod_key: str, uid: str, node_name: str, moot: Any = None) -> bool:
        if moot is not None and moot():  # as the writer does when the write's turn comes
            self.moot.append(pod_key)
            return True
        self.nominations.append((pod_key, uid, node_name))
        return self.ok

    async def event(self, kind: str, obj: str, uid: str, type_: str, reason: str, message: str) -> None:
        self.events.append((obj, uid, type_, reason, message))

    def unschedulable(self, pod_key: str, message: str, reason: str = "Unschedulable") -> None:
        pass

    def gang_status(self, key: str, status: dict[str, object], kind: Any = None) -> None:
        pass

    def flush(self, still_pending: Any, status_now: Any = None) -> None:
        pass

    async def settle(self) -> None:
        while self.tasks:  # what a write spawns (a victim's Event) too
            tasks, self.tasks = self.tasks, []
            await asyncio.gather(*tasks)


def preemption_cycle(monkeypatch: pytest.MonkeyPatch, decisions: list[Any]) -> None:
    def schedule(snapshot: Snapshot, state: SchedulerState, now: float) -> CycleResult:
        return CycleResult(decisions=list(decisions))

    monkeypatch.setattr(loop_module, "schedule", schedule)


def preemption_cache() -> Cache:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("victim", node_name="n1"), 2, "v1"))
    cache.observe("Pod", None, rv(pod("job-0"), 3, "j0"))
    already = rv(pod("job-1"), 4, "j1")
    already["status"] = {"nominatedNodeName": "n1"}
    cache.observe("Pod", None, already)
    return cache


async def test_the_loop_preempts_and_nominates_and_the_next_snapshot_shows_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = preemption_cache()
    writer = RecordingWriter()
    loop = SchedulerLoop(cache, writer, NAMES)  # type: ignore[arg-type]
    preemption_cycle(monkeypatch, [Preempt("default/victim", MESSAGE, "default/job", "default/job-0"),
                                   Nominate("default/job-0", "n1"), Nominate("default/job-1", "n1"),
                                   Nominate("default/gone", "n1")])
    await loop.cycle()
    snap = {p.key: p for p in cache.snapshot(NAMES).pods}  # before any write has answered
    assert snap["default/victim"].deleting and snap["default/victim"].preempted
    assert snap["default/job-0"].nominated_node_name == "n1"
    await writer.settle()
    assert writer.preempts == [("default/victim", "v1", MESSAGE)]
    # job-1 already says n1 and default/gone is not in the cache: neither is written.
    assert writer.nominations == [("default/job-0", "j0", "n1")]
    assert writer.events == [("default/victim", "v1", "Normal", "Preempted", MESSAGE)]
    await loop.cycle()  # the core says the same again before the watch caught up: nothing new
    await writer.settle()
    assert len(writer.nominations) == 1


async def test_a_nomination_of_a_pod_bound_meanwhile_is_not_written_nor_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = preemption_cache()
    writer = RecordingWriter()
    loop = SchedulerLoop(cache, writer, NAMES)  # type: ignore[arg-type]
    preemption_cycle(monkeypatch, [Nominate("default/job-0", "n1")])
    await loop.cycle()  # the write is spawned, not yet run
    cache.assume("default/job-0", "n1")  # the pod's bind is decided before the write's turn
    await writer.settle()
    assert writer.nominations == [] and writer.moot == ["default/job-0"]
    # Not kept as written: were the bind to fail, the core would nominate again, and the write go out.
    cache.forget("default/job-0")
    assert {p.key: p for p in cache.snapshot(NAMES).pods}["default/job-0"].nominated_node_name == ""
    await loop.cycle()
    await writer.settle()
    assert writer.nominations == [("default/job-0", "j0", "n1")]


async def test_failed_preemption_writes_are_undone_in_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = preemption_cache()
    writer = RecordingWriter(ok=False)
    loop = SchedulerLoop(cache, writer, NAMES)  # type: ignore[arg-type]
    preemption_cycle(monkeypatch, [Preempt("default/victim", MESSAGE, "default/job", "default/job-0"),
                                   Nominate("default/job-0", "n1"), Nominate("default/job-1", "")])
    await loop.cycle()
    await writer.settle()
    assert len(writer.nominations) == 2 and writer.events == []  # no Preempted event for what failed
    snap = {p.key: p for p in cache.snapshot(NAMES).pods}
    assert not snap["default/victim"].deleting
    assert snap["default/job-0"].nominated_node_name == ""
    assert snap["default/job-1"].nominated_node_name == "n1"
    assert cache.changed.is_set()  # so the core looks again
