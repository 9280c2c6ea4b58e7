"""LIST calls shared by the initial sync, the periodic resync and the pod watch."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi, SchedulingV1Api
from kubernetes_asyncio.client.exceptions import ApiException

if TYPE_CHECKING:
    from koordpy.controller.cache import Cache


# Objects a LIST page asks for. A LIST of every pod at once held all of them as JSON and as
# decoded dicts (managedFields included) at the same moment: at 16,000 pods the periodic resync
# took the scheduler's memory from ~650 MiB to 1.1 GiB, and Python keeps what it grew into.
PAGE = 500


async def list_pages(api: ApiClient, group: str, version: str, plural: str,
                     page: int | None = None) -> AsyncIterator[tuple[list[dict[str, Any]], int]]:
    """One LIST in pages of ``page`` objects, decoded as plain JSON: each page's items with the
    list's resourceVersion (0 if none; every page of one list has the same)."""
    cont: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": page or PAGE, "_preload_content": False}
        if cont:
            kwargs["_continue"] = cont
        if group == "":
            resp = await _core_list(CoreV1Api(api), plural)(**kwargs)
        elif (group, plural) == ("scheduling.k8s.io", "priorityclasses"):
            resp = await SchedulingV1Api(api).list_priority_class(**kwargs)
        else:
            resp = await CustomObjectsApi(api).list_cluster_custom_object(group, version, plural, **kwargs)
        try:
            if resp.status >= 400:  # unread, a raw response does not raise: a kind not served is a 404 here
                raise ApiException(status=resp.status, reason=str(resp.reason))
            data = await resp.json()
        finally:
            resp.release()
        meta = data.get("metadata") or {}
        try:
            list_version = int(meta.get("resourceVersion") or 0)
        except ValueError:
            list_version = 0
        yield data.get("items") or [], list_version
        cont = meta.get("continue")
        if not cont:
            return


def _core_list(core: CoreV1Api, plural: str) -> Any:
    """The LIST call of a core-API kind (each has its own method); a kind without one is a bug here,
    said as such rather than listed as some other kind."""
    calls = {"nodes": core.list_node, "pods": core.list_pod_for_all_namespaces, "namespaces": core.list_namespace,
             "persistentvolumes": core.list_persistent_volume,
             "persistentvolumeclaims": core.list_persistent_volume_claim_for_all_namespaces}
    if plural not in calls:
        raise ValueError(f"koordpy.controller.listing has no LIST call for the core kind {plural!r}")
    return calls[plural]


async def list_objects(api: ApiClient, group: str, version: str, plural: str) -> tuple[list[dict[str, Any]], int]:
    """One whole LIST (for one-off looks): every item and the list's resourceVersion."""
    items: list[dict[str, Any]] = []
    list_version = 0
    async for page, page_version in list_pages(api, group, version, plural):
        items += page
        list_version = list_version or page_version
    return items, list_version


async def list_into(cache: Cache, kind: str, api: ApiClient, group: str, version: str, plural: str) -> tuple[int, int]:
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
    them), the form ``koordpy.sim.simulator.World.from_objects`` takes. A kind whose CRD is not
    installed is skipped."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from koordpy.api.kinds import optional, watched
    from koordpy.controller.main import api_client

    api = await api_client(kubeconfig, qps_unlimited=False)
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        for kind in watched():
            try:
                items, _ = await list_objects(api, kind.group, kind.version, kind.plural)
            except ApiException as exc:
                if exc.status == 404 and optional(kind.group, kind.plural):
                    continue
                raise
            for raw in items:
                out.append((f"{kind.id} {kind.key(raw)}",
                            {**raw, "apiVersion": kind.api_version, "kind": kind.kind}))
    finally:
        await api.close()
    return out


def read_cluster(kubeconfig: str | None) -> list[tuple[str, dict[str, Any]]]:
    """``list_everything`` for a caller without an event loop (the CLI)."""
    return asyncio.run(list_everything(kubeconfig))
