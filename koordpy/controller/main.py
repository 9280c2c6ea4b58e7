"""``koordpy run``: the live scheduler. kopf watches, the loop schedules, the writer writes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any

import kopf
import structlog
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import watched
from koordpy.controller.cache import Cache, cache_name
from koordpy.controller.listing import list_objects
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.podwatch import watch_pods
from koordpy.controller.writer import ApiWriter

log = structlog.get_logger("koordpy")

RESYNC_SECONDS = 300.0
# What koordpy lists and watches: the registry's kinds, each under the name the cache files it by.
RESOURCES: list[tuple[str, str, str, str]] = [  # cache name, group, version, plural
    (cache_name(kind), kind.group, kind.version, kind.plural) for kind in watched()]


def configure_logging(level: str = "INFO") -> None:
    logging.basicConfig(level=getattr(logging, level), format="%(message)s")
    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    structlog.configure(
        # format_exc_info: a logged exception carries its traceback as text in the JSON line
        # ("exception"); without it, the line said exc_info=true and nothing more.
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level)),
    )


async def api_client(kubeconfig: str | None, qps_unlimited: bool = True) -> ApiClient:
    cfg = Configuration()
    if kubeconfig or os.environ.get("KUBECONFIG"):
        await kube_config.load_kube_config(config_file=kubeconfig or os.environ["KUBECONFIG"],
                                           client_configuration=cfg)
    else:
        kube_config.load_incluster_config(client_configuration=cfg)
    cfg.connection_pool_maxsize = 128 if qps_unlimited else 16
    return ApiClient(cfg)


async def sync(api: ApiClient, cache: Cache) -> dict[str, int]:
    """LISTs everything into the cache, retrying until the API server answers, and returns each
    kind's list resourceVersion. Done once before the first cycle (scheduling on half a view
    would overcommit) and then every RESYNC_SECONDS as a safety net for deletions no watch
    event reported."""
    delay = 0.5
    while True:
        versions: dict[str, int] = {}
        try:
            for kind, group, version, plural in RESOURCES:
                try:
                    items, list_version = await list_objects(api, group, version, plural)
                except ApiException as exc:
                    if exc.status in (403, 404) and group not in ("", "scheduling.k8s.io"):
                        log.warning("kind not served or not readable (CRD not installed?); its objects are "
                                    "ignored", kind=kind)
                        continue
                    raise
                versions[kind] = list_version
                dropped = cache.reconcile(kind, items, list_version)
                if dropped:
                    log.info("resync dropped objects the watches had not reported deleted", kind=kind,
                             count=dropped)
            return versions
        except Exception as exc:
            log.warning("list failed, retrying", error=str(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


async def resync_forever(api: ApiClient, cache: Cache) -> None:
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        await sync(api, cache)


class _NoDiffBase(kopf.DiffBaseStorage):
    """No diff-base at all. Only event handlers are registered, which never compare an
    object's old and new essence, yet kopf would deep-copy every pod it sees to build one
    (a tenth of the scheduler's CPU in the live benchmark). Nothing is ever written back."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


class _NoProgress(kopf.ProgressStorage):
    """No handler progress is kept: event handlers have none, and user objects must carry
    no kopf annotations."""

    def fetch(self, *, key: Any, body: Any) -> Any:
        return None

    def store(self, *, key: Any, record: Any, body: Any, patch: Any) -> None:
        return None

    def purge(self, *, key: Any, body: Any, patch: Any) -> None:
        return None

    def touch(self, *, body: Any, patch: Any, value: Any) -> None:
        return None

    def clear(self, *, essence: Any) -> Any:
        return essence


def build_registry(cache: Cache, kubeconfig: str | None) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        if kubeconfig or os.environ.get("KUBECONFIG"):
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs)

    def watcher(kind: str) -> Any:
        # async, so kopf calls it on the event loop instead of handing it to a thread pool
        async def handler(**kwargs: Any) -> None:
            # Cache.observe never raises (kopf would log and drop the event, and the cache would
            # not know the object), so nothing here needs guarding.
            event = kwargs["event"]
            raw = event.get("object")
            if isinstance(raw, dict):
                cache.observe(kind, event.get("type"), raw)

        return handler

    for kind, group, version, plural in RESOURCES:
        if kind != "Pod":  # pods have a watch of their own (koordpy.controller.podwatch)
            kopf.on.event(group, version, plural, registry=registry, id=f"watch-{plural}")(watcher(kind))
    return registry


def warm_up() -> None:
    """Loads the compiled kernels now rather than in the first cycle (numba loads lazily)."""
    from koordpy.sim.simulator import World, simulate

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "warm-up"},
            "status": {"allocatable": {"cpu": "1"}}}
    group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": "w", "namespace": "default", "annotations": {
                 "gang.scheduling.koordinator.sh/network-topology-spec":
                     '{"gatherStrategy": [{"layer": "ClusterTopologyLayer", "strategy": "PreferGather"}]}'}},
             "spec": {"minMember": 2}}
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"warm-up-{i}", "namespace": "default", "labels": {"pod-group.scheduling.sigs.k8s.io": "w"}},
        "spec": {"schedulerName": "koordpy", "containers": [{"name": "c", "image": "x"}]}} for i in range(2)]
    single = {**pods[0], "metadata": {"name": "warm-up-single", "namespace": "default"}}
    simulate(World.from_objects([("warm-up", o) for o in [node, group, *pods, single]]))


async def run_async(kubeconfig: str | None, scheduler_names: frozenset[str]) -> None:
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig
    warm_up()
    api = await api_client(kubeconfig)
    cache = Cache()
    versions = await sync(api, cache)
    log.info("cache synced", nodes=len(cache.nodes), pods=len(cache.pods), podgroups=len(cache.podgroups),
             schedulers=sorted(scheduler_names))
    writer = ApiWriter(api)
    loop = SchedulerLoop(cache, writer, scheduler_names)
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.persistence.progress_storage = _NoProgress()
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.error_backoffs = [0.5, 1, 2, 5, 10]
    registry = build_registry(cache, kubeconfig)
    # kopf turns SIGTERM/SIGINT into a graceful stop of the operator; the loop stops with it.
    operator = asyncio.ensure_future(
        kopf.operator(registry=registry, settings=settings, clusterwide=True, standalone=True))
    scheduling = asyncio.ensure_future(loop.run())
    resync = asyncio.ensure_future(resync_forever(api, cache))
    pods = asyncio.ensure_future(watch_pods(api, cache, str(versions.get("Pod") or "")))
    tasks = {operator, scheduling, resync, pods}
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # re-raise what ended it, if anything did
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()
        log.info("stopped", cycles=loop.cycles)


def run(kubeconfig: str | None, scheduler_names: list[str], log_level: str = "INFO") -> int:
    configure_logging(log_level)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_async(kubeconfig, frozenset(scheduler_names)))
    return 0
