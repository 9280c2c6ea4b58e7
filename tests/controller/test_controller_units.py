"""Unit tests of the live scheduler's shell pieces that need no API server: the cache and retries
(against a small HTTP server standing in for the API server where the client's handling matters).

Everything that talks to an API server is tested in tests/integration on a real one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import structlog
from aiohttp import web
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.podgroup import PodGroup
from koordpy.controller import cache as cache_module
from koordpy.controller import loop as loop_module
from koordpy.controller.cache import Cache
from koordpy.controller.loop import FAILURE_BACKOFF_MAX, SchedulerLoop
from koordpy.controller.main import LOG_HANDLER, configure_logging
from koordpy.controller.metrics import Metrics
from koordpy.controller.writer import CONDITION_LIMIT, EVENT_LIMIT, ApiWriter, Conflict, Gone, cap, with_retries
from koordpy.core.decisions import Bind, CycleResult
from koordpy.core.dialects import invalid_reason
from koordpy.core.view import View
from tests.api.test_api_volcano_kai import volcano_podgroup
from tests.builders import node, pod, podgroup
from tests.controller.served import api_for

NAMES = frozenset({"koordpy"})


def rv(obj: dict[str, Any], version: int) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


def test_an_older_resource_version_never_replaces_a_newer_one() -> None:
    cache = Cache()
    cache.observe("Pod", "MODIFIED", rv(pod("p", node_name="n1"), 20))
    cache.observe("Pod", None, rv(pod("p"), 10))  # a relist replaying older state
    assert cache.pods["default/p"].node_name == "n1"
    cache.observe("Pod", "DELETED", rv(pod("p", node_name="n1"), 21))
    assert "default/p" not in cache.pods


def test_assumed_pods_count_as_bound_until_the_watch_confirms() -> None:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("p"), 2))
    cache.assume("default/p", "n1")
    assert [p.node_name for p in cache.snapshot(frozenset({"koordpy"})).pods] == ["n1"]
    cache.observe("Pod", "MODIFIED", rv(pod("p", node_name="n1"), 3))
    assert cache.assumed == {}
    cache.assume("default/q", "n1")
    cache.forget("default/q")
    assert cache.assumed == {} and cache.changed.is_set()


def test_an_assumed_bind_keeps_its_room_while_it_is_written_and_assume_ttl_counts_from_the_write(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A bind queued behind thousands of others (bench_workloads, 3,000 gangs on a loaded machine)
    can wait longer than ASSUME_TTL for its turn. Counted from the decision, the assumption expired,
    the pod looked pending again and its gang was placed a second time on other nodes (207 binds
    refused with 409 in one round; meanwhile the first node's room counted as free). So the TTL
    starts once the bind is written."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])  # the cache reads it; no event loop runs here
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("p"), 2))
    names = frozenset({"koordpy"})
    cache.assume("default/p", "n1", writing=True)
    now[0] += cache_module.ASSUME_TTL * 3  # still queued
    assert [p.node_name for p in cache.snapshot(names).pods] == ["n1"]
    cache.bind_written("default/p")
    now[0] += cache_module.ASSUME_TTL - 1
    assert [p.node_name for p in cache.snapshot(names).pods] == ["n1"]
    now[0] += 2  # written, and the watch never showed it: the room is given back
    assert [p.node_name for p in cache.snapshot(names).pods] == [""]
    cache.bind_written("default/p")  # a late answer does not bring back what expired
    assert cache.assumed == {}


async def test_the_loop_holds_a_bind_until_it_is_written_then_starts_assume_ttl(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("p"), 2))
    answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    class SlowWriter:
        def __init__(self) -> None:
            self.tasks: list[asyncio.Future[None]] = []

        def spawn_owed(self, what: Coroutine[Any, Any, None]) -> None:
            self.tasks.append(asyncio.ensure_future(what))

        async def bind(self, pod_key: str, uid: str, node_name: str) -> bool:
            return await answer

        def bound(self, pod_key: str) -> None:
            pass

        def flush(self, still_pending: Any, status_now: Any = None) -> None:
            pass

    monkeypatch.setattr(loop_module, "schedule", lambda snapshot, state, now: CycleResult(
        decisions=[Bind("default/p", "n1")]))
    writer = SlowWriter()
    loop = SchedulerLoop(cache, writer, frozenset({"koordpy"}))  # type: ignore[arg-type]
    await loop.cycle()
    await asyncio.sleep(0)
    assert cache.assumed["default/p"][1] == float("inf")  # queued or in flight: no TTL yet
    answer.set_result(True)
    await asyncio.gather(*writer.tasks)
    assert cache.assumed["default/p"][1] != float("inf")  # written: the TTL runs from now


def test_invalid_objects_are_kept_as_errors_for_reporting() -> None:
    cache = Cache()
    cache.observe("PodGroup", None, rv(podgroup("bad", 0), 1))
    cache.observe("Pod", None, rv(pod("p", cpu="lots"), 2))
    snap = cache.snapshot(frozenset({"koordpy"}))
    assert "spec.minMember" in snap.invalid_podgroups["default/bad"]
    bad = {b.key: b for b in cache.invalid_objects(frozenset({"koordpy"}))}
    assert set(bad) == {"default/bad", "default/p"}
    assert bad["default/p"].claimed and "resources.requests.cpu" in bad["default/p"].error
    assert not bad["default/bad"].claimed and bad["default/bad"].kind == "PodGroup"
    cache.observe("PodGroup", "MODIFIED", rv(podgroup("bad", 2), 3))  # fixed by the user
    assert "default/bad" in cache.podgroups and not cache.snapshot(frozenset()).invalid_podgroups


def test_a_hypernode_pattern_go_would_refuse_is_reported_as_invalid_naming_the_field() -> None:
    # Volcano's webhook compiles regexMatch.pattern with Go's regexp, which has no look-ahead: the
    # live scheduler reports the HyperNode (an InvalidMembers Event, as for every bad member) and keeps
    # it out of the tree.
    cache = Cache()
    raw = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
           "metadata": {"name": "rack", "uid": "h1"},
           "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n(?=1)"}}}]}}
    cache.observe("HyperNode", "ADDED", rv(raw, 1))
    assert "rack" not in cache.hypernodes
    [bad] = cache.invalid_objects(NAMES)
    assert (bad.kind, bad.key, bad.uid) == ("HyperNode", "rack", "h1")
    assert "spec.members[0].selector.regexMatch.pattern" in bad.error and "RE2" in bad.error
    assert invalid_reason(bad.kind, bad.error) == "InvalidMembers"
    # Other faults of a HyperNode, and of other kinds, keep Invalid<Kind>.
    assert invalid_reason("HyperNode", "HyperNode r2: spec.tier: expected an integer") == "InvalidHyperNode"
    assert invalid_reason("PodGroup", "PodGroup default/g: spec.members: odd") == "InvalidPodGroup"


def test_an_invalid_cluster_network_topology_is_reported_not_used() -> None:
    cache = Cache()
    bad = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
           "metadata": {"name": "default", "resourceVersion": "1"},
           "spec": {"networkTopologySpec": [{"topologyLayer": "B", "parentTopologyLayer": "A", "labelKey": ["b"]}]}}
    cache.observe("ClusterNetworkTopology", None, bad)
    snap = cache.snapshot(frozenset())
    assert snap.topology is None and snap.topology_error and "'A'" in snap.topology_error


class Flaky:
    def __init__(self, *failures: int) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise ApiException(status=self.failures.pop(0), reason="test")
        return "ok"


async def test_retries_server_errors_then_succeeds() -> None:
    op = Flaky(500, 503, 429)
    assert await with_retries("thing", op) == "ok" and op.calls == 4


async def test_not_found_and_conflict_end_the_write() -> None:
    with pytest.raises(Gone):
        await with_retries("thing", Flaky(404))
    with pytest.raises(Conflict):
        await with_retries("thing", Flaky(409))
    with pytest.raises(ApiException):
        await with_retries("thing", Flaky(403))


def test_a_resync_drops_what_was_deleted_unseen_and_keeps_what_is_newer() -> None:
    cache = Cache()
    cache.observe("Pod", None, rv(pod("ghost", node_name="n1"), 5))  # deleted before the list, no event seen
    cache.observe("Pod", "ADDED", rv(pod("fresh"), 50))  # created after the list was taken
    dropped = cache.reconcile("Pod", [rv(pod("kept"), 7)], list_version=40)
    assert dropped == 1 and set(cache.pods) == {"default/fresh", "default/kept"}


def uid(obj: dict[str, Any], value: str) -> dict[str, Any]:
    obj["metadata"]["uid"] = value
    return obj


def test_a_parser_that_raises_anything_else_marks_the_object_invalid(monkeypatch: pytest.MonkeyPatch) -> None:
    def overflow(raw: dict[str, Any]) -> PodGroup:
        raise ArithmeticError("quantity overflow")

    monkeypatch.setattr(PodGroup, "from_raw", staticmethod(overflow))
    cache = Cache()
    cache.observe("PodGroup", "ADDED", rv(podgroup("huge", 2), 1))
    [bad] = cache.invalid_objects(NAMES)
    assert (bad.kind, bad.key) == ("PodGroup", "default/huge")
    assert "PodGroup default/huge" in bad.error and "ArithmeticError: quantity overflow" in bad.error
    assert "default/huge" in cache.snapshot(NAMES).invalid_podgroups


def test_observe_never_raises_whatever_the_watch_delivers() -> None:
    cache = Cache()
    cache.observe("Pod", "ADDED", {"metadata": "not a mapping"})
    cache.observe("Node", "MODIFIED", {"metadata": {"name": "n", "resourceVersion": "x"}, "status": []})
    cache.observe("Pod", "ADDED", rv(pod("ok"), 3))
    assert "default/ok" in cache.pods


def gang_pod(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return pod(name, cpu="1", annotations={"gang.scheduling.koordinator.sh/name": "g",
                                           "gang.scheduling.koordinator.sh/min-available": "2", **annotations})


def test_pending_pods_with_bad_annotations_are_held_back_and_reported() -> None:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(gang_pod("a", {}), 2))
    cache.observe("Pod", None, rv(gang_pod("b", {"gang.scheduling.koordinator.sh/groups": "[oops"}), 3))
    cache.observe("Pod", None, rv(pod("c", annotations={
        "gang.scheduling.koordinator.sh/network-topology-index": "first"}), 4))
    cache.observe("Pod", None, rv(pod("theirs", scheduler="other", annotations={
        "gang.scheduling.koordinator.sh/network-topology-index": "first"}), 5))
    snap = cache.snapshot(NAMES)
    assert sorted(p.name for p in snap.pods) == ["a", "theirs"]
    bad = {b.key: b for b in cache.invalid_objects(NAMES)}
    assert set(bad) == {"default/b", "default/c"} and all(b.claimed for b in bad.values())
    assert "gang.scheduling.koordinator.sh/groups" in bad["default/b"].error
    assert "network-topology-index" in bad["default/c"].error
    cache.observe("Pod", "MODIFIED", rv(gang_pod("b", {}), 6))  # fixed
    assert sorted(p.name for p in cache.snapshot(NAMES).pods) == ["a", "b", "theirs"]
    assert [b.key for b in cache.invalid_objects(NAMES)] == ["default/c"]


class FakeWriter:
    """Records what the loop asks to write."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []
        self.conditions: dict[str, str] = {}

    def spawn(self, what: Coroutine[Any, Any, None]) -> None:
        what.close()

    def event(self, kind: str, obj: str, uid: str, type_: str, reason: str, message: str) -> Coroutine[Any, Any, None]:
        self.events.append((reason, obj, uid, message))
        return asyncio.sleep(0)

    def unschedulable(self, pod_key: str, message: str, reason: str = "Unschedulable") -> None:
        self.conditions[pod_key] = message

    def flush(self, still_pending: Any, status_now: Any = None) -> None:
        pass


