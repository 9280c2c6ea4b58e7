"""Issue 10's rules for the live shell: a snapshot says what changed, and writes that change
nothing are not made (PodGroup statuses compared with the cache and coalesced)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from koordpy.api.kinds import by_id
from koordpy.api.podgroup import PodGroupStatus
from koordpy.controller.cache import Cache
from koordpy.controller.writer import STATUS_INTERVAL, ApiWriter
from koordpy.core.cycle import schedule
from koordpy.core.dialects.koordinator import PodGroupGangStatus
from koordpy.core.state import SchedulerState
from tests.builders import node, pod, podgroup

NAMES = frozenset({"koordpy"})


def _rv(raw: dict[str, Any], rv: int) -> dict[str, Any]:
    raw["metadata"]["resourceVersion"] = str(rv)
    return raw


def test_a_snapshot_carries_only_what_changed_since_the_last() -> None:
    cache = Cache()
    for i in range(3):
        cache.observe("Node", None, _rv(node(f"n{i}"), 10 + i))
    for i in range(4):
        cache.observe("Pod", None, _rv(pod(f"p{i}", cpu="1"), 20 + i))
    first = cache.snapshot(NAMES)
    assert first.changes is not None and set(first.changes.pods) == {f"default/p{i}" for i in range(4)}
    assert cache.snapshot(NAMES).changes.pods == {}  # type: ignore[union-attr]
    cache.assume("default/p1", "n0")
    cache.observe("Pod", "DELETED", _rv(pod("p2", cpu="1"), 30))
    snap = cache.snapshot(NAMES)
    assert snap.changes is not None and snap.changes.number == first.changes.number + 2
    assert set(snap.changes.pods) == {"default/p1", "default/p2"}
    assert snap.changes.pods["default/p2"] is None
    shown = snap.changes.pods["default/p1"]
    assert shown is not None and shown.node_name == "n0"  # the assumption shows
    assert sorted(p.key for p in snap.pods) == ["default/p0", "default/p1", "default/p3"]


def test_a_podgroup_change_rechecks_its_pending_pods_annotations() -> None:
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0"), 1))
    bad = pod("a-0", cpu="1", group="a", annotations={"gang.scheduling.koordinator.sh/network-topology-index": "x"})
    cache.observe("Pod", None, _rv(bad, 2))
    cache.observe("Pod", None, _rv(pod("b-0", cpu="1", group="b"), 3))
    snap = cache.snapshot(NAMES)
    assert "default/a-0" in cache.rejected and [p.key for p in snap.pods] == ["default/b-0"]
    # PodGroup b appears: its pod is checked again (and still fine); a's pod is not touched.
    cache.observe("PodGroup", None, _rv(podgroup("b", 1), 4))
    snap = cache.snapshot(NAMES)
    assert snap.changes is not None and set(snap.changes.pods) <= {"default/b-0"}
    assert "default/a-0" in cache.rejected


def test_incremental_snapshots_schedule_like_full_ones() -> None:
    """The view fed with the cache's changes and one fed by comparing every pod agree, cycle by cycle."""
    cache = Cache()
    for i in range(4):
        cache.observe("Node", None, _rv(node(f"n{i}", cpu="8"), 1 + i))
    state_inc, state_full = SchedulerState(), SchedulerState()
    rv = 100
    for round_ in range(6):
        cache.observe("PodGroup", None, _rv(podgroup(f"g{round_}", 2), rv))
        for i in range(2):
            rv += 1
            cache.observe("Pod", None, _rv(pod(f"g{round_}-{i}", cpu="4", group=f"g{round_}"), rv))
        if round_ == 4:  # a running pod goes away: room for the waiting gangs
            rv += 1
            cache.observe("Pod", "DELETED", _rv(pod("g0-0", cpu="4", group="g0"), rv))
        snap = cache.snapshot(NAMES)
        full = type(snap)(**{**snap.__dict__, "changes": None})
        inc = schedule(snap, state_inc, 1000.0 + round_)
        ref = schedule(full, state_full, 1000.0 + round_)
        assert sorted((b.pod, b.node) for b in inc.binds) == sorted((b.pod, b.node) for b in ref.binds)
        assert inc.waiting == ref.waiting
        for b in inc.binds:
            cache.assume(b.pod, b.node)


