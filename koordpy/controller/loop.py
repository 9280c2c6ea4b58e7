"""The scheduling loop: cache -> snapshot -> core cycle -> writes, whenever the cluster changes.

A cycle that fails is logged with its traceback and retried after a backoff that doubles up
to FAILURE_BACKOFF_MAX (and resets once a cycle succeeds): a failure that some object makes
certain must not spin the scheduler, nor flood its log, at full speed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Mapping
from typing import TypeGuard, assert_never

import structlog

from koordpy.api.kinds import by_id
from koordpy.controller import claimwrites, memory
from koordpy.controller.binding import Binder
from koordpy.controller.cache import Cache
from koordpy.controller.deallocation import Deallocation
from koordpy.controller.metrics import Metrics
from koordpy.controller.writer import CONDITION_LIMIT, ApiWriter, Gone, cap, now_rfc3339
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import JOB_ERROR_PREFIX, schedule
from koordpy.core.decisions import (
    Annotate,
    Bind,
    CycleResult,
    Deallocate,
    Decision,
    DeleteClaim,
    Event,
    EventReason,
    Evict,
    GangStatusUpdate,
    Nominate,
    ObjectAnnotate,
    Preempt,
    SetPodScheduledFalse,
)
from koordpy.core.dialects import invalid_reason, object_statuses, status_said
from koordpy.core.naming import natural_key
from koordpy.core.snapshot import ADMITTED_STALE_GRACE, STALE_GRACE, Snapshot
from koordpy.core.state import SchedulerState
from koordpy.devices.gangsearch import GANG_BUDGET

log = structlog.get_logger("koordpy.loop")
FAILURE_BACKOFF = 1.0
FAILURE_BACKOFF_MAX = 30.0
# Every so often a cycle is computed from the whole cache, not from the core's standing view: a
# safety net for what the incremental view cannot see (a condition write that was lost, say). The
# unschedulable queue's own flush is the core's (FLUSH_SECONDS, per job), which costs only the jobs
# parked that long; a rebuild costs the whole cluster (2.5 s at 5,000 nodes and 50,000 pods), so it
# is rarer.
FULL_CYCLE_SECONDS = 1800.0
# After cycles, once the loop has been idle for a flush period, malloc's free pages are handed back
# (``memory.trim_memory``, 2-11 ms at 5,000 nodes and 16,000 pods), at most once in TRIM_SECONDS.
TRIM_SECONDS = 10.0
# After a cycle that decided nothing, the next one that only the changes of pods with a node
# (``cache.Changes``: calm) bring starts no sooner than this after it ended: a stream of them, 1,000
# victims' ~2,500 events, costs tens of cycles rather than hundreds, while a lone change after a quiet
# spell, and anything urgent or due, goes at once.
CALM_BATCH = 0.1


def _is_scheduled(d: object) -> TypeGuard[Event]:
    """A pod's Scheduled Event, which is written after its bind (never for a refused one)."""
    return isinstance(d, Event) and d.kind == "Pod" and d.reason == EventReason.SCHEDULED


# The order in which a cycle's decisions are carried out: the pods are assumed on their nodes
# before anything else goes out (see ``Loop.cycle``).
_PHASES: dict[type, int] = {Bind: 0, Preempt: 1, Evict: 1, Nominate: 2}


def _phase(d: Decision) -> int:
    return _PHASES.get(type(d), 3)


def _schedule_timed(snapshot: Snapshot, state: SchedulerState, now: float) -> tuple[CycleResult, float]:
    """``schedule``, and the CPU its thread spent on it (the cycle's wall time also holds GIL waits)."""
    started = time.thread_time()
    result = schedule(snapshot, state, now)
    return result, time.thread_time() - started