def make_loop(cache: Cache) -> tuple[SchedulerLoop, FakeWriter]:
    writer = FakeWriter()
    return SchedulerLoop(cache, writer, NAMES), writer  # type: ignore[arg-type]


async def test_reports_are_remembered_by_uid_and_forgotten_with_the_object() -> None:
    cache = Cache()
    loop, writer = make_loop(cache)
    cache.observe("PodGroup", "ADDED", rv(uid(podgroup("bad", 0), "u1"), 1))
    for _ in range(3):
        cache.snapshot(NAMES)
        loop._report_invalid()
    assert [(r, o, u) for r, o, u, _ in writer.events] == [("InvalidPodGroup", "default/bad", "u1")]
    cache.observe("PodGroup", "DELETED", rv(uid(podgroup("bad", 0), "u1"), 2))
    cache.snapshot(NAMES)
    loop._report_invalid()
    assert loop._reported == {}  # nothing kept of what is gone
    cache.observe("PodGroup", "ADDED", rv(uid(podgroup("bad", 0), "u2"), 3))  # same name, same error
    cache.snapshot(NAMES)
    loop._report_invalid()
    assert [u for _, _, u, _ in writer.events] == ["u1", "u2"]


async def test_claimed_invalid_pods_get_a_condition_and_an_event() -> None:
    cache = Cache()
    loop, writer = make_loop(cache)
    cache.observe("Pod", "ADDED", rv(uid(pod("p", cpu="lots"), "p1"), 1))
    cache.observe("Pod", "ADDED", rv(uid(pod("q", annotations={
        "gang.scheduling.koordinator.sh/network-topology-index": "-1"}), "q1"), 2))
    cache.snapshot(NAMES)
    loop._report_invalid()
    assert set(writer.conditions) == {"default/p", "default/q"}
    assert writer.conditions["default/q"].startswith("invalid pod: Pod default/q:")
    assert sorted((r, u) for r, _, u, _ in writer.events) == [("InvalidPod", "p1"), ("InvalidPod", "q1")]