class _Custom:
    def __init__(self) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []

    async def patch_namespaced_custom_object_status(self, group: str, version: str, ns: str, plural: str,
                                                    name: str, body: dict[str, Any], **_: Any) -> None:
        self.patches.append((f"{ns}/{name}", body["status"]))


@pytest.fixture
async def writer() -> ApiWriter:
    w = ApiWriter(api=object())
    w.custom = _Custom()
    return w


async def _settle(w: ApiWriter) -> None:
    for _ in range(5):
        await asyncio.sleep(0)
    if w._tasks:
        _, left = await asyncio.wait(set(w._tasks), timeout=10)
        assert not left, f"{len(left)} writes still running after 10 s"



PODGROUP = by_id("podgroups.scheduling.sigs.k8s.io")


def _pending(_: str) -> None:
    return None


async def test_podgroup_statuses_are_coalesced_and_skipped_when_the_object_says_so(writer: ApiWriter) -> None:
    custom: _Custom = writer.custom
    cached: dict[str, object] = {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0,
                                 "scheduleStartTime": None}

    def now(group: str, key: str) -> dict[str, object]:
        return cached

    base = PodGroupGangStatus("Scheduled", 20, 0, 0, 0, 1000.25).wire()
    writer.gang_status("default/g", base, PODGROUP)
    writer.flush(_pending, now)
    await _settle(writer)
    assert len(custom.patches) == 1  # a phase change is written at once
    # Its pods start one by one: within STATUS_INTERVAL only the latest is kept, not written.
    for running in range(1, 6):
        writer.gang_status("default/g", {**base, "running": running}, PODGROUP)
        writer.flush(_pending, now)
    await _settle(writer)
    assert len(custom.patches) == 1
    writer.reports._status_sent = {k: (t - STATUS_INTERVAL, st, was)
                                   for k, (t, st, was) in writer.reports._status_sent.items()}
    writer.flush(_pending, now)
    await _settle(writer)
    assert [p[1]["running"] for p in custom.patches] == [0, 5]
    # What the cache already shows (the write landed; start times read back in whole seconds) is skipped.
    cached = PodGroupStatus(phase="Scheduled", scheduled=20, running=5, schedule_start_time=1000.0).written()
    writer.gang_status("default/g", {**base, "running": 5}, PODGROUP)
    writer.flush(_pending, now)
    await _settle(writer)
    assert len(custom.patches) == 2 and writer.skipped[("podgroup-status", "unchanged")] == 1
    # A new phase goes out at once, whenever the last write was.
    writer.gang_status("default/g", {**base, "running": 20, "phase": "Running"}, PODGROUP)
    writer.flush(_pending, now)
    await _settle(writer)
    assert [p[1]["phase"] for p in custom.patches] == ["Scheduled", "Scheduled", "Running"]


async def test_a_bind_whose_retries_run_out_puts_the_pod_back_in_the_queue() -> None:
    """The API server unreachable past the bind's retries: the pod must not stay assumed (with no
    cycle to notice its assumption expire) but be pending again, with a cycle owed, once its backoff
    (kube-scheduler's, after a failed binding cycle) ends."""
    from koordpy.controller.loop import SchedulerLoop
    from koordpy.core.decisions import Bind

    class Unreachable:
        async def bind(self, pod_key: str, uid: str, node: str) -> bool:
            raise OSError("connection refused")

    cache = Cache()
    cache.observe("Node", None, _rv(node("n0"), 1))
    cache.observe("Pod", None, _rv(pod("p", cpu="1"), 2))
    cache.snapshot(NAMES)
    loop = SchedulerLoop(cache, Unreachable(), NAMES)  # type: ignore[arg-type]
    cache.assume("default/p", "n0")
    assert cache.snapshot(NAMES).pods[0].node_name == "n0"  # the cycle after the bind went out
    cache.changed.clear()
    await loop._bind(Bind("default/p", "n0"), "uid")
    assert "default/p" not in cache.assumed and "default/p" in cache.backing_off
    cache.snapshot(NAMES)
    cache.changed.clear()
    cache.end_back_off("default/p")  # what the backoff's timer does
    assert cache.changed.is_set()
    shown = cache.snapshot(NAMES).changes
    assert shown is not None and shown.pods["default/p"] is not None and not shown.pods["default/p"].node_name


