"""An aiohttp app on a loopback port with a kubernetes_asyncio client pointed at it: the fake API
server the shell's unit tests talk to, started and stopped in one place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration


@asynccontextmanager
async def api_for(app: web.Application) -> AsyncIterator[ApiClient]:
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
