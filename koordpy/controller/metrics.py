"""What ``koordpy run`` exposes at /metrics, /healthz and /readyz.

Names follow kube-scheduler's where the meaning is the same, so dashboards and alerts written
for it read koordpy too; what only koordpy has is prefixed ``koordpy_``. One registry per
process (not prometheus_client's global one), so tests can build several and read each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

from koordpy.core.dialects import TOPOLOGY_SOURCES

log = structlog.get_logger("koordpy.metrics")

# kube-scheduler's buckets for attempt durations start at 1 ms and double; cycles here are
# a few ms to seconds.
DURATION_BUCKETS = tuple(0.001 * 2 ** i for i in range(16))
VICTIM_BUCKETS = tuple(float(2 ** i) for i in range(14))  # 1 .. 8192 victims


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # process_resident_memory_bytes, process_cpu_seconds_total...
        PlatformCollector(registry=r)
        self.attempts = Counter(
            "scheduler_schedule_attempts", "Pods the scheduler tried to place, by result "
            "(scheduled, unschedulable, error) and profile (the pod's schedulerName).",
            ["result", "profile"], registry=r)
        # As kube-scheduler's: one pod's attempt, from the start of the cycle that tried it to its
        # outcome (its bind written, or the cycle leaving it pending), labelled with that pod's profile.
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds", "Scheduling attempt latency of one pod in "
            "seconds (the scheduling cycle that tried it + its bind), by result (scheduled, unschedulable, "
            "error) and profile (the pod's schedulerName).",
            ["result", "profile"], buckets=DURATION_BUCKETS, registry=r)
        self.cycle_duration = Histogram(
            "koordpy_scheduling_cycle_duration_seconds", "Time of one scheduling cycle (every active job is "
            "tried in a cycle; binds are written after it), by result: scheduled if it chose a node for a "
            "pod, unschedulable if it chose none, error if the cycle raised.",
            ["result"], buckets=DURATION_BUCKETS, registry=r)
        self.pending = Gauge(
            "scheduler_pending_pods", "Pending pods of this scheduler by queue: active (tried in the last "
            "cycle), backoff (woken, waiting out a backoff), unschedulable (parked until an event could make "
            "them fit) or gated (spec.schedulingGates not yet empty).", ["queue"], registry=r)
        self.victims = Histogram(
            "scheduler_preemption_victims", "Victims chosen by one preemption.", buckets=VICTIM_BUCKETS,
            registry=r)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Preemptions tried (with or without victims found).", registry=r)
        self.gang_waiting = Gauge(
            "koordpy_gang_waiting", "Gangs with members pending.", registry=r)
        self.gang_timed_out = Counter(
            "koordpy_gang_timed_out", "Gangs whose wait for their members ran out.", registry=r)
        self.gang_bound = Counter(
            "koordpy_gang_bound", "Gangs placed with their minimum met.", registry=r)
        self.stale_gangs = Gauge(
            "koordpy_stale_gangs", "Gangs running below their minimum (stale), evicted once their grace ends.",
            registry=r)
        self.stale_gang_evictions = Counter(
            "koordpy_stale_gang_evictions", "Pods evicted because their gang stayed stale past its grace.",
            registry=r)
        self.topology_objects = Gauge(
            "koordpy_topology_objects", "Topology objects in the cache by source ("
            + ", ".join(f"{source}: {said}" for source, said in TOPOLOGY_SOURCES.items()) + ").", ["source"],
            registry=r)
        self.bind_duration = Histogram(
            "koordpy_bind_duration_seconds", "Time of one bind call to the API server, retries included.",
            buckets=DURATION_BUCKETS, registry=r)
        self.api_writes = Counter(
            "koordpy_api_writes", "Writes sent to the API server by kind and result (ok, failed).",
            ["kind", "result"], registry=r)
        self.api_writes_skipped = Counter(
            "koordpy_api_writes_skipped", "Writes not sent by kind and reason (unchanged: the object says so "
            "already; coalesced: a later write carries it; spam: too many events for one object).",
            ["kind", "reason"], registry=r)
        self.api_retries = Counter(
            "koordpy_api_retries", "Retried API calls by reason (status code, or unreachable).", ["reason"],
            registry=r)
        self.leader = Gauge("koordpy_leader", "1 while this replica holds the lease and schedules.", registry=r)
        self.cycles = Counter("koordpy_cycles", "Scheduling cycles run.", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Server:
    """/metrics, /healthz (the event loop answers) and /readyz (the cache has synced) over plain
    HTTP. The standby replica of a leader election is ready as well: readiness says it can take
    over, not that it schedules."""

    def __init__(self, metrics: Metrics, ready: Callable[[], bool]) -> None:
        self.metrics = metrics
        self.ready = ready
        self._runner: web.AppRunner | None = None
        self.address = ""

    async def start(self, host: str, port: int) -> str:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server: Any = site._server  # the bound socket tells the port when 0 asked for any
        sock = server.sockets[0].getsockname() if server is not None and server.sockets else (host, port)
        self.address = f"{sock[0]}:{sock[1]}"
        return self.address

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready():
            return web.Response(text="ok")
        return web.Response(status=503, text="cache not synced yet")
