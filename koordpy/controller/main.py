"""``koordpy run``: the live scheduler. The watches (``podwatch``; kopf for a kind installed after the
start) keep the cache, the loop schedules, the writer writes.

With leader election on, every replica lists and watches (a warm standby), and only the holder
of the Lease runs the scheduling loop; the writer is fenced by the Lease, so a replica that
cannot renew stops writing on its own clock before another may start, and then exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import kopf
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api import kinds as kind_registry
from koordpy.api.kinds import Kind, kind_for, new_stores, snapshot_fields, watched
from koordpy.controller import memory
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client as api_client  # re-exported: callers knew it here
from koordpy.controller.client import first_served, not_served
from koordpy.controller.leader import LeaderElector
from koordpy.controller.listing import list_into
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.metrics import Metrics, Server
from koordpy.controller.podwatch import watch_kind
from koordpy.controller.writer import FLUSH_LIMIT, ApiWriter
from koordpy.core.cycle import schedule
from koordpy.core.dialects import warm_up_objects
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.kernels.warm import warm_up as warm_kernels
from koordpy.settings import Settings, TopologySource, split_address

log = structlog.get_logger("koordpy")

RESYNC_SECONDS = 300.0
# A stop must end well within the 30 s Kubernetes gives, even with the API server unreachable:
# binds in flight get STOP_GRACE, the Events owed (a Scheduled Event for each pod bound) up to
# STOP_EVENTS in all while they are being written (writer.FLUSH_STALL: not at all once none gets
# through), the Lease's release and kopf's own stop a second each.
STOP_GRACE = 2.0
STOP_EVENTS = FLUSH_LIMIT
STOP_STEP = 1.0
def resources(sources: tuple[TopologySource, ...] | None = None) -> list[tuple[Kind, str, str, str]]:
    """What koordpy lists and watches: the registry's kinds as the registry is now (a kind registered
    after import is there), less those of topology sources switched off (``Kind.source``; ``sources``
    None: none is). Each as the registry's entry (what the cache files objects by: two kinds may
    share a cache name, as Kueue's and KAI's Topology do), group, version, plural."""
    return [(kind, kind.group, kind.version, kind.plural) for kind in watched()
            if not kind.source or sources is None or kind.source in sources]


LOG_HANDLER = "koordpy"  # the root logger's handler configure_logging installs
# kopf's logger that says which of its kinds no CRD serves.
KOPF_OBSERVATION = "kopf._core.reactor.observation"


def _not_kopfs_unresolved(record: logging.LogRecord) -> bool:
    """Drops kopf's "Unresolved resources cannot be served": the kinds left to kopf are the ones the
    start found not served, which ``sync`` has said once already, and kopf says it again at every
    change of any CRD in the cluster."""
    return not record.getMessage().startswith("Unresolved resources cannot be served")


def configure_logging(level: str = "INFO", fmt: str = "auto") -> None:
    """structlog for koordpy's own lines, and the same renderer for every stdlib logger (kopf's,
    aiohttp's, asyncio's): in JSON mode each line on standard error is one JSON object, so a strict
    log pipeline never meets kopf's plain-text warnings (an optional CRD not installed, say)."""
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: Any = structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()) if console \
        else structlog.processors.JSONRenderer()
    # format_exc_info: a logged exception carries its traceback as text in the JSON line
    # ("exception"); without it, the line said exc_info=true and nothing more. The console
    # renderer prints tracebacks itself.
    tail: list[Any] = [*([] if console else [structlog.processors.format_exc_info]), renderer]
    shared: list[Any] = [structlog.contextvars.merge_contextvars, structlog.processors.add_log_level,
              structlog.processors.TimeStamper(fmt="iso")]
    handler = logging.StreamHandler(sys.stderr)
    # A stdlib record becomes an event dict ("event": its message, "logger": its name) and goes
    # through the renderer structlog's own lines use.
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail]))
    handler.set_name(LOG_HANDLER)
    root = logging.getLogger()
    for old in list(root.handlers):  # a previous call's: each line would be written twice
        if old.get_name() == LOG_HANDLER:
            root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
    logging.captureWarnings(True)  # a Python warning too is a line of the log, not text of its own
    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger(KOPF_OBSERVATION).addFilter(_not_kopfs_unresolved)  # added once, however often called
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    structlog.configure(
        processors=[*shared, *tail],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=False,
    )