def test_messages_are_capped_with_a_marker() -> None:
    assert cap("short", EVENT_LIMIT) == "short"
    name = "g" * 100_000
    for limit in (CONDITION_LIMIT, EVENT_LIMIT):
        out = cap(f"gang {name} is waiting", limit)
        assert len(out.encode()) <= limit and out.startswith("gang ggg")
        assert out.endswith(f"[truncated {len(name) + 16} bytes to {limit}]")
    wide = cap("é" * 5000, EVENT_LIMIT)  # never cut inside a character
    assert len(wide.encode()) <= EVENT_LIMIT and "truncated 10000 bytes" in wide


async def test_a_failing_cycle_backs_off_and_recovers() -> None:
    cache = Cache()
    loop, _ = make_loop(cache)
    assert [loop.backoff() for loop.failures in range(8)] == [0, 1, 2, 4, 8, 16, 30, 30]
    assert FAILURE_BACKOFF_MAX == 30
    loop.failures = 0
    calls: list[float] = []  # when each cycle started
    fail = True

    async def cycle() -> float | None:
        calls.append(time.monotonic())
        cache.changed.set()  # the cluster keeps changing, as it does while a bad object sits there
        if fail and len(calls) <= 2:
            raise RuntimeError("boom")
        return None

    async def until(what: Callable[[], bool], limit: float = 20.0) -> None:
        # Lower bounds only: a loaded machine may run the loop late, never early.
        end = time.monotonic() + limit
        while not what():
            assert time.monotonic() < end, "the loop did not get there"
            await asyncio.sleep(0.01)

    loop.cycle = cycle  # type: ignore[method-assign]
    cache.changed.set()
    loop.state.view = View()
    task = asyncio.ensure_future(loop.run())
    await until(lambda: len(calls) >= 2 and loop.failures == 2)
    assert loop.state.view is None  # dropped: the next cycle rebuilds the core's view from the cache
    fail = False
    await until(lambda: loop.failures == 0 and len(calls) >= 4)  # succeeded, and runs freely again
    # The waits between cycles were at least the backoff: 1 s after the first failure, 2 s after the
    # second, although the cluster kept changing; then none.
    assert calls[1] - calls[0] >= 1.0 - 0.05 and calls[2] - calls[1] >= 2.0 - 0.05, calls
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_a_logged_exception_carries_its_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    saved = structlog.get_config()
    try:
        configure_logging("INFO", "json")
        try:
            raise ZeroDivisionError("the divisor was zero")
        except ZeroDivisionError:
            structlog.get_logger("test").exception("cycle failed")
        line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    finally:
        structlog.configure(**saved)
        for handler in [h for h in logging.getLogger().handlers if h.get_name() == LOG_HANDLER]:
            logging.getLogger().removeHandler(handler)
    assert line["event"] == "cycle failed" and line["level"] == "error"
    assert "Traceback" in line["exception"] and "ZeroDivisionError: the divisor was zero" in line["exception"]


