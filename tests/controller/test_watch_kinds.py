"""Every kind served at the start is read off its own watch stream (``podwatch.watch_kind``), not
through kopf (issue 21: kopf's handling of the PodGroup events a gang's status writes bring back was a
sixth of the scheduler's CPU); kopf is left the kinds not served then, to notice a later install.
Against a small HTTP server standing in for the API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient

from koordpy.api.kinds import by_id
from koordpy.controller import podwatch
from koordpy.controller.cache import Cache
from koordpy.controller.main import kopf_kinds, resources
from koordpy.controller.podwatch import watch_kind
from tests.builders import node, podgroup
from tests.controller.served import api_for
from tests.sim.test_dra import DRIVER, claim

NODE = by_id("nodes")
PODGROUP = by_id("podgroups.scheduling.sigs.k8s.io")
CLAIM = by_id("resourceclaims.resource.k8s.io")


def rv(obj: dict[str, Any], version: int) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


class FakeApi:
    """LIST and WATCH of one path. ``lists`` and ``watches`` are answered in turn (the last one
    again when they run out): a LIST is (status, items, version); a WATCH (status, events)."""

    def __init__(self, path: str, lists: list[tuple[int, list[dict[str, Any]], int]],
                 watches: list[tuple[int, list[dict[str, Any]]]], compact: bool = False) -> None:
        self.path, self.lists, self.watches = path, lists, watches
        # Written as the API server writes them (no spaces), else as json.dumps does by default.
        self.separators = (",", ":") if compact else None
        self.calls: list[str] = []  # "list" or "watch@<resourceVersion>"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "True", "1"):
            self.calls.append(f"watch@{request.query.get('resourceVersion', '')}")
            status, events = self.watches.pop(0) if len(self.watches) > 1 else self.watches[0]
            if status != 200:
                return web.json_response({"kind": "Status", "code": status}, status=status)
            resp = web.StreamResponse()
            await resp.prepare(request)
            for event in events:  # several events in one chunk, and one split over two
                data = json.dumps(event, separators=self.separators).encode() + b"\n"
                await resp.write(data[:7])
                await resp.write(data[7:])
            await asyncio.sleep(0.05)
            return resp
        self.calls.append("list")
        status, items, version = self.lists.pop(0) if len(self.lists) > 1 else self.lists[0]
        if status != 200:
            return web.json_response({"kind": "Status", "code": status}, status=status)
        return web.json_response({"items": items, "metadata": {"resourceVersion": str(version)}})


@asynccontextmanager
async def served(fake: FakeApi) -> AsyncIterator[ApiClient]:
    app = web.Application()
    app.router.add_get(fake.path, fake.handle)
    async with api_for(app) as api:
        yield api


async def until(what: Callable[[], bool], seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if what():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("not reached in time")


async def run_watch(api: ApiClient, cache: Cache, kind: Any, version: str, done: Callable[[], bool]) -> None:
    task = asyncio.ensure_future(watch_kind(api, cache, kind, version))
    try:
        await until(done)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_nodes_are_watched_from_the_listed_version_and_listed_again_on_410() -> None:
    fake = FakeApi("/api/v1/nodes", lists=[(200, [rv(node("n1"), 5), rv(node("n3"), 30)], 31)], watches=[
        (200, [{"type": "ADDED", "object": rv(node("n2"), 11)},
               {"type": "MODIFIED", "object": rv(node("n1", cpu="4"), 12)},
               {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "20"}}}]),
        (200, [{"type": "ERROR", "object": {"kind": "Status", "code": 410}}]),
        (200, [])])
    cache = Cache()
    cache.observe(NODE, None, rv(node("n1"), 5))
    async with served(fake) as api:
        await run_watch(api, cache, NODE, "10", lambda: "n3" in cache.nodes and len(fake.calls) >= 4)
    assert fake.calls[:4] == ["watch@10", "watch@20", "list", "watch@31"]
    # n2 came on the watch and is not in the LIST that followed the 410: dropped as deleted.
    assert sorted(cache.nodes) == ["n1", "n3"]


async def test_a_podgroup_watch_is_read_through_the_custom_objects_path() -> None:
    fake = FakeApi("/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups", lists=[(200, [], 1)], watches=[
        (200, [{"type": "ADDED", "object": rv(podgroup("g", 3), 7)}]),
        (200, [{"type": "DELETED", "object": rv(podgroup("g", 3), 8)}]), (200, [])])
    cache = Cache()
    seen: list[bool] = []

    def done() -> bool:
        seen.append("default/g" in cache.podgroups)
        return len(fake.calls) >= 3

    async with served(fake) as api:
        await run_watch(api, cache, PODGROUP, "5", done)
    assert True in seen and "default/g" not in cache.podgroups
    assert fake.calls[:2] == ["watch@5", "watch@7"]


async def test_a_refused_watch_is_never_read_as_an_object(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 403 or 500 answers with a Status object: read as a watch line it was filed as a pod or node.
    monkeypatch.setattr(podwatch, "RETRY_MAX", 0.05)
    fake = FakeApi("/api/v1/nodes", lists=[(200, [], 3)], watches=[(500, [])])
    cache = Cache()
    async with served(fake) as api:
        await run_watch(api, cache, NODE, "3", lambda: fake.calls.count("list") >= 2)
    assert cache.nodes == {} and cache.invalid == {}


async def test_a_kind_no_longer_served_is_looked_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podwatch, "NOT_SERVED_RETRY", 0.05)
    fake = FakeApi("/apis/scheduling.sigs.k8s.io/v1alpha1/podgroups",
                   lists=[(404, [], 0), (404, [], 0), (200, [rv(podgroup("g", 3), 9)], 9)], watches=[(200, [])])
    cache = Cache()
    async with served(fake) as api:
        await run_watch(api, cache, PODGROUP, "", lambda: "default/g" in cache.podgroups)
    assert fake.calls[:3] == ["list", "list", "list"]


def test_kopf_gets_only_the_kinds_not_served_at_the_start() -> None:
    served = {kind.id for kind, *_ in resources() if not kind.optional} | {PODGROUP.id}
    left = kopf_kinds(resources(), served)
    assert {kind.id for kind, *_ in left} == {kind.id for kind, *_ in resources()} - served
    assert PODGROUP.id not in {kind.id for kind, *_ in left}
    assert all(kind.optional for kind, *_ in left)


def _claim_with_parameters(name: str, version: int, parameters: dict[str, Any]) -> dict[str, Any]:
    body = rv(claim(name), version)
    body["spec"]["devices"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": parameters}}]
    return body


async def test_json_any_api_server_may_send_is_read_in_lists_and_watch_lines() -> None:
    # A claim's opaque parameters are kept by the API server as the client wrote them: JSON nested
    # deeper than pydantic_core's 200 levels, or a lone surrogate escape, is valid JSON that json.loads
    # reads. Unreadable, one such claim failed every LIST and watch of ResourceClaims (nothing else
    # of the kind was seen again, and the startup sync retried for ever).
    deep: Any = "leaf"
    for _ in range(250):
        deep = [deep]
    fake = FakeApi("/apis/resource.k8s.io/v1/resourceclaims",
                   lists=[(200, [_claim_with_parameters("deep", 5, {"x": deep})], 6)],
                   watches=[(200, [{"type": "ADDED", "object": _claim_with_parameters("odd", 7, {"s": "\ud800"})}]),
                            (200, [])])
    cache = Cache()
    async with served(fake) as api:
        await run_watch(api, cache, CLAIM, "", lambda: "default/odd" in cache.snapshot(frozenset()).devices.claims)
    assert sorted(cache.snapshot(frozenset()).devices.claims) == ["default/deep", "default/odd"]