class SchedulerLoop:
    def __init__(self, cache: Cache, writer: ApiWriter, scheduler_names: frozenset[str],
                 debounce: float = 0.02, flush_every: float = 0.5, metrics: Metrics | None = None,
                 preemption: bool = True, pods_per_cycle: int = 0,
                 gang_search_seconds: float = GANG_BUDGET, default_min_runtime: float = 0.0,
                 default_preemption_delay: float = 0.0, stale_grace: float = STALE_GRACE,
                 admitted_stale_grace: float = ADMITTED_STALE_GRACE) -> None:
        self.cache = cache
        self.metrics = metrics
        self.preemption = preemption
        self.pods_per_cycle = pods_per_cycle  # podsPerCycle; 0: no limit
        self.gang_search_seconds = gang_search_seconds  # deviceGangSearchSeconds
        # defaultPreemptMinRuntimeSeconds, defaultPreemptionDelaySeconds
        self.default_min_runtime, self.default_preemption_delay = default_min_runtime, default_preemption_delay
        self.stale_grace = stale_grace  # staleGangGracePeriodSeconds
        self.admitted_stale_grace = admitted_stale_grace  # admittedStaleGangGracePeriodSeconds
        # What the last cycle decided, for its log line: pods it left for the next (podsPerCycle),
        # conditions PodScheduled=False and nominations it wrote (benchmarks time answers by them).
        self._told: dict[str, int] = {}
        self._core_cpu = 0.0  # the last cycle's core, CPU seconds of its thread
        # A parked job's messages (by the dict's id, the dict held) -> the gangs of its pods (``_gangs_waiting``).
        self._kept_gangs: dict[int, tuple[dict[str, str], frozenset[str]]] = {}
        self.writer = writer
        self.binder = Binder(cache, writer, metrics)  # the pods' binding cycles
        self.names = scheduler_names
        self.debounce = debounce
        self.flush_every = flush_every
        self.state = SchedulerState()
        self.cycles = 0
        self.failures = 0  # cycles failed in a row
        # What was reported, by UID (an object recreated under the same name is another object),
        # holding only what is still invalid: object -> error.
        self._reported: dict[str, str] = {}
        # A topology object (store, name) -> the problems its last Warning Event told.
        self._problems_told: dict[tuple[str, str], str] = {}
        self._last_cycle = 0.0
        self._idle = False  # the last cycle decided nothing (``Changes``: calm changes are batched)
        self._ended = -math.inf  # time.monotonic() when the last cycle ended
        self._retry_at = 0.0
        self._full_at = time.time() + FULL_CYCLE_SECONDS  # the first cycle builds the view anyway
        self._untrimmed = False  # cycles ran since malloc's free pages were last handed back
        self._trimmed_at = -math.inf  # time.monotonic() of that

    def backoff(self) -> float:
        """Seconds to wait before the next cycle after ``self.failures`` failures in a row."""
        if not self.failures:
            return 0.0
        return float(min(FAILURE_BACKOFF * 2 ** min(self.failures - 1, 16), FAILURE_BACKOFF_MAX))

    async def run(self) -> None:
        deadline: float | None = None
        while True:
            backing_off = self._retry_at - time.time()
            if backing_off > 0:  # changes wait too: they are what may keep the cycle failing
                await asyncio.sleep(min(self.flush_every, backing_off))
                self._flush()
                continue
            wait = self.flush_every if deadline is None else max(0.0, min(self.flush_every, deadline - time.time()))
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that comes as
            # the wait ends (python/cpython#86296), and with the cache changing under a burst of binds
            # a stop's cancel landed there, so the loop ran on and the stop never ended.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self.cache.changed.wait()
            due = deadline is not None and time.time() >= deadline
            if self.cache.changed.is_set() and not due and self._idle and not self.cache.changed.urgent.is_set():
                # The last cycle decided nothing and only pods with a node changed since: what they
                # bring (room for a parked job, mostly) is taken in one batch, in a cycle no sooner
                # than CALM_BATCH after the last one ended, nor later than the deadline, and at once
                # when something urgent comes meanwhile.
                hold = self._ended + CALM_BATCH - time.monotonic()
                if deadline is not None:
                    hold = min(hold, deadline - time.time())
                if hold > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(hold):
                            await self.cache.changed.urgent.wait()
            if self.cache.changed.is_set() or due:
                self.cache.changed.clear()
                # Let a burst of watch events (a gang's pods) land; under a flood, leave the event
                # loop at least as long as the last cycle took, so watching keeps up with scheduling.
                await asyncio.sleep(max(self.debounce, self._last_cycle))
                self.cache.changed.clear()
                started = time.perf_counter()
                try:
                    deadline = await self.cycle()
                    self.failures = 0
                except Exception:  # one bad cycle must not stop the scheduler
                    if self.metrics is not None:
                        # No pod's attempt ended: the cycle's pods are tried again in the next one.
                        self.metrics.cycle_duration.labels("error").observe(time.perf_counter() - started)
                    delay = self.cycle_failed()
                    log.exception("scheduling cycle failed", failures=self.failures, retry_in=delay)
                    self._retry_at = deadline = time.time() + delay
                took = time.perf_counter() - started
                # One line a cycle at debug level: what benchmarks read cycle times from (p99).
                # ``core_cpu``: the CPU the core's thread spent (``time.thread_time``); what the cycle's
                # wall time has above it is the snapshot, the decisions' dispatch and the GIL shared
                # with the watches and the writes.
                log.debug("cycle", seconds=round(took, 6), core_cpu=round(self._core_cpu, 6), cycle=self.cycles,
                          **self._told)
                self._last_cycle = min(took, 0.5)
                self._ended = time.monotonic()
                self._untrimmed = True
            elif self._untrimmed and time.monotonic() - self._trimmed_at >= TRIM_SECONDS:
                self.trim()  # idle: nothing changed for a flush period
            self._flush()

    def _flush(self) -> None:
        """Starts the reports' writes that are due. A report that fails costs itself (the writer
        drops a status it cannot compare); whatever else goes wrong here is logged, and the loop
        schedules on."""
        try:
            self.writer.flush(self._pending_info, self._status_now)
        except Exception:
            log.exception("writing the reports failed")

    def trim(self) -> None:
        """Hands malloc's free pages back to the system (``memory``): what the cycles and the pods
        deleted meanwhile freed would otherwise stay in the RSS. The log line says how much."""
        before = memory.rss()
        started = time.perf_counter()
        trimmed = memory.trim_memory()
        self._untrimmed = False
        self._trimmed_at = time.monotonic()
        after = memory.rss()
        if before is not None and after is not None:
            log.debug("memory trimmed", trimmed=trimmed, rss_mib=round(after / 2**20, 1),
                      released_mib=round((before - after) / 2**20, 1),
                      ms=round((time.perf_counter() - started) * 1000, 1))

    def cycle_failed(self) -> float:
        """Counts a failed cycle and returns how long to wait before the next one. The core's
        standing view may be what broke: it is dropped, so the next cycle rebuilds it from the
        cache and a bad state cannot fail every cycle after it the same way."""
        self.failures += 1
        self.state.view = None
        self.cache.statuses_changed = True  # the failed cycle wrote no status: look again next time
        return self.backoff()

    async def cycle(self) -> float | None:
        self._told = {}
        self._core_cpu = 0.0
        if time.time() >= self._full_at:
            self.state.view = None
            self._full_at = time.time() + FULL_CYCLE_SECONDS
        started = time.perf_counter()  # each pod's attempt starts here, as kube-scheduler's starts at its pop
        snap = self.cache.snapshot(self.names)
        # Taken with the snapshot, not after the core ran: a topology object or node that arrives while
        # the core runs is not in this snapshot's trees, and must leave the flag set for the next cycle.
        statuses_due, self.cache.statuses_changed = self.cache.statuses_changed, False
        snap.preemption = self.preemption
        snap.pods_per_cycle = self.pods_per_cycle
        snap.gang_search_seconds = self.gang_search_seconds
        snap.default_min_runtime = self.default_min_runtime
        snap.default_preemption_delay = self.default_preemption_delay
        snap.stale_grace = self.stale_grace
        snap.admitted_stale_grace = self.admitted_stale_grace
        # Before the core runs, so that bad objects are reported even if the core then fails.
        self._report_invalid()
        result, core_cpu = await asyncio.to_thread(_schedule_timed, snap, self.state, time.time())
        self.cycles += 1
        self._idle = not result.decisions and not result.deferred
        self._core_cpu = core_cpu
        self._told = {"deferred": result.deferred,
                      "unschedulable": sum(1 for d in result.decisions if isinstance(d, SetPodScheduledFalse)),
                      "nominated": sum(1 for d in result.decisions if isinstance(d, Nominate) and d.node)}
        for job, trace in result.job_errors.items():  # the core isolated them; the traceback is for us
            log.error("job skipped: its evaluation raised", job=job, traceback=trace)
        pods = self.cache.pods

        def uid(key: str) -> str:  # looked up per decision: a map of every pod would cost the cluster
            found = pods.get(key)
            return found.uid if found is not None else ""

        if self.metrics is not None:
            self._count(snap, result, time.perf_counter() - started)
        self._log_jobs(result)
        # The pods are assumed on their nodes before the binds go out, and the binds run in the
        # background: the next cycle sees the room as taken and need not wait for the API server.
        # A pod's Scheduled Event is written once its bind is, as kube-scheduler's is: never for a
        # bind the API server refused.
        # (The core decides each Scheduled Event together with its Bind.)
        scheduled = {d.obj: d for d in result.decisions if _is_scheduled(d)}
        # Binds first, then victims, then nominations, then the rest; in the core's order within each.
        for d in sorted(result.decisions, key=_phase):
            self._apply(d, uid, started, scheduled)
        if result.preempted:
            log.info("preempting", victims=sorted(v.pod for v in result.preempted),
                     preemptors=sorted({v.preemptor for v in result.preempted}))
        if result.evicted:
            log.info("evicting stale gangs", pods=sorted(e.pod for e in result.evicted),
                     gangs=sorted({e.gang for e in result.evicted}))
        if statuses_due:
            self._object_statuses(snap)
        return min(self._full_at, result.next_deadline or self._full_at)

    def _apply(self, d: Decision, uid: Callable[[str], str], started: float, scheduled: dict[str, Event]) -> None:
        """Carries out one decision; every kind of decision has its case (``assert_never``)."""
        match d:
            case Bind():
                # Reserve now (the pod and its pre-bind writes assumed in the cache), the rest in the
                # background.
                self.binder.reserve(d)
                self.writer.spawn_owed(self._bind(d, uid(d.pod), started, scheduled.get(d.pod)))
            case Preempt():
                # Victims and nominations are assumed like binds: the next cycle must already see the
                # victims terminating and the room reserved, or it would choose victims again.
                self.cache.assume_preempted(d.pod)
                self.writer.spawn(self._preempt(d, uid(d.pod)))
            case Nominate():
                if self.cache.nominated_node(d.pod) in (None, d.node):
                    return  # gone, or it says so already (or will, once a write in flight lands)
                self.cache.assume_nominated(d.pod, d.node)
                self.writer.spawn(self._nominate(d, uid(d.pod)))
            case SetPodScheduledFalse():
                self.writer.unschedulable(d.pod, d.message, d.reason)
            case GangStatusUpdate():
                self.writer.gang_status(d.object_key, d.status.wire(), d.status.kind)
            case Evict():
                # Assumed terminating like a victim, so that the next cycle neither counts it nor
                # evicts it again.
                self.cache.assume_preempted(d.pod)
                self.writer.spawn(self._evict(d, uid(d.pod)))
            case Annotate():
                self.writer.spawn(self.writer.annotate(d.pod, d.key, d.value))
            case ObjectAnnotate():
                self.writer.spawn(self.writer.annotate_object(d.kind, d.key, d.annotation, d.value))
            case Deallocate():
                # Shown deallocated now (the next cycle allocates it again), written in the background.
                giving_up = Deallocation(self.cache, self.writer, d)
                if giving_up.assume():
                    self.writer.spawn(giving_up.write())
            case DeleteClaim():
                self.writer.spawn(self._delete_claim(d))
            case Event():
                if d.reason != EventReason.FAILED_SCHEDULING and not _is_scheduled(d):
                    # FailedScheduling goes with its condition; Scheduled with its bind.
                    self.writer.spawn_owed(self.writer.event(d.kind, d.obj, uid(d.obj), d.type, d.reason, d.message))
            case _:
                assert_never(d)

    async def _delete_claim(self, d: DeleteClaim) -> None:
        """A leftover claim of extended resources: its finalizer dropped, then deleted (a failure is
        logged; the next cycle that sees it asks again)."""
        try:
            with contextlib.suppress(Gone):
                await self.writer.patch_claim(d.claim, claimwrites.drop_finalizer(d.uid), "finalizer")
            await self.writer.delete_claim(d.claim, d.uid)
        except Exception as exc:
            log.error("cannot delete a leftover ResourceClaim", claim=d.claim, error=f"{type(exc).__name__}: {exc}")

    def _count(self, snap: Snapshot, result: CycleResult, seconds: float) -> None:
        m = self.metrics
        assert m is not None
        profile = self._profile

        # Each pod tried and left pending ends its attempt with the cycle; a bound pod's attempt
        # ends when its bind is written (``_bind``), as kube-scheduler's includes the binding.
        outcomes: dict[tuple[str, str], int] = {}
        for pod, message in result.waiting.items():
            key = ("error" if message.startswith(JOB_ERROR_PREFIX) else "unschedulable", profile(pod))
            outcomes[key] = outcomes.get(key, 0) + 1
        for (outcome, name), count in outcomes.items():
            m.attempts.labels(outcome, name).inc(count)
            child = m.attempt_duration.labels(outcome, name)
            for _ in range(count):
                child.observe(seconds)
        m.cycle_duration.labels("scheduled" if result.binds else "unschedulable").observe(seconds)
        m.cycles.inc()
        for queue, count in result.queues.items():
            m.pending.labels(queue).set(count)
        # Gated pods are never tried (the core does not claim them): counted here, as kube-scheduler
        # counts its gated queue.
        m.pending.labels("gated").set(sum(1 for name in self.cache.gated.values() if name in self.names))
        m.preemption_attempts.inc(result.preemption_attempts)
        victims: dict[str, int] = {}
        for victim in result.preempted:
            victims[victim.preemptor] = victims.get(victim.preemptor, 0) + 1
        for count in victims.values():
            m.victims.observe(count)
        m.gang_bound.inc(len(result.gangs_placed))
        m.gang_timed_out.inc(len(result.gangs_timed_out))
        m.stale_gangs.set(len(self.state.stale_since))
        # (stale_gang_evictions is counted as each eviction is written: one that fails is decided
        # again by a later cycle, and would be counted twice here.)
        m.gang_waiting.set(self._gangs_waiting(result))
        for source, count in self.cache.topology_objects().items():
            m.topology_objects.labels(source).set(count)

    def _log_jobs(self, result: CycleResult) -> None:
        """One line per placed job, with its pods and nodes: what an operator greps for."""
        view = self.state.view
        jobs: dict[str, list[Bind]] = {}
        for bind in result.binds:
            job = (view.member_of.get(bind.pod) if view is not None else None) or bind.pod
            jobs.setdefault(job, []).append(bind)
        for job, binds in jobs.items():
            nodes = sorted({b.node for b in binds}, key=natural_key)
            context: dict[str, object] = {"node": nodes[0]} if len(nodes) == 1 else {"nodes": nodes}
            if len(binds) == 1:
                context["pod"] = binds[0].pod
            log.info("binding", job=job, pods=len(binds), **context)

    def _gangs_waiting(self, result: CycleResult) -> int:
        """How many gangs have a member left pending after the cycle: those tried now, and those of
        the parked jobs' pods (``result.kept``), whose gangs are read once per parked job, when its
        messages are first seen (a job parked again is a new dict): 6,000 parked pods read pod by pod
        in every cycle were a good part of its own time."""
        view = self.state.view
        if view is None:
            return 0
        member_of = view.member_of
        gangs = {g for g in map(member_of.get, result.waiting) if g}
        seen: dict[int, tuple[dict[str, str], frozenset[str]]] = {}
        for messages in result.kept:
            found = self._kept_gangs.get(id(messages))
            if found is None or found[0] is not messages:
                found = (messages, frozenset(g for g in map(member_of.get, messages) if g))
            seen[id(messages)] = found
            gangs |= found[1]
        self._kept_gangs = seen  # only what is still parked: the dicts held keep their ids unique
        return len(gangs)

    def _profile(self, key: str) -> str:
        """The profile (schedulerName) a pod's metrics are labelled with; "" for a pod gone."""
        found = self.cache.pods.get(key)
        return found.scheduler_name if found is not None else ""

    async def _bind(self, d: Bind, uid: str, started: float | None = None, event: Event | None = None) -> None:
        """The pod's binding cycle (``binding.Binder``): pre-bind writes, the bind, then ``event`` (its
        Scheduled Event) once the bind is written. ``started``: when the cycle that chose it began."""
        await self.binder.run(d, uid, started, event)

    async def _preempt(self, d: Preempt, uid: str) -> None:
        if await self.writer.preempt(d.pod, uid, d.message):
            # What kube-scheduler tells a victim's owner, besides the condition.
            self.writer.spawn_owed(self.writer.event("Pod", d.pod, uid, "Normal", "Preempted", d.message))
        else:
            self.cache.forget_preempted(d.pod)

    async def _evict(self, d: Evict, uid: str) -> None:
        if await self.writer.preempt(d.pod, uid, d.message, d.reason):
            if self.metrics is not None:
                self.metrics.stale_gang_evictions.inc()
            self.writer.spawn_owed(self.writer.event("Pod", d.pod, uid, "Warning", d.reason, d.message))
        else:
            self.cache.forget_preempted(d.pod)

    async def _nominate(self, d: Nominate, uid: str) -> None:
        written = await self.writer.nominate(d.pod, uid, d.node, moot=lambda: self._bound(d.pod))
        if not written or self._bound(d.pod):
            # Failed, or not needed (maybe not made): the cache must not go on showing a nomination
            # the API server may never hold, should a bind under way fail (the core nominates again).
            self.cache.forget_nominated(d.pod)

    def _bound(self, pod_key: str) -> bool:
        """Whether the pod is bound or its bind is under way: a nomination of it would change nothing
        (the API server refuses one on a bound pod)."""
        pod = self.cache.pods.get(pod_key)
        return bool(pod is not None and pod.node_name) or pod_key in self.cache.assumed

    def _status_now(self, kind: str, key: str) -> Mapping[str, object] | None:
        """The status of a gang's object as the cache holds it, in the fields the core writes, as its
        dialect reads it (``Statuses.said``; the registry says which store holds the objects of
        ``kind``, a ``Kind.id``)."""
        found_kind = by_id(kind)
        found = self.cache.stores[found_kind.store].get(key)
        return None if found is None else status_said(found_kind, found)

    def _pending_info(self, pod_key: str) -> dict[str, str] | None:
        pod = self.cache.pods.get(pod_key)
        if pod is not None:
            return None if self._bound(pod_key) else {"uid": pod.uid, "message": pod.unschedulable_message}
        invalid = self.cache.invalid.get(("Pod", pod_key))
        if invalid is None:
            return None
        raw = invalid[1]
        conds = (raw.get("status") or {}).get("conditions") or []
        msg = next((c.get("message", "") for c in conds if c.get("type") == "PodScheduled"), "")
        return {"uid": str((raw.get("metadata") or {}).get("uid") or ""), "message": msg}

    def _report_invalid(self) -> None:
        """Bad objects get an Event (once per object and distinct error); claimed pods also a
        condition. Objects no longer invalid, deleted ones included, are forgotten."""
        reported: dict[str, str] = {}
        for bad in self.cache.invalid_objects(self.names):
            if bad.claimed:
                self.writer.unschedulable(bad.key, f"invalid pod: {bad.error}")
            ident = bad.uid or f"{bad.kind} {bad.key}"
            reported[ident] = bad.error
            if self._reported.get(ident) == bad.error:
                continue
            log.warning("invalid object", kind=bad.kind, object=bad.key, uid=bad.uid, error=cap(bad.error, 1024))
            self.writer.spawn(self.writer.event(bad.kind, bad.key, bad.uid, "Warning",
                                                invalid_reason(bad.kind, bad.error), bad.error))
        self._reported = reported

    def _object_statuses(self, snap: Snapshot) -> None:
        """The status of every topology object, as its dialect computes it from the core's trees,
        written only where it differs from what the object says (the condition's transition time
        kept while its status holds); one Warning Event per object and distinct problem."""
        view = self.state.view
        cluster = view.cluster if view is not None and view.cluster is not None else Cluster(snap)
        told: dict[tuple[str, str], str] = {}
        for decided in object_statuses(cluster.trees):
            raw = self.cache.status_raw.get(decided.kind.store, {}).get(decided.name)
            if raw is None:
                continue
            want = {**decided.condition, "message": cap(decided.condition["message"], CONDITION_LIMIT)}
            at = (decided.kind.store, decided.name)
            if decided.problems:
                told[at] = want["message"]
                if self._problems_told.get(at) != want["message"]:
                    uid = str((raw.get("metadata") or {}).get("uid") or "")
                    self.writer.spawn(self.writer.event(decided.kind.label, decided.name, uid, "Warning",
                                                        decided.warning, want["message"]))
            current = raw.get("status") if isinstance(raw.get("status"), dict) else {}
            conds = [c for c in (current or {}).get("conditions") or [] if isinstance(c, dict)]
            old = next((c for c in conds if c.get("type") == want["type"]), None)
            same = old is not None and all(old.get(k) == v for k, v in want.items())
            if same and all((current or {}).get(k) == v for k, v in decided.fields.items()):
                continue
            since = old.get("lastTransitionTime") if old is not None and old.get("status") == want["status"] else None
            cond = {**want, "lastTransitionTime": since or now_rfc3339()}
            self.writer.spawn(self.writer.object_status(decided.kind, decided.name,
                                                        {**decided.fields, "conditions": [cond]}, decided.write))
        self._problems_told = told
