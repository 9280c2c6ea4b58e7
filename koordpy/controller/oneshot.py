"""One read of the cluster filed in the scheduler's cache, for the read-only ``koordpy explain``.

LIST calls only: nothing is watched or written. Going through ``Cache`` gives the snapshot
``koordpy run`` would schedule against, objects it cannot parse reported the way it reports them.
"""

from __future__ import annotations

import asyncio

from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import watched
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client, list_objects, not_served
from koordpy.core.snapshot import Snapshot


async def _read(kubeconfig: str | None, names: frozenset[str],
                notes: list[str]) -> tuple[Snapshot, dict[str, str]]:
    api = await api_client(kubeconfig, qps_unlimited=False)
    cache = Cache()
    try:
        for kind in watched():
            try:
                items, version = await list_objects(api, kind.group, kind.version, kind.plural)
            except ApiException as exc:
                if not_served(exc, kind.group, kind.plural):
                    notes.append(f"{kind.plural}.{kind.group} not listed ({exc.status}): its objects are left out")
                    continue
                raise
            cache.reconcile(kind, items, version)
    finally:
        await api.close()
    invalid = {o.key: o.error for o in cache.invalid_objects(names) if o.kind == "Pod"}
    return cache.snapshot(names), invalid


def read_snapshot(kubeconfig: str | None, names: frozenset[str],
                  notes: list[str]) -> tuple[Snapshot, dict[str, str]]:
    """The snapshot of the cluster for pods of ``names``, and the pods it leaves out with why
    (their key: the error). CRDs that are not installed or not readable are noted in ``notes``."""
    return asyncio.run(_read(kubeconfig, names, notes))
