"""Review of issue 21's controller changes (CPU per pod): every kind served at the start is read off
its own watch stream (``podwatch.watch_kind``) instead of through kopf. What kopf did for those kinds
must still be done: a watch that fails over and over backs off instead of asking the API server again
at once (kopf raised on a watch ERROR other than 410 and paused between reconnects "to prevent API
flooding"), while a 410 still lists again at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from koordpy.api.kinds import by_id
from koordpy.controller import podwatch
from koordpy.controller.cache import Cache
from koordpy.controller.podwatch import watch_kind
from tests.builders import node

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
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server
    api = ApiClient(Configuration(host=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"))
    try:
        yield api
    finally:
        await api.close()
        await runner.cleanup()


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