async def sync(api: ApiClient, cache: Cache, kinds: list[tuple[Kind, str, str, str]] | None = None,
               unserved: set[str] | None = None, using: dict[str, Kind] | None = None) -> dict[str, int]:
    """LISTs everything into the cache, retrying until the API server answers, and returns the
    list resourceVersion of each kind served (by ``Kind.id``). Done once before the first cycle
    (scheduling on half a view would overcommit) and then every RESYNC_SECONDS as a safety net for
    deletions no watch event reported. ``unserved``: the kinds said not to be served already (kept
    up to date here), so that a kind whose CRD is not installed is said once, not at every resync.
    ``using``: the version of each kind served (``Kind.id`` -> the registry's entry that answered,
    kept up to date here and by the watches): a kind is listed at it, else, not served there, at
    its other versions newest first (``kinds.alternatives``), and the one that answers is the one
    watched; a kind not served at all is looked for at its preferred version first again."""
    said = set() if unserved is None else unserved
    chosen = {} if using is None else using
    delay = 0.5
    while True:
        versions: dict[str, int] = {}
        try:
            for kind, *_ in resources() if kinds is None else kinds:
                try:
                    found, (list_version, dropped) = await first_served(
                        chosen.get(kind.id, kind), lambda k: list_into(cache, k, api, k.group, k.version, k.plural))
                except ApiException as exc:
                    if not_served(exc, kind.group, kind.plural):
                        chosen.pop(kind.id, None)
                        if kind.id not in said:
                            log.warning("kind not served or not readable (CRD not installed?); its objects are "
                                        "ignored", kind=kind.label)
                            said.add(kind.id)
                        continue
                    raise
                if chosen.get(kind.id, kind) is not found:  # said once, when the version found changes
                    log.info("kind served at another version, reading that one", kind=kind.label,
                             version=found.api_version)
                chosen[kind.id] = found
                said.discard(kind.id)  # served (again): should it go, that is said again
                versions[kind.id] = list_version
                if dropped:
                    log.info("resync dropped objects the watches had not reported deleted", kind=kind.label,
                             count=dropped)
            return versions
        except Exception as exc:
            log.warning("list failed, retrying", error=str(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


def settle_memory(full: bool = False) -> None:
    """Moves what is alive now (the cache's nodes and pods, mostly) out of the cyclic garbage
    collector's reach: a full collection walks every tracked object, a few hundred milliseconds at
    5,000 nodes and 16,000 pods, stalling the event loop and the cycle with it. The cache's objects
    hold no reference cycles, so reference counting frees them when replaced. ``full`` first
    collects everything once, so cycles among objects frozen earlier are not kept forever."""
    if full:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


async def resync_forever(api: ApiClient, cache: Cache, kinds: list[tuple[Kind, str, str, str]],
                         unserved: set[str] | None = None, using: dict[str, Kind] | None = None) -> None:
    resyncs = 0
    while True:
        await asyncio.sleep(RESYNC_SECONDS)
        await sync(api, cache, kinds, unserved, using)
        resyncs += 1
        settle_memory(full=resyncs % 12 == 0)  # hourly, a full collection
        memory.trim_memory()  # the LIST's pages, decoded and dropped: a loop never idle trims here


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


def build_registry(cache: Cache, kubeconfig: str | None,
                   kinds: list[tuple[Kind, str, str, str]] | None = None) -> kopf.OperatorRegistry:
    """kopf's handlers: one per kind of ``kinds`` (``resources()`` if None). ``koordpy run`` gives it
    the kinds not served at the start (``kopf_kinds``), whose CRDs kopf watches to notice one
    installed later; every kind served is watched by ``podwatch``. Each at the version its entry
    names, the preferred one: kopf watches a resource only at the version its handler names, so a
    CRD installed later is noticed when it serves that version (a Kueue of today serves Topology at
    v1beta2); one serving older versions only is read by each resync (``sync`` finds the version)
    and not watched until a restart. One handler per version would watch a CRD serving several
    twice over, the streams' events racing in the cache (a deletion undone by the other's late
    update)."""
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        if kubeconfig or os.environ.get("KUBECONFIG"):
            return kopf.login_with_kubeconfig(**kwargs)
        return kopf.login_with_service_account(**kwargs)

    def watcher(kind: Kind) -> Any:
        # async, so kopf calls it on the event loop instead of handing it to a thread pool
        async def handler(**kwargs: Any) -> None:
            # Cache.observe never raises (kopf would log and drop the event, and the cache would
            # not know the object), so nothing here needs guarding.
            event = kwargs["event"]
            raw = event.get("object")
            if isinstance(raw, dict):
                cache.observe(kind, event.get("type"), raw)

        return handler

    for kind, group, version, plural in resources() if kinds is None else kinds:
        kopf.on.event(group, version, plural, registry=registry, id=f"watch-{plural}")(watcher(kind))
    return registry


def kopf_kinds(kinds: list[tuple[Kind, str, str, str]], served: Iterable[str]) -> list[tuple[Kind, str, str, str]]:
    """The kinds left to kopf: those not ``served`` (by ``Kind.id``) when the cache was filled. A kind
    served is read off its own watch stream (``podwatch.watch_kind``), as plain JSON: kopf's
    handling of each event cost more than the cache's filing of it."""
    have = set(served)
    return [entry for entry in kinds if entry[0].id not in have]


def watch_tasks(api: ApiClient, cache: Cache, kinds: list[tuple[Kind, str, str, str]], versions: dict[str, int],
                using: dict[str, Kind]) -> set[asyncio.Task[None]]:
    """A watch of each kind ``sync`` found served (``versions``, by ``Kind.id``), from its list's
    resourceVersion, at the version that answered it (``using``, which the watch keeps up to date)."""
    return {asyncio.ensure_future(watch_kind(api, cache, using[kind.id], str(versions[kind.id] or ""), using))
            for kind, *_ in kinds if kind.id in versions}


def warm_up() -> None:
    """Loads the compiled kernels now rather than in the first cycle (numba loads lazily), and runs
    the core once over a gang of two (in the words of a dialect that gives one, ``warm_up_objects``)
    and a single pod, so that what the first cycle would set up (the core's modules, the parsers) is
    set up before it. Runs the core itself: the controller does not import the simulator."""
    warm_kernels()
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "warm-up"},
            "status": {"allocatable": {"cpu": "1"}}}
    gang = list(warm_up_objects())
    pods = [o for o in gang if o.get("kind") == "Pod"]
    if not pods:  # no dialect registered gives one: the first cycle sets the core up instead
        log.info("no warm-up gang: no dialect gives one; the core is set up in the first cycle")
        return
    single = {**pods[0], "metadata": {"name": "warm-up-single", "namespace": "default"}}
    stores = new_stores()
    for raw in [node, *gang, single]:
        kind = kind_for(str(raw.get("apiVersion")), str(raw.get("kind")))
        if kind is None:  # a dialect's warm-up object of a kind not registered: left out
            log.warning("warm-up object of a kind not registered, left out", api_version=raw.get("apiVersion"),
                        kind=raw.get("kind"))
            continue
        stores[kind.store][kind.store_key(kind.key(raw))] = kind.parse(raw)
    schedule(Snapshot(**snapshot_fields(stores)), SchedulerState(), time.time())


