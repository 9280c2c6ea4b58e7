"""LIST calls shared by the initial sync, the periodic resync and the pod watch."""

from __future__ import annotations

import asyncio
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi, SchedulingV1Api
from kubernetes_asyncio.client.exceptions import ApiException


async def list_objects(api: ApiClient, group: str, version: str, plural: str) -> tuple[list[dict[str, Any]], int]:
    """One LIST, decoded as plain JSON: the items and the list's resourceVersion (0 if none)."""
    if group == "":
        core = CoreV1Api(api)
        call = core.list_node if plural == "nodes" else core.list_pod_for_all_namespaces
        resp = await call(_preload_content=False)
    elif group == "scheduling.k8s.io":
        resp = await SchedulingV1Api(api).list_priority_class(_preload_content=False)
    else:
        resp = await CustomObjectsApi(api).list_cluster_custom_object(group, version, plural, _preload_content=False)
    try:
        if resp.status >= 400:  # unread, a raw response does not raise: a kind not served is a 404 here
            raise ApiException(status=resp.status, reason=str(resp.reason))
        data = await resp.json()
    finally:
        resp.release()
    items: list[dict[str, Any]] = data.get("items") or []
    try:
        list_version = int((data.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        list_version = 0
    return items, list_version


async def list_everything(kubeconfig: str | None) -> list[tuple[str, dict[str, Any]]]:
    """One LIST of every kind koordpy reads, for a one-off look (``koordpy topology show``): each
    item as ``(source, raw object)`` with its apiVersion and kind filled in (a list's items omit
    them), the form ``koordpy.sim.simulator.World.from_objects`` takes. A kind whose CRD is not
    installed is skipped."""
    from kubernetes_asyncio.client.exceptions import ApiException

    from koordpy.api.kinds import watched
    from koordpy.controller.main import api_client

    api = await api_client(kubeconfig, qps_unlimited=False)
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        for kind in watched():
            try:
                items, _ = await list_objects(api, kind.group, kind.version, kind.plural)
            except ApiException as exc:
                if exc.status == 404 and kind.group not in ("", "scheduling.k8s.io"):
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
