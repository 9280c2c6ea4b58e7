"""LIST calls shared by the initial sync, the periodic resync and the pod watch."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi, SchedulingV1Api


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
        data = await resp.json()
    finally:
        resp.release()
    items: list[dict[str, Any]] = data.get("items") or []
    try:
        list_version = int((data.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        list_version = 0
    return items, list_version