# How long the warm-up may take before the log says why the start waits: loading the kernels from
# numba's cache takes under a second, compiling them on a cold cache (a first start) 18-22 s.
WARM_NOTICE = 2.0


async def warm_up_said(notice: float = WARM_NOTICE) -> None:
    """``warm_up`` in a thread (the metrics server answers meanwhile); one that takes longer than
    ``notice`` seconds is numba compiling the kernels, and the log says so, and when it is done,
    rather than the start staying silent for twenty seconds."""
    started = time.monotonic()
    task = asyncio.ensure_future(asyncio.to_thread(warm_up))
    done, _ = await asyncio.wait({task}, timeout=notice)
    if not done:
        log.info("warming the kernels: numba compiles them on a first start (about 20 s, once; "
                 "later starts load them from its cache)")
    await task
    if not done:
        log.info("kernels warm", seconds=round(time.monotonic() - started, 1))


def identity() -> str:
    """This replica's name in the Lease: the pod's name in a cluster, else host and process."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


async def run_async(kubeconfig: str | None, settings: Settings) -> None:
    if kubeconfig:
        os.environ["KUBECONFIG"] = kubeconfig
    names = frozenset(settings.scheduler_names)
    kinds = resources(settings.topology_sources)
    metrics = Metrics()
    synced = False
    server = Server(metrics, lambda: synced)
    if settings.server.bind_address:
        host, port = split_address(settings.server.bind_address)
        address = await server.start(host, port)
        log.info("serving /metrics, /healthz and /readyz", address=address)
    await warm_up_said()
    api = await api_client(kubeconfig)
    cache = Cache()
    unserved: set[str] = set()
    using: dict[str, Kind] = {}  # the version each kind served is read at, shared with its watch
    versions = await sync(api, cache, kinds, unserved, using)
    settle_memory()
    memory.trim_memory()
    synced = True
    groups = sum(len(cache.stores[store]) for store in {k.store for k in kind_registry.KINDS if k.gang})
    log.info("cache synced", nodes=len(cache.nodes), pods=len(cache.pods), gang_objects=groups,
             schedulers=sorted(names), preemption=settings.preemption, pods_per_cycle=settings.pods_per_cycle,
             sources=list(settings.topology_sources))
    elector: LeaderElector | None = None
    election = settings.leader_election
    if election.enabled:
        elector = LeaderElector(api, election.lease_name, election.namespace(), identity(), election.lease_duration,
                                election.renew_deadline, election.retry_period)
    writer = ApiWriter(api, metrics=metrics, fence=elector.may_write if elector is not None else None)
    loop = SchedulerLoop(cache, writer, names, metrics=metrics, preemption=settings.preemption,
                         pods_per_cycle=settings.pods_per_cycle,
                         gang_search_seconds=settings.device_gang_search_seconds,
                         default_min_runtime=settings.default_min_runtime,
                         default_preemption_delay=settings.default_preemption_delay,
                         stale_grace=settings.stale_gang_grace_period_seconds,
                         admitted_stale_grace=settings.admitted_stale_gang_grace_period_seconds)
    settings_ = kopf.OperatorSettings()
    settings_.posting.enabled = False
    settings_.persistence.diffbase_storage = _NoDiffBase()
    settings_.persistence.progress_storage = _NoProgress()
    settings_.watching.server_timeout = 300
    settings_.watching.client_timeout = 330
    settings_.networking.error_backoffs = [0.5, 1, 2, 5, 10]
    registry = build_registry(cache, kubeconfig, kopf_kinds(kinds, versions))
    stop_flag = asyncio.Event()  # tells kopf to stop, once our own tasks have
    ready_flag = asyncio.Event()
    operator = asyncio.ensure_future(kopf.operator(registry=registry, settings=settings_, clusterwide=True,
                                                   standalone=True, stop_flag=stop_flag, ready_flag=ready_flag))
    resync = asyncio.ensure_future(resync_forever(api, cache, kinds, unserved, using))
    watches = watch_tasks(api, cache, kinds, versions, using)
    scheduling = asyncio.ensure_future(_lead(elector, loop, metrics))
    stopping = asyncio.Event()
    signalled = asyncio.ensure_future(stopping.wait())
    signals = asyncio.ensure_future(_take_signals(ready_flag, stopping))
    ours = {scheduling, resync, signals, *watches}
    try:
        done, _ = await asyncio.wait({operator, signalled, scheduling, resync, *watches},
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if not task.cancelled():
                task.result()  # re-raise what ended it, if anything did
    finally:
        # Scheduling stops at once; writes in flight get a moment, queued ones are dropped (the
        # next leader rebuilds them from the API server), except Events about binds and preemptions
        # made, which only we can write: they are flushed first, still under the Lease (renewals go
        # on meanwhile), and the Lease is released after them.
        for task in ours:
            task.cancel()
        await asyncio.gather(*ours, return_exceptions=True)
        await writer.drain(STOP_GRACE, STOP_EVENTS)
        if elector is not None and not elector.lost.is_set():
            await elector.release(STOP_STEP)
        stop_flag.set()
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(operator, STOP_STEP)
        signalled.cancel()
        await server.stop()
        await api.close()
        log.info("stopped", cycles=loop.cycles)


async def _take_signals(ready_flag: asyncio.Event, stopping: asyncio.Event) -> None:
    """SIGTERM and SIGINT stop koordpy's own tasks first. kopf installs handlers of its own once
    it is ready; left to it, a stop waits 5 s for every task started after kopf (a renewal, a
    write) before cancelling them."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ready_flag.wait(), 30.0)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stopping.set)


