"""One read of the cluster filed in the scheduler's cache, for the read-only ``koordpy explain``.

LIST calls only: nothing is watched or written. Going through ``Cache`` gives the snapshot
``koordpy run`` would schedule against, objects it cannot parse reported the way it reports them.
A kind the cluster does not serve (its CRD not installed: a cluster without JobSets, say) has no
objects to leave out and goes unsaid; one it serves but does not let the reader list is noted.
Also here: the namespace a bare ``NAME`` means, as kubectl takes it from the same configuration.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import watched
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client, first_served, list_objects, not_served
from koordpy.core.snapshot import Snapshot


async def _read(kubeconfig: str | None, names: frozenset[str],
                notes: list[str]) -> tuple[Snapshot, dict[str, str]]:
    api = await api_client(kubeconfig, qps_unlimited=False)
    cache = Cache()
    try:
        for kind in watched():
            try:  # at the first of its versions served (``first_served``), as ``koordpy run`` reads it
                found, (items, version) = await first_served(
                    kind, lambda k: list_objects(api, k.group, k.version, k.plural))
            except ApiException as exc:
                if not_served(exc, kind.group, kind.plural):
                    if exc.status != 404:  # served but not readable: objects of it may exist
                        notes.append(f"{kind.plural}.{kind.group} not listed ({exc.status}): its objects are left "
                                     "out")
                    continue
                raise
            cache.reconcile(found, items, version)
    finally:
        await api.close()
    invalid = {o.key: o.error for o in cache.invalid_objects(names) if o.kind == "Pod"}
    return cache.snapshot(names), invalid


# Where a pod's ServiceAccount namespace is mounted: in-cluster, kubectl's default namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def default_namespace(kubeconfig: str | None) -> str:
    """The namespace kubectl would use for a bare name: the current context's in the kubeconfig
    (``kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``), in-cluster the pod's own, else
    ``default``. A kubeconfig that cannot be read leaves it ``default``: reading the cluster then
    says what is wrong with it."""
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path or os.path.exists(os.path.expanduser("~/.kube/config")):
        try:
            _, current = kube_config.list_kube_config_contexts(path)
        except Exception:  # no file, no current context, bad YAML: the read will name it
            return "default"
        context = (current or {}).get("context") or {}
        return str(context.get("namespace") or "default")
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        return "default"


def read_snapshot(kubeconfig: str | None, names: frozenset[str],
                  notes: list[str]) -> tuple[Snapshot, dict[str, str]]:
    """The snapshot of the cluster for pods of ``names``, and the pods it leaves out with why
    (their key: the error). CRDs that are not installed or not readable are noted in ``notes``."""
    return asyncio.run(_read(kubeconfig, names, notes))