def test_a_heartbeat_keeps_the_object_and_owes_no_cycle() -> None:
    cache = Cache()
    raw = node("n0")
    cache.observe("Node", None, _rv(raw, 1))
    held = cache.nodes["n0"]
    cache.snapshot(NAMES)
    cache.changed.clear()
    cache.statuses_changed = False
    beat = _rv(node("n0"), 2)
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-23T10:00:00Z"}]
    cache.observe("Node", "MODIFIED", beat)
    assert cache.nodes["n0"] is held and not cache.changed.is_set() and not cache.statuses_changed
    cordoned = _rv(node("n0"), 3)
    cordoned.setdefault("spec", {})["unschedulable"] = True
    cache.observe("Node", "MODIFIED", cordoned)
    assert cache.nodes["n0"] is not held and cache.changed.is_set() and cache.statuses_changed


class _Core:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str]] = []

    async def patch_namespaced_pod_status(self, name: str, ns: str, body: dict[str, Any], **_: Any) -> None:
        self.patches.append((f"{ns}/{name}", body["status"]["conditions"][0]["message"]))


async def test_a_condition_in_flight_is_not_sent_again_but_another_writers_is_put_right(writer: ApiWriter) -> None:
    core = writer.core = _Core()
    writer.event = lambda *a, **k: asyncio.sleep(0)  # type: ignore[method-assign]
    writer.settle = writer.cooldown = 0.0
    on_pod = {"uid": "u", "message": ""}  # what the cache shows

    def pending(_: str) -> dict[str, str]:
        return on_pod

    writer.unschedulable("default/p", "no room")
    writer.flush(pending)
    await _settle(writer)
    # The watch has not shown the write yet (a backlog of reports): the same message again is not sent.
    for _ in range(3):
        writer.unschedulable("default/p", "no room")
        writer.flush(pending)
        await _settle(writer)
    assert core.patches == [("default/p", "no room")]
    on_pod["message"] = "no room"  # landed
    writer.unschedulable("default/p", "no room")
    writer.flush(pending)
    on_pod["message"] = "someone else's"  # another writer; the scheduler's message is put back
    writer.unschedulable("default/p", "no room")
    writer.flush(pending)
    await _settle(writer)
    assert core.patches == [("default/p", "no room")] * 2


def test_a_resync_does_not_parse_again_what_it_holds_at_that_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from koordpy.api.objects import Pod

    cache = Cache()
    cache.observe("Pod", None, _rv(pod("p", cpu="1"), 7))
    parsed: list[str] = []
    real = Pod.from_raw

    def counted(raw: dict[str, Any]) -> Pod:
        parsed.append("p")
        return real(raw)

    monkeypatch.setattr(Pod, "from_raw", counted)
    assert cache.reconcile("Pod", [_rv(pod("p", cpu="1"), 7)], 9) == 0
    assert parsed == [] and "default/p" in cache.pods
    cache.observe("Pod", "MODIFIED", _rv(pod("p", cpu="2"), 8))
    assert parsed == ["p"]
    cache.observe("Pod", "DELETED", _rv(pod("p", cpu="2"), 8))  # a deletion carries the version held
    assert "default/p" not in cache.pods


def test_a_resource_slice_rewritten_alike_keeps_its_object() -> None:
    """A driver republishing its slice unchanged (or a label added) keeps the object the devices'
    caches are held against, and owes no cycle; a new generation replaces it."""
    def published(rv: int, generation: int = 1) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": "n0-gpu", "resourceVersion": str(rv), "labels": {"rv": str(rv)}},
                "spec": {"driver": "gpu.example.com", "nodeName": "n0", "devices": [{"name": "gpu-0"}],
                         "pool": {"name": "n0", "generation": generation, "resourceSliceCount": 1}}}

    cache = Cache()
    cache.observe("ResourceSlice", None, published(1))
    held = cache.devices.slices["n0-gpu"]
    cache.changed.clear()
    cache.observe("ResourceSlice", "MODIFIED", published(2))
    assert cache.devices.slices["n0-gpu"] is held and not cache.changed.is_set()
    cache.observe("ResourceSlice", "MODIFIED", published(3, generation=2))
    assert cache.devices.slices["n0-gpu"] is not held and cache.changed.is_set()