def test_a_cluster_network_topology_not_named_default_is_reported_and_ignored() -> None:
    cache = Cache()
    other = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
             "metadata": {"name": "mine", "resourceVersion": "1", "uid": "c1"}, "spec": {"networkTopologySpec": []}}
    cache.observe("ClusterNetworkTopology", "ADDED", other)
    snap = cache.snapshot(NAMES)
    assert snap.topology is None and snap.topology_error is None
    assert "default" not in cache.status_raw.get("topology", {})
    [bad] = cache.invalid_objects(NAMES)
    assert (bad.key, bad.uid) == ("mine", "c1") and "named 'default', not 'mine'" in bad.error


async def test_every_few_minutes_a_cycle_is_computed_from_the_whole_cache() -> None:
    loop, _ = make_loop(Cache())
    first = await loop.cycle()
    view = loop.state.view
    assert view is not None and first == loop._full_at  # the loop wakes for it even when nothing changes
    await loop.cycle()
    assert loop.state.view is view  # kept between cycles
    loop._full_at = 0.0  # due
    await loop.cycle()
    assert loop.state.view is not view and loop._full_at > time.time()


async def test_a_refused_write_is_seen_as_refused_through_the_real_client() -> None:
    # Writes ask the client for the raw response (_preload_content=False), and then it raises on no
    # status: without the writer's own check a 409 or 404 passed for a bind, and a 503 was not retried.
    answers: list[int] = [409, 404, 503, 201]
    seen: list[str] = []

    async def binding(request: web.Request) -> web.Response:
        seen.append(request.match_info["name"])
        status = answers.pop(0)
        return web.json_response({"kind": "Status", "code": status}, status=status)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
    metrics = Metrics()
    async with api_for(app) as api:
        writer = ApiWriter(api, metrics=metrics)
        assert await writer.bind("default/taken", "u1", "n1") is False  # 409: bound already
        assert await writer.bind("default/gone", "u2", "n1") is False  # 404
        assert await writer.bind("default/p", "u3", "n1") is True  # 503, retried, then 201
    assert seen == ["taken", "gone", "p", "p"]
    assert metrics.registry.get_sample_value("koordpy_api_retries_total", {"reason": "503"}) == 1
    assert metrics.registry.get_sample_value("koordpy_api_writes_total", {"kind": "bind", "result": "failed"}) == 2