class LeadershipLost(Exception):
    """The Lease was not renewed in time; the process ends so that a fresh start re-reads the API."""


async def _lead(elector: LeaderElector | None, loop: SchedulerLoop, metrics: Metrics) -> None:
    """Schedules: at once without leader election, else while holding the Lease."""
    if elector is None:
        metrics.leader.set(1)
        await loop.run()
        return
    await elector.acquire()
    metrics.leader.set(1)
    scheduling = asyncio.ensure_future(loop.run())
    # Renewals outlive this task on a stop: the writer flushes the Events it owes under the Lease,
    # and elector.release() ends them.
    keeping = elector.start_keeping()
    try:
        done, _ = await asyncio.wait({scheduling, keeping}, return_when=asyncio.FIRST_COMPLETED)
        if not elector.lost.is_set():
            # kopf, stopping, cancels every task started after it (these included): a stop, not a loss.
            for task in done:
                if not task.cancelled():
                    task.result()
            return
    finally:
        scheduling.cancel()
        await asyncio.gather(scheduling, return_exceptions=True)
    metrics.leader.set(0)
    raise LeadershipLost(f"lease {elector.namespace}/{elector.name} not renewed within "
                         f"{elector.renew_deadline:g}s")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (as kopf's own CLI runs it), else asyncio's: its
    sockets, TLS and callbacks are C, and the watches' reads and the writes' requests are most of
    the scheduler's CPU while it binds (docs/benchmarks.md, issue 21)."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(kubeconfig: str | None, settings: Settings) -> int:
    configure_logging(settings.logging.level, settings.logging.format)
    memory.limit_arenas()  # before the event loop's worker threads start (``controller.memory``)
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(run_async(kubeconfig, settings))
    except KeyboardInterrupt:
        pass
    except LeadershipLost as exc:
        log.error("exiting: leadership lost", reason=str(exc))
        return 1
    except OSError as exc:  # the metrics port taken, say: say so in one line
        log.error("cannot start", error=str(exc))
        return 1
    except Exception:  # a log line with its traceback, not the interpreter's plain-text one
        log.exception("exiting: unexpected error")
        return 1
    return 0
