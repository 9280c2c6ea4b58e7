"""The pod watch: the one resource koordpy watches without kopf.

Pods are the flood (each brings 3-5 watch events: created, bound, then the kubelet's status
updates). Through kopf's per-event machinery they took ~30% of the scheduler's CPU and held
the live benchmark at 51-58% of the raw binding ceiling; read straight off the API server's
watch stream, as plain JSON, the same run reached 92% (docs/benchmarks.md). Every other kind
stays with kopf.

The watch resumes from the last resourceVersion it saw (bookmarks included); when the API
server says that version is gone (410), or the connection fails, it lists again and
reconciles the cache with the list.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient, CoreV1Api

from koordpy.api.kinds import by_id
from koordpy.controller.cache import Cache
from koordpy.controller.listing import list_into

POD = by_id("pods")
log = structlog.get_logger("koordpy.podwatch")
WATCH_SECONDS = 300


async def lines(resp: Any) -> AsyncIterator[bytes]:
    """Newline-separated records of a chunked response, of any length (aiohttp's readline
    refuses lines over 64 KiB, and a pod with large annotations can be longer)."""
    buffer = b""
    async for chunk in resp.content.iter_any():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


async def relist(api: ApiClient, cache: Cache) -> str:
    version, _ = await list_into(cache, POD.label, api, POD.group, POD.version, POD.plural)
    return str(version) if version else ""


async def watch_pods(api: ApiClient, cache: Cache, version: str) -> None:
    """Runs forever; ``version`` is the resourceVersion of the list the cache was filled from."""
    core = CoreV1Api(api)
    delay = 0.5
    while True:
        try:
            if not version:
                version = await relist(api, cache)
            resp = await core.list_pod_for_all_namespaces(
                watch=True, resource_version=version, allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS, _preload_content=False)
            try:
                async for line in lines(resp):
                    event = json.loads(line)
                    kind = event.get("type")
                    obj = event.get("object") or {}
                    if kind == "ERROR":  # usually 410: our version is too old to resume from
                        log.info("pod watch expired, listing again", status=obj.get("code"))
                        version = ""
                        break
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind != "BOOKMARK":
                        cache.observe(POD.label, kind, obj)
                delay = 0.5
            finally:
                resp.release()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("pod watch failed, listing again", error=str(exc), retry_in=delay)
            version = ""
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)