async def test_the_loop_ends_when_cancelled_as_a_change_arrives() -> None:
    # A stop cancels the loop while a burst of watch events keeps setting ``changed``: the cancel and
    # the wake-up land together. Python 3.11's wait_for returned the wake-up and dropped the cancel
    # (the loop ran on and a SIGTERM'd scheduler never stopped); the loop must end every time.
    loop, _ = make_loop(Cache())
    loop.debounce = 3600.0  # woken, it would sleep rather than run a cycle
    for _ in range(20):
        task = asyncio.ensure_future(loop.run())
        await asyncio.sleep(0.01)  # waiting for a change
        loop.cache.changed.set()
        task.cancel()
        done, _pending = await asyncio.wait({task}, timeout=2.0)
        assert done, "the loop went on after its cancel"
        assert task.cancelled()
        loop.cache.changed.clear()


def test_the_status_a_podgroup_holds_is_found_by_its_api_group_through_the_registry() -> None:
    """The writer coalesces a status write against what the cache holds: the loop finds the PodGroup
    of that API group in the registry's store for it, whichever dialect's it is."""
    cache = Cache()
    loop, _ = make_loop(cache)
    koord = podgroup("g", 2)
    koord["status"] = {"phase": "Running", "scheduled": 2, "running": 2,
                       "scheduleStartTime": "2026-01-01T00:00:00Z"}
    cache.observe("PodGroup", "ADDED", rv(uid(koord, "u1"), 1))
    volcano = volcano_podgroup("v", minMember=1)
    volcano["status"] = {"phase": "Inqueue", "running": 1}
    cache.observe("VolcanoPodGroup", "ADDED", rv(uid(volcano, "u2"), 1))
    assert loop._status_now("podgroups.scheduling.sigs.k8s.io", "default/g") == {
        "phase": "Running", "scheduled": 2, "running": 2, "succeeded": 0, "failed": 0,
        "scheduleStartTime": "2026-01-01T00:00:00Z"}
    assert loop._status_now("podgroups.scheduling.volcano.sh", "team/v") == {
        "phase": "Inqueue", "running": 1, "succeeded": 0, "failed": 0}
    assert loop._status_now("podgroups.scheduling.volcano.sh", "default/missing") is None


