"""Review of issue 21's controller changes (CPU per pod): every kind served at the start is read off
its own watch stream (``podwatch.watch_kind``) instead of through kopf. What kopf did for those kinds
must still be done: a watch that fails over and over backs off instead of asking the API server again
at once (kopf raised on a watch ERROR other than 410 and paused between reconnects "to prevent API
flooding"), while a 410 still lists again at once."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import by_id
from koordpy.controller import podwatch
from koordpy.controller.cache import Cache
from koordpy.controller.podwatch import watch_kind
from tests.builders import node
from tests.controller.served import api_for

NODE = by_id("nodes")


class Api:
    """LIST and WATCH of nodes; every WATCH answers at once with ``events`` (then ends)."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.calls: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "True", "1"):
            self.calls.append("watch")
            resp = web.StreamResponse()
            await resp.prepare(request)
            for event in self.events:
                await resp.write(json.dumps(event).encode() + b"\n")
            return resp
        self.calls.append("list")
        item = node("n1")
        item["metadata"]["resourceVersion"] = "5"
        return web.json_response({"items": [item], "metadata": {"resourceVersion": "5"}})


@asynccontextmanager
async def served(fake: Api) -> AsyncIterator[ApiClient]:
    app = web.Application()
    app.router.add_get("/api/v1/nodes", fake.handle)
    async with api_for(app) as api:
        yield api


async def watch_for(fake: Api, seconds: float) -> Cache:
    cache = Cache()
    async with served(fake) as api:
        task = asyncio.ensure_future(watch_kind(api, cache, NODE, "5"))
        await asyncio.sleep(seconds)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return cache


async def test_a_watch_error_other_than_410_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # An ERROR event that is not "410 Gone" (a conversion webhook down, an internal error) is a
    # failure: before the fix every kind listed and watched again at once, forever (hundreds of
    # LISTs a second); kopf, which watched these kinds before, backed off.
    monkeypatch.setattr(podwatch, "RETRY_MAX", 10.0)
    fake = Api([{"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "conversion failed"}}])
    await watch_for(fake, 1.2)
    # Backoff 0.5 s then 1 s: at most three watches in 1.2 s.
    assert 1 <= fake.calls.count("watch") <= 3, fake.calls.count("watch")


async def test_a_410_still_lists_again_at_once() -> None:
    fake = Api([{"type": "ERROR", "object": {"kind": "Status", "code": 410}}])
    await watch_for(fake, 0.5)
    # No backoff for an expired version: listing again is the answer, as before.
    assert fake.calls.count("list") >= 5


async def test_a_watch_that_ends_at_once_with_nothing_is_not_asked_again_at_once() -> None:
    # A stream that ends before any event (a proxy or load balancer that closes it) was asked for
    # again at once, in a loop, by every kind; kopf paused between reconnects. It backs off.
    fake = Api([])
    await watch_for(fake, 1.2)
    assert 1 <= fake.calls.count("watch") <= 3, fake.calls.count("watch")
    assert "list" not in fake.calls  # nothing failed: the watch resumes from its version


async def test_a_stream_with_events_resets_the_backoff() -> None:
    # A healthy stream (here one MODIFIED event a stream) is asked for again at once, as before.
    changed = node("n1", cpu="4")
    changed["metadata"]["resourceVersion"] = "6"
    fake = Api([{"type": "MODIFIED", "object": changed}])
    cache = await watch_for(fake, 0.5)
    assert fake.calls.count("watch") >= 5
    assert "n1" in cache.nodes


# -- the hot writes sent directly (transport.DirectCore) ------------------------------------------


async def test_a_direct_write_carries_the_current_token_and_maps_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    # An in-cluster ServiceAccount token is re-read by the configuration's refresh hook (bound tokens
    # rotate hourly): each direct write must ask for it, as the generated calls do, not keep the
    # first. A refusal comes back as the ApiException (status, body) the writer's retries read.
    from koordpy.controller import transport

    monkeypatch.setattr(random, "random", lambda: 0.0)
    seen: list[str] = []
    answers = [(201, {}), (422, {"kind": "Status", "code": 422, "reason": "Invalid"}),
               (503, {}), (201, {})]

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        status, body = answers.pop(0)
        return web.json_response(body, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server
    tokens = iter(f"t{i}" for i in range(100))

    def refresh(cfg: Configuration) -> None:  # what incluster_config's load_token_from_file does
        cfg.api_key["BearerToken"] = next(tokens)

    cfg = Configuration(host=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}",
                        api_key={"BearerToken": "t"}, api_key_prefix={"BearerToken": "Bearer"})
    cfg.refresh_api_key_hook = refresh
    api = ApiClient(cfg)
    core = transport.DirectCore(api)
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n"}}
    try:
        await transport.call("bind", "bind", lambda: core.create_namespaced_pod_binding(
            "p", "ns", body, _preload_content=False))
        with pytest.raises(ApiException) as refused:
            await transport.call("bind", "bind", lambda: core.create_namespaced_pod_binding(
                "p", "ns", body, _preload_content=False))
        assert refused.value.status == 422 and b"Invalid" in (refused.value.body or b"")
        # 503 is retried, with a token asked for again.
        await transport.call("bind", "bind", lambda: core.create_namespaced_pod_binding(
            "p", "ns", body, _preload_content=False))
    finally:
        await api.close()
        await runner.cleanup()
    assert seen == ["Bearer t0", "Bearer t1", "Bearer t2", "Bearer t3"]


async def test_a_crd_deleted_and_installed_again_is_watched_again_within_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Before issue 21, kopf watched the CRDs and took a re-installed kind up within a second; the
    # direct watch looked for it again only every 60 s (measured live: 58.9 s before a
    # ClusterNetworkTopology created on the re-installed CRD got its status). It looks again soon
    # after the deletion, then less and less often (NOT_SERVED_RETRY at the most).
    from koordpy.controller.podwatch import NOT_SERVED_RETRY

    assert NOT_SERVED_RETRY == 60.0  # the bound stays; the first looks come sooner
    lists = [404, 404, 200]
    calls: list[str] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "True", "1"):
            calls.append("watch")
            if lists:  # still deleted: a watch of a kind not served is a 404 too
                return web.json_response({"kind": "Status", "code": 404}, status=404)
            resp = web.StreamResponse()
            await resp.prepare(request)
            await asyncio.sleep(0.2)
            return resp
        calls.append("list")
        status = lists.pop(0) if lists else 200
        if status != 200:
            return web.json_response({"kind": "Status", "code": status}, status=status)
        item = node("n1")
        item["metadata"]["resourceVersion"] = "9"
        return web.json_response({"items": [item], "metadata": {"resourceVersion": "9"}})

    app = web.Application()
    app.router.add_get("/api/v1/nodes", handle)
    cache = Cache()
    # Nodes stand in for an optional kind here: not_served asks the registry, so it is told yes.
    monkeypatch.setattr(podwatch, "not_served", lambda exc, group, plural, refused=True: exc.status in (403, 404))
    async with api_for(app) as api:
        task = asyncio.ensure_future(watch_kind(api, cache, NODE, "5"))
        try:
            for _ in range(400):  # 8 s at the most
                if "n1" in cache.nodes:
                    break
                await asyncio.sleep(0.02)
            assert "n1" in cache.nodes, calls
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
