"""Events counted, combined and rate limited as client-go's recorder does (controller/events.py).

The correlator is pure and is tested with the time passed in. The recorder and the writer are
tested against fakes of the shell boundary: a fake sink, and for ``ApiWriter.event`` a small HTTP
server answering the Event calls the way the API server does (201 with a generated name, 404 for
a name it does not hold), reached through the real Kubernetes client.
tests/integration/test_chart.py checks the same on a real API server (a repeat raises count to 2).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from koordpy.api.raw import rfc3339
from koordpy.controller.events import (
    COMBINED_PREFIX,
    EventCorrelator,
    EventRecorder,
    Involved,
    Outcome,
    Outgoing,
    Patched,
    Report,
)
from koordpy.controller.metrics import Metrics
from koordpy.controller.writer import MERGE_PATCH, ApiWriter

POD = Involved("Pod", "p", "default", "uid-1", "v1")
T0 = 1_700_000_000.0


def report(message: str = "0/3 nodes are available", involved: Involved = POD, reason: str = "FailedScheduling",
           type_: str = "Warning") -> Report:
    return Report("default", involved, type_, reason, message, "koordpy")


def emit(c: EventCorrelator, r: Report, now: float, name: str | None = "ev.1") -> Outgoing | None:
    """Correlates ``r`` and, when it goes out, says it was written as ``name``."""
    out = c.correlate(r, now)
    if out is not None and name is not None:
        c.written(out, out.name or name)
    return out


# -- keys ----------------------------------------------------------------------------------


def test_the_same_event_is_everything_similar_is_all_but_the_message() -> None:
    a = report("A")
    assert a.key == report("A").key
    assert a.key != report("B").key and a.similar_key == report("B").similar_key
    other_uid = report("A", involved=replace(POD, uid="uid-2"))  # recreated under the same name
    assert other_uid.key != a.key and other_uid.similar_key != a.similar_key
    assert report("A", reason="Preempted").similar_key != a.similar_key
    assert report("A", type_="Normal").similar_key != a.similar_key
    assert report("A", reason="Preempted").object_key == a.object_key  # one spam bucket per object
    assert replace(a, component="other").object_key != a.object_key
    # Fields are kept apart: no two different events join into the same key.
    assert report("ab", involved=replace(POD, name="p")).key != report("b", involved=replace(POD, name="pa")).key


# -- the same event counted ---------------------------------------------------------------------


def test_a_repeat_patches_the_event_written_before() -> None:
    c = EventCorrelator()
    first = emit(c, report(), T0, name="p.abc")
    assert first == Outgoing(report().key, report().message, 1, T0, T0, None)
    second = emit(c, report(), T0 + 7)
    assert second == Outgoing(report().key, report().message, 2, T0, T0 + 7, "p.abc")
    third = emit(c, report(), T0 + 3000)  # no time limit: it is patched while remembered
    assert third is not None and (third.count, third.first, third.name) == (3, T0, "p.abc")


def test_other_messages_objects_and_uids_are_other_events() -> None:
    c = EventCorrelator()
    emit(c, report("A"), T0, name="e1")
    for r in (report("B"), report("A", involved=replace(POD, uid="uid-2")), report("A", reason="Other"),
              report("A", involved=replace(POD, name="q"))):
        out = emit(c, r, T0 + 1, name="e2")
        assert out is not None and (out.count, out.name) == (1, None), r
    again = c.correlate(report("A"), T0 + 2)
    assert again is not None and (again.count, again.name) == (2, "e1")


def test_an_event_not_written_yet_is_created_with_the_count_so_far() -> None:
    c = EventCorrelator()
    emit(c, report(), T0, name=None)  # the create failed
    out = c.correlate(report(), T0 + 1)
    assert out is not None and (out.count, out.name, out.first) == (2, None, T0)


def test_a_gone_event_is_forgotten_and_the_next_write_creates_it() -> None:
    c = EventCorrelator()
    emit(c, report(), T0, name="old")
    out = c.correlate(report(), T0 + 1)
    assert out is not None and out.name == "old"
    c.written(out, None)  # the patch got 404
    c.written(out, "new")  # and the create gave this name
    nxt = c.correlate(report(), T0 + 2)
    assert nxt is not None and (nxt.count, nxt.name) == (3, "new")


def test_only_the_most_recent_events_are_remembered() -> None:
    c = EventCorrelator(size=2)
    for i, msg in enumerate("ABC"):
        emit(c, report(msg), T0 + i, name=f"e{msg}")
    a = c.correlate(report("A"), T0 + 10)  # pushed out by B and C: a new Event
    assert a is not None and (a.count, a.name) == (1, None)
    c_again = c.correlate(report("C"), T0 + 11)
    assert c_again is not None and (c_again.count, c_again.name) == (2, "eC")


# -- similar events combined ---------------------------------------------------------------------


def test_from_the_tenth_message_similar_events_go_to_one_combined_event() -> None:
    c = EventCorrelator()
    for i in range(9):
        out = emit(c, report(f"m{i}"), T0 + i, name=f"e{i}")
        assert out is not None and not out.combined and out.key == report(f"m{i}").key
    tenth = emit(c, report("m9"), T0 + 9, name="combined")
    assert tenth is not None and tenth.combined
    assert tenth.message == COMBINED_PREFIX + "m9" and tenth.key == report().similar_key
    assert (tenth.count, tenth.name) == (1, None)
    eleventh = emit(c, report("m10"), T0 + 10)
    assert eleventh is not None and eleventh.message == COMBINED_PREFIX + "m10"
    assert (eleventh.count, eleventh.name, eleventh.first) == (2, "combined", T0 + 9)
    assert emit(c, report("m9"), T0 + 11) == replace(eleventh, message=COMBINED_PREFIX + "m9", count=3,
                                                     last=T0 + 11)
    # The first nine keep their own Events.
    own = emit(c, report("m0"), T0 + 12)
    assert own is not None and not own.combined and (own.count, own.name) == (2, "e0")


def test_similar_events_are_grouped_per_object_type_and_reason() -> None:
    c = EventCorrelator()
    for i in range(9):
        emit(c, report(f"m{i}"), T0 + i)
    for r in (report("x", involved=replace(POD, name="q")), report("x", reason="Preempted"),
              report("x", type_="Normal")):
        out = emit(c, r, T0 + 10)
        assert out is not None and not out.combined, r


def test_the_similar_group_is_forgotten_after_ten_quiet_minutes() -> None:
    c = EventCorrelator()
    for i in range(9):
        emit(c, report(f"m{i}"), T0 + 100 * i)  # 800 s in all, never 600 s apart
    at = T0 + 800 + 600
    still = c.correlate(report("late"), at)  # 600 s after the last: still the same group
    assert still is not None and still.combined
    fresh = c.correlate(report("later"), at + 600.5)
    assert fresh is not None and not fresh.combined and fresh.message == "later"


# -- spam filter ---------------------------------------------------------------------------------


def test_an_object_gets_a_burst_of_25_then_one_event_every_five_minutes() -> None:
    c = EventCorrelator()
    sent = [c.correlate(report(f"m{i}", reason=f"R{i}"), T0) for i in range(25)]
    assert all(out is not None for out in sent)
    assert c.correlate(report("one too many"), T0) is None
    assert c.correlate(report("x", involved=replace(POD, name="q")), T0) is not None  # another object
    assert c.correlate(report("later"), T0 + 299) is None
    assert c.correlate(report("later"), T0 + 300) is not None
    assert c.correlate(report("later"), T0 + 301) is None
    assert c.correlate(report("much later"), T0 + 301 + 3 * 300) is not None
    for _ in range(2):  # three tokens came back meanwhile, one is spent
        assert c.correlate(report("much later"), T0 + 1202) is not None
    assert c.correlate(report("much later"), T0 + 1202) is None


def test_dropped_repeats_still_count() -> None:
    c = EventCorrelator(spam_burst=1)
    emit(c, report(), T0, name="e")
    for t in range(1, 5):
        assert c.correlate(report(), T0 + t) is None
    out = c.correlate(report(), T0 + 300)
    assert out is not None and (out.count, out.name) == (6, "e")


def test_a_wall_clock_stepped_back_neither_refills_nor_starves_the_bucket() -> None:
    c = EventCorrelator(spam_burst=1)
    assert c.correlate(report(), T0) is not None
    assert c.correlate(report(), T0 - 10_000) is None
    assert c.correlate(report(), T0 - 10_000 + 299) is None
    assert c.correlate(report(), T0 - 10_000 + 300) is not None  # counted on from the new time


# -- the recorder, with a fake sink --------------------------------------------------------------


class FakeSink:
    """Events held by name; ``patch_answers`` / ``create_fails`` script failures."""

    def __init__(self, delay: float = 0.0) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.patch_answers: list[Patched] = []
        self.create_fails = 0
        self.delay = delay

    async def create_event(self, report: Report, out: Outgoing) -> str | None:
        await asyncio.sleep(self.delay)  # a create in flight: room for a second record to start
        name = f"{report.involved.name}.{len(self.calls)}"
        self.calls.append(("create", name))
        if self.create_fails:
            self.create_fails -= 1
            return None
        self.events[name] = {"count": out.count, "message": out.message}
        return name

    async def patch_event(self, report: Report, out: Outgoing, name: str) -> Patched:
        await asyncio.sleep(self.delay)
        self.calls.append(("patch", name))
        answer = self.patch_answers.pop(0) if self.patch_answers else Patched.OK
        if answer is Patched.OK:
            self.events[name].update(count=out.count, message=out.message)
        return answer


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


async def test_the_recorder_creates_then_patches() -> None:
    sink, clock = FakeSink(), Clock()
    rec = EventRecorder(clock=clock)
    assert await rec.record(report(), sink) is Outcome.CREATED
    clock.now += 5
    assert await rec.record(report(), sink) is Outcome.PATCHED
    assert sink.calls == [("create", "p.0"), ("patch", "p.0")]
    assert sink.events == {"p.0": {"count": 2, "message": report().message}}
    assert rec._locks == {}  # nothing kept once no one holds a key


async def test_a_patch_answered_404_creates_a_new_event() -> None:
    sink = FakeSink()
    rec = EventRecorder(clock=Clock())
    await rec.record(report(), sink)
    sink.events.clear()  # expired on the server
    sink.patch_answers = [Patched.GONE]
    assert await rec.record(report(), sink) is Outcome.CREATED
    assert sink.calls == [("create", "p.0"), ("patch", "p.0"), ("create", "p.2")]
    assert sink.events == {"p.2": {"count": 2, "message": report().message}}
    assert await rec.record(report(), sink) is Outcome.PATCHED
    assert sink.calls[-1] == ("patch", "p.2") and sink.events["p.2"]["count"] == 3


async def test_a_failed_create_after_404_does_not_patch_the_gone_event_again() -> None:
    sink = FakeSink()
    rec = EventRecorder(clock=Clock())
    await rec.record(report(), sink)
    sink.patch_answers, sink.create_fails = [Patched.GONE], 1
    assert await rec.record(report(), sink) is Outcome.FAILED
    assert await rec.record(report(), sink) is Outcome.CREATED
    assert [c for c, _ in sink.calls] == ["create", "patch", "create", "create"]


async def test_a_failed_patch_is_retried_as_a_patch_next_time() -> None:
    sink = FakeSink()
    rec = EventRecorder(clock=Clock())
    await rec.record(report(), sink)
    sink.patch_answers = [Patched.FAILED]
    assert await rec.record(report(), sink) is Outcome.FAILED
    assert await rec.record(report(), sink) is Outcome.PATCHED
    assert sink.events["p.0"]["count"] == 3


async def test_identical_events_at_once_make_one_object() -> None:
    sink = FakeSink(delay=0.01)
    rec = EventRecorder(clock=Clock())
    outcomes = await asyncio.gather(*(rec.record(report(), sink) for _ in range(5)))
    assert sorted(o.value for o in outcomes) == ["created"] + ["patched"] * 4
    assert list(sink.events) == ["p.0"] and sink.events["p.0"]["count"] == 5
    assert rec._locks == {}


class GatedSink(FakeSink):
    """The create of ``held`` waits for ``gate``."""

    def __init__(self, held: Report) -> None:
        super().__init__()
        self.held = held
        self.gate = asyncio.Event()

    async def create_event(self, report: Report, out: Outgoing) -> str | None:
        if report == self.held:
            await self.gate.wait()
        return await super().create_event(report, out)


async def test_other_events_are_not_held_up_by_one_in_flight() -> None:
    sink = GatedSink(report("A"))
    rec = EventRecorder(clock=Clock())
    stuck = asyncio.ensure_future(rec.record(report("A"), sink))
    await asyncio.sleep(0)
    for other in (report("A", involved=replace(POD, name="q")), report("A", reason="Preempted")):
        assert await asyncio.wait_for(rec.record(other, sink), 5) is Outcome.CREATED
    assert not stuck.done()
    sink.gate.set()
    assert await stuck is Outcome.CREATED


async def test_spam_is_skipped_without_a_call() -> None:
    sink = FakeSink()
    rec = EventRecorder(EventCorrelator(spam_burst=2), clock=Clock())
    outcomes = [await rec.record(report(f"m{i}"), sink) for i in range(3)]
    assert outcomes == [Outcome.CREATED, Outcome.CREATED, Outcome.SKIPPED]
    assert len(sink.calls) == 2


# -- ApiWriter.event against a fake API server, through the real client ------------------------


class FakeEventsApi:
    """The Event endpoints of an API server: POST creates with a generated name, PATCH merges into
    an Event it holds or answers 404; ``fail_next`` answers the next calls with those statuses."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []  # method, path, content type
        self.fail_next: list[int] = []
        self.created = 0

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/api/v1/namespaces/{ns}/events", self.create)
        app.router.add_patch("/api/v1/namespaces/{ns}/events/{name}", self.patch)
        return app

    def _failure(self) -> web.Response | None:
        if not self.fail_next:
            return None
        status = self.fail_next.pop(0)
        return web.json_response({"kind": "Status", "code": status}, status=status)

    async def create(self, request: web.Request) -> web.Response:
        self.requests.append(("POST", request.path, request.content_type))
        if (failed := self._failure()) is not None:
            return failed
        body = await request.json()
        self.created += 1
        name = f"{body['metadata']['generateName']}{self.created:05x}"
        body["metadata"] = {**body["metadata"], "name": name}
        self.events[name] = body
        return web.json_response(body, status=201)

    async def patch(self, request: web.Request) -> web.Response:
        self.requests.append(("PATCH", request.path, request.content_type))
        if (failed := self._failure()) is not None:
            return failed
        name = request.match_info["name"]
        if name not in self.events:
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)
        self.events[name].update(await request.json())
        return web.json_response(self.events[name])