def test_gangs_waiting_counts_the_gangs_of_every_pod_left_pending() -> None:
    """``koordpy_gang_waiting`` (issue 21, goal 4: read once per parked job, not pod by pod every
    cycle): after each cycle, the gangs of the pods tried and left pending and of the parked jobs'."""
    from koordpy.core.cycle import schedule

    cache = Cache()
    loop, _ = make_loop(cache)
    version = [0]

    def add(kind: str, raw: dict[str, Any]) -> None:
        version[0] += 1
        cache.observe(kind, "ADDED", rv(raw, version[0]))

    add("Node", node("n1", cpu="8"))
    counts = []
    for step in range(5):
        if step < 3:  # gangs that never fit, parked from the next cycle on
            add("PodGroup", podgroup(f"big{step}", 2))
            for i in range(2):
                add("Pod", pod(f"big{step}-{i}", cpu="6", group=f"big{step}"))
        if step == 3:  # one that fits, and one waiting for its second member
            add("PodGroup", podgroup("fits", 1))
            add("Pod", pod("fits-0", cpu="1", group="fits"))
            add("PodGroup", podgroup("short", 2))
            add("Pod", pod("short-0", cpu="1", group="short"))
        result = schedule(cache.snapshot(NAMES), loop.state, 1000.0 + step)
        for bind in result.binds:
            cache.assume(bind.pod, bind.node)
        view = loop.state.view
        assert view is not None
        expected = len({g for g in (view.member_of.get(p) for p in result.pending) if g})
        assert loop._gangs_waiting(result) == expected
        counts.append(expected)
    assert counts[-1] == 4 and counts[0] == 1  # three parked gangs and the short one, in the end


async def test_a_cycle_says_the_cpu_its_core_spent() -> None:
    # The cycle's log line carries the CPU of the core's thread beside its wall time (issue 21, goal
    # 4: what of a long cycle is work and what is waiting for the GIL).
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("big", cpu="64"), 2))  # tried, and waits
    loop, writer = make_loop(cache)
    started = time.perf_counter()
    await loop.cycle()
    assert 0 < loop._core_cpu <= time.perf_counter() - started
    assert "Insufficient cpu" in writer.conditions["default/big"]
