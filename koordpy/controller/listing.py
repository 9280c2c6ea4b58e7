"""LISTs into the cache, shared by the initial sync, the periodic resync and the pod watch, and the
one-off LIST of everything ``koordpy topology show`` reads. The calls themselves are ``client``'s."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import Kind, watched
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client, first_served, list_objects, list_pages, not_served


async def list_into(cache: Cache, kind: str | Kind, api: ApiClient, group: str, version: str,
                    plural: str) -> tuple[int, int]:
    """One LIST of ``kind`` into the cache page by page, then what the cache holds from before the
    list but the list no longer has is dropped. Returns the list's resourceVersion and how many
    were dropped."""
    listed: set[str] = set()
    list_version = 0
    async for page, page_version in list_pages(api, group, version, plural):
        list_version = list_version or page_version
        listed |= cache.observe_listed(kind, page)
    return list_version, cache.drop_unlisted(kind, listed, list_version)


async def list_everything(kubeconfig: str | None) -> list[tuple[str, dict[str, Any]]]:
    """One LIST of every kind koordpy reads, for a one-off look (``koordpy topology show``): each
    item as ``(source, raw object)`` with its apiVersion and kind filled in (a list's items omit
    them), the form ``koordpy.sim.simulator.World.from_objects`` takes. A kind is listed at the first
    of its versions the cluster serves (``first_served``); one whose CRD is not installed is skipped."""
    api = await api_client(kubeconfig, qps_unlimited=False)
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        for kind in watched():
            try:  # at the first of its versions served, the one its items are stamped with
                found, (items, _) = await first_served(
                    kind, lambda k: list_objects(api, k.group, k.version, k.plural))
            except ApiException as exc:
                if not_served(exc, kind.group, kind.plural, refused=False):
                    continue
                raise
            for raw in items:
                out.append((f"{found.id} {found.key(raw)}",
                            {**raw, "apiVersion": found.api_version, "kind": found.kind}))
    finally:
        await api.close()
    return out


def read_cluster(kubeconfig: str | None) -> list[tuple[str, dict[str, Any]]]:
    """``list_everything`` for a caller without an event loop (the CLI)."""
    return asyncio.run(list_everything(kubeconfig))