@contextlib.asynccontextmanager
async def served() -> AsyncIterator[tuple[FakeEventsApi, ApiWriter, Metrics]]:
    fake = FakeEventsApi()
    runner = web.AppRunner(fake.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server
    port = server.sockets[0].getsockname()[1]
    api = ApiClient(Configuration(host=f"http://127.0.0.1:{port}"))
    metrics = Metrics()
    try:
        yield fake, ApiWriter(api, metrics=metrics), metrics
    finally:
        await api.close()
        await runner.cleanup()


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_the_writer_creates_an_event_then_patches_its_count() -> None:
    async with served() as (fake, writer, metrics):
        writer.events.clock = lambda: T0
        await writer.event("Pod", "default/p", "uid-1", "Warning", "FailedScheduling", "A")
        [(name, ev)] = fake.events.items()
        assert name.startswith("p.") and fake.requests == [("POST", "/api/v1/namespaces/default/events",
                                                            "application/json")]
        assert (ev["count"], ev["firstTimestamp"], ev["lastTimestamp"]) == (1, rfc3339(T0), rfc3339(T0))
        assert ev["involvedObject"] == {"kind": "Pod", "name": "p", "namespace": "default", "uid": "uid-1",
                                        "apiVersion": "v1"}
        assert ev["source"] == {"component": "koordpy"} and ev["reportingComponent"] == "koordpy"
        writer.events.clock = lambda: T0 + 7
        await writer.event("Pod", "default/p", "uid-1", "Warning", "FailedScheduling", "A")
        assert list(fake.events) == [name]
        assert (ev["count"], ev["firstTimestamp"], ev["lastTimestamp"]) == (2, rfc3339(T0), rfc3339(T0 + 7))
        assert fake.requests[-1] == ("PATCH", f"/api/v1/namespaces/default/events/{name}", MERGE_PATCH)
        # Both are writes that went through; none was skipped.
        assert sample(metrics, "koordpy_api_writes_total", kind="event", result="ok") == 2
        assert sample(metrics, "koordpy_api_writes_skipped_total", kind="event", reason="spam") == 0


async def test_the_writer_creates_again_when_the_event_is_gone() -> None:
    async with served() as (fake, writer, metrics):
        await writer.event("HyperNode", "rack-1", "", "Warning", "InvalidMembers", "a cycle")
        [(name, ev)] = fake.events.items()
        assert ev["metadata"]["namespace"] == "default" and "namespace" not in ev["involvedObject"]
        del fake.events[name]  # expired
        await writer.event("HyperNode", "rack-1", "", "Warning", "InvalidMembers", "a cycle")
        [(again, ev2)] = fake.events.items()
        assert again != name and ev2["count"] == 2
        assert [m for m, _, _ in fake.requests] == ["POST", "PATCH", "POST"]
        assert sample(metrics, "koordpy_api_writes_total", kind="event", result="failed") == 1  # the 404
        assert sample(metrics, "koordpy_api_writes_total", kind="event", result="ok") == 2


async def test_refusals_and_server_errors_are_seen_through_the_real_client() -> None:
    # The client hands back raw responses (_preload_content=False) without raising on a status.
    async with served() as (fake, writer, metrics):
        fake.fail_next = [503]
        await writer.event("Pod", "default/p", "uid-1", "Normal", "Preempted", "room for a gang")
        assert [m for m, _, _ in fake.requests] == ["POST", "POST"] and len(fake.events) == 1
        assert sample(metrics, "koordpy_api_retries_total", reason="503") == 1
        fake.fail_next = [403]  # refused: not retried, logged, not raised
        await writer.event("Pod", "default/p", "uid-1", "Normal", "Preempted", "room for a gang")
        assert [m for m, _, _ in fake.requests][2:] == ["PATCH"]
        assert sample(metrics, "koordpy_api_writes_total", kind="event", result="failed") == 1
        await writer.event("Pod", "default/p", "uid-1", "Normal", "Preempted", "room for a gang")
        assert [ev["count"] for ev in fake.events.values()] == [3]


async def test_events_beyond_the_objects_rate_are_counted_as_skipped() -> None:
    async with served() as (fake, writer, metrics):
        writer.events.clock = lambda: T0
        for i in range(30):
            await writer.event("Pod", "default/p", "uid-1", "Warning", "FailedScheduling", f"message {i}")
        assert len(fake.requests) == 25
        assert sample(metrics, "koordpy_api_writes_skipped_total", kind="event", reason="spam") == 5
        combined = [ev for ev in fake.events.values() if ev["message"].startswith(COMBINED_PREFIX)]
        assert len(fake.events) == 10 and [ev["count"] for ev in combined] == [16]
        assert combined[0]["message"] == COMBINED_PREFIX + "message 24"


async def test_identical_events_at_once_make_one_object_on_the_server() -> None:
    async with served() as (fake, writer, _):
        await asyncio.gather(*(writer.event("Pod", "default/p", "uid-1", "Warning", "FailedScheduling", "A")
                               for _ in range(4)))
        assert [ev["count"] for ev in fake.events.values()] == [4]
        assert [m for m, _, _ in fake.requests] == ["POST", "PATCH", "PATCH", "PATCH"]
