"""Writes the core's decisions to the API server, with retries and backoff.

Binds go out at once, in parallel. Unschedulable conditions and their FailedScheduling
events are coalesced: a pod's message is written only if the pod is still pending a moment
later (a gang that is still being created settles first), and then at most once per
cooldown, so a busy queue does not flood the API server with status writes. Messages are
capped (a condition at CONDITION_LIMIT, an event at EVENT_LIMIT bytes) with a visible marker:
they quote user input, and a pod may carry a gang name of 100 KB.

Events have their own, larger share of connections (EVENT_CONCURRENCY): a gang of thousands of pods
is thousands of ``Scheduled`` Events, which must follow their binds within a second or two, not
queue behind conditions and statuses. They and the binds decided are the writes a stop finishes
(``drain``): an Event says what was done (a bind, a preemption), and no later leader would write it.

Preemption's writes (a victim's DisruptionTarget condition and its deletion, a pending pod's
nominatedNodeName) are one-off, never coalesced, and have connections of their own: a flood of
binds or reports must not hold up the room a higher-priority job waits for. Each names the pod's
UID, so a pod recreated under the same name is never evicted or nominated in its place.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import structlog
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.objects import PREEMPTION_REASON
from koordpy.controller.events import EventRecorder, Involved, Outcome, Outgoing, Patched, Report
from koordpy.controller.metrics import Metrics

log = structlog.get_logger("koordpy.writer")
T = TypeVar("T")
MERGE_PATCH = "application/merge-patch+json"
COMPONENT = "koordpy"
CONDITION_LIMIT = 4096
EVENT_LIMIT = 1024  # what the API server keeps of an event's note
STATUS_INTERVAL = 1.0  # seconds between two status writes of one PodGroup in the same phase
# Event writes in flight at once. A create takes a few milliseconds on an idle API server and tens
# under a burst of binds: on the local control plane (benchmarks/bench_events.py, 2,000-pod gang)
# 8 left the Events 8.7 s behind their binds (p50), 32 left them 3.4 s, 64 0.9 s (p99 1.3 s).
EVENT_CONCURRENCY = 64
# A stop flushes the Events owed for at most FLUSH_LIMIT seconds, and gives up sooner once none has
# been written for FLUSH_STALL seconds (the API server unreachable: nothing would get through).
FLUSH_LIMIT = 10.0
FLUSH_STALL = 1.0


def cap(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, saying how much was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f" ... [truncated {len(data)} bytes to {limit}]"
    head = data[:limit - len(marker.encode())].decode(errors="ignore")
    return head + marker


class Gone(Exception):
    """The object no longer exists (404): nothing to retry."""


class Conflict(Exception):
    """The API server refused the write as conflicting (409)."""


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_rfc3339() -> str:
    return rfc3339(time.time())


class NotLeader(Exception):
    """This replica may not write: it does not hold the leader Lease (or no longer does)."""


async def with_retries(what: str, op: Callable[[], Awaitable[T]], attempts: int = 6,
                       fence: Callable[[], bool] | None = None,
                       retried: Callable[[str], None] | None = None) -> T:
    """Retries 429, 5xx and connection errors with jittered exponential backoff. ``fence()`` is
    asked before every attempt, a retry included: a replica that lost its lease while backing
    off must not send the write afterwards. ``retried(reason)`` counts the retries."""
    delay = 0.2
    for attempt in range(1, attempts + 1):
        if fence is not None and not fence():
            raise NotLeader(what)
        try:
            return await op()
        except ApiException as exc:
            if exc.status == 404:
                raise Gone(what) from exc
            if exc.status == 409:
                raise Conflict(f"{what}: {exc.reason}") from exc
            if exc.status not in (429, 500, 502, 503, 504) or attempt == attempts:
                raise
            log.warning("api write failed, retrying", what=what, status=exc.status, attempt=attempt)
            if retried is not None:
                retried(str(exc.status))
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            if attempt == attempts:
                raise
            log.warning("api unreachable, retrying", what=what, error=str(exc), attempt=attempt)
            if retried is not None:
                retried("unreachable")
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")


@dataclass
class _Pending:
    message: str
    first_seen: float


async def raise_for_status(result: T) -> T:
    """``result`` once it is known to be a success. With ``_preload_content=False`` the client hands
    back the raw response without looking at its status, so a refused write (404, 409, 422, 5xx)
    would pass for a written one and never be retried: here it raises ApiException as a preloaded
    call does. Reading the body also frees the connection for the next write."""
    if isinstance(result, aiohttp.ClientResponse):
        body = await result.read()
        if not 200 <= result.status <= 299:
            exc = ApiException(status=result.status, reason=result.reason)
            exc.body = body
            raise exc
    return result


def _uid_mismatch(exc: ApiException) -> bool:
    """A patch naming the pod's UID was refused because the pod under that name is another one."""
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    return exc.status == 422 and "metadata.uid" in body


def _says_already(current: dict[str, object], status: dict[str, object]) -> bool:
    """Whether a PodGroup whose status is ``current`` needs no write of ``status`` (times are written,
    and so read back, in whole seconds)."""
    for field, value in status.items():
        if value is None:
            continue
        have = current.get(field)
        if field == "scheduleStartTime" and isinstance(value, int | float) and isinstance(have, int | float):
            if int(value) != int(have):
                return False
        elif have != value:
            return False
    return True


PODGROUP_VERSIONS = {"scheduling.sigs.k8s.io": "v1alpha1", "scheduling.volcano.sh": "v1beta1"}


class ApiWriter:
    def __init__(self, api: ApiClient, concurrency: int = 64, report_concurrency: int = 8,
                 settle: float = 1.0, cooldown: float = 5.0, metrics: Metrics | None = None,
                 fence: Callable[[], bool] | None = None, event_concurrency: int = EVENT_CONCURRENCY) -> None:
        self.metrics = metrics
        # Asked before every write: false once this replica is not (or no longer) the leader.
        self.fence = fence
        self.core = CoreV1Api(api)
        self.custom = CustomObjectsApi(api)
        self.sem = asyncio.Semaphore(concurrency)  # binds
        # Reports (conditions, events, statuses) have their own, smaller share of connections
        # so that a queue of unschedulable pods never delays a bind.
        self.report_sem = asyncio.Semaphore(report_concurrency)
        self.preempt_sem = asyncio.Semaphore(report_concurrency)  # victims and nominations
        self.event_sem = asyncio.Semaphore(event_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()  # every write in the background
        # Those a stop finishes (``drain``): binds decided, whose Events follow them, and Events.
        self._owed: set[asyncio.Task[None]] = set()
        self._owed_written_at = time.monotonic()  # when one of them last got a write through
        self.settle = settle
        self.cooldown = cooldown
        self.instance = f"{COMPONENT}-{socket.gethostname()}-{os.getpid()}"
        self._conditions: dict[str, _Pending] = {}
        self._last_written: dict[str, float] = {}
        self._pruned = time.monotonic()
        self._statuses: dict[str, dict[str, object]] = {}
        # What was last sent, with what the cache showed then: while the cache still shows that,
        # the write is in flight and the same one is not sent again; once the cache shows anything
        # else (another writer's message, say), the cache is what counts. A failed write forgets it.
        self._sent: dict[str, tuple[str, str]] = {}  # pod -> (condition message, the pod's before)
        # PodGroup -> (when, the status, the cache's before): also what paces a group's writes.
        self._status_sent: dict[str, tuple[float, dict[str, object], dict[str, object] | None]] = {}
        self.skipped: dict[tuple[str, str], int] = {}  # (kind, reason) -> writes not made
        self.events = EventRecorder()

    async def _call(self, kind: str, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """One write, retried, fenced and counted by ``kind`` (bind, status, event...)."""
        retried = self.metrics.api_retries.labels if self.metrics is not None else None

        async def checked() -> T:
            return await raise_for_status(await op())

        try:
            result = await with_retries(what, checked, fence=self.fence,
                                        retried=(lambda reason: retried(reason).inc()) if retried else None)
        except NotLeader:
            if self.metrics is not None:
                self.metrics.api_writes.labels(kind, "fenced").inc()
            raise
        except BaseException:
            if self.metrics is not None:
                self.metrics.api_writes.labels(kind, "failed").inc()
            raise
        if self.metrics is not None:
            self.metrics.api_writes.labels(kind, "ok").inc()
        return result

    # -- binds ---------------------------------------------------------------------------

    async def bind(self, pod_key: str, uid: str, node: str) -> bool:
        """True when the pod is bound to ``node`` (or already was); False when it is gone."""
        ns, name = pod_key.split("/", 1)
        meta: dict[str, Any] = {"name": name, "namespace": ns}
        if uid:
            meta["uid"] = uid  # never bind a pod recreated under the same name
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": meta,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        async with self.sem:
            started = time.perf_counter()
            try:
                await self._call("bind", f"bind {pod_key}", lambda: self.core.create_namespaced_pod_binding(
                    name, ns, body, _preload_content=False))
            except Gone:
                return False
            except Conflict as exc:
                log.warning("bind conflict: the pod is already bound", pod=pod_key, node=node, error=str(exc))
                return False
            except NotLeader:
                return False
            if self.metrics is not None:
                self.metrics.bind_duration.observe(time.perf_counter() - started)
        self._owed_written_at = time.monotonic()
        self._conditions.pop(pod_key, None)
        return True

    # -- PreBind: volumes ---------------------------------------------------------------------

    async def claim_volume(self, pv: str, claim_ns: str, claim: str, claim_uid: str,
                           resource_version: str = "") -> None:
        """A static bind's first half, as kube-scheduler's VolumeBinding writes it: the PersistentVolume's
        claimRef names the claim (and it says the controller bound it); the PV controller in
        kube-controller-manager completes the bind. Conditional on ``resource_version`` (the PV as the
        cache saw it), so a PV bound to another claim meanwhile is a Conflict, never taken over.
        Raises when the write fails."""
        ref: dict[str, Any] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": claim_ns,
                               "name": claim}
        if claim_uid:
            ref["uid"] = claim_uid
        meta: dict[str, Any] = {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        body = {"metadata": meta, "spec": {"claimRef": ref}}
        async with self.sem:
            await self._call("volume", f"claimRef of PersistentVolume {pv}", lambda: self.core.patch_persistent_volume(
                pv, body, _content_type=MERGE_PATCH, _preload_content=False))

    async def select_node(self, claim_key: str, node: str) -> None:
        """Dynamic provisioning's trigger: the claim's ``volume.kubernetes.io/selected-node``, which
        its provisioner reads to create a volume there. Raises when the write fails."""
        ns, name = claim_key.split("/", 1)
        body = {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": node}}}
        async with self.sem:
            await self._call("volume", f"selected-node of PersistentVolumeClaim {claim_key}",
                             lambda: self.core.patch_namespaced_persistent_volume_claim(
                                 name, ns, body, _content_type=MERGE_PATCH, _preload_content=False))

    # -- preemption -----------------------------------------------------------------------

    async def preempt(self, pod_key: str, uid: str, message: str) -> bool:
        """Marks the victim ``DisruptionTarget=True`` and then deletes it with its own grace period.
        True when it is being deleted or already gone; False when a write failed, so the caller
        can undo what it assumed."""
        ns, name = pod_key.split("/", 1)
        # The condition goes first: whoever sees the pod terminating can tell why, and a scheduler
        # restarted between the two writes sees a victim it already chose, not a running pod.
        body: dict[str, Any] = {"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": PREEMPTION_REASON,
            "message": cap(message, CONDITION_LIMIT), "lastTransitionTime": now_rfc3339()}]}}
        if uid:
            body["metadata"] = {"uid": uid}  # refused (422) if the name now belongs to another pod
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            options["preconditions"] = {"uid": uid}
        async with self.preempt_sem:
            try:
                await self._call("pod-status", f"DisruptionTarget of pod {pod_key}",
                                 lambda: self.core.patch_namespaced_pod_status(name, ns, body, _preload_content=False))
                await self._call("delete", f"delete pod {pod_key}", lambda: self.core.delete_namespaced_pod(
                    name, ns, body=options, _preload_content=False))
            except (Gone, Conflict) as exc:  # deleted already, or replaced by a pod of another UID
                log.info("victim already gone", pod=pod_key, detail=str(exc))
            except ApiException as exc:
                if not _uid_mismatch(exc):
                    log.error("cannot preempt", pod=pod_key, status=exc.status, error=str(exc.reason))
                    return False
                log.info("victim already gone: the name belongs to another pod", pod=pod_key)
            except Exception as exc:
                log.error("cannot preempt", pod=pod_key, error=str(exc))
                return False
        return True

    async def nominate(self, pod_key: str, uid: str, node: str) -> bool:
        """Sets the pending pod's ``status.nominatedNodeName`` (clears it when ``node`` is "").
        True when written, or when the pod is gone (nothing is left to nominate); False when the
        write failed."""
        ns, name = pod_key.split("/", 1)
        body: dict[str, Any] = {"status": {"nominatedNodeName": node or None}}  # null removes it
        if uid:
            body["metadata"] = {"uid": uid}
        async with self.preempt_sem:
            try:
                await self._call("pod-status", f"nominatedNodeName of pod {pod_key}",
                                 lambda: self.core.patch_namespaced_pod_status(
                                     name, ns, body, _content_type=MERGE_PATCH, _preload_content=False))
            except Gone:
                return True
            except ApiException as exc:
                if _uid_mismatch(exc):
                    return True
                log.error("cannot nominate", pod=pod_key, node=node, status=exc.status, error=str(exc.reason))
                return False
            except Exception as exc:
                log.error("cannot nominate", pod=pod_key, node=node, error=str(exc))
                return False
        return True

    # -- coalesced conditions, events and statuses -----------------------------------------

    def unschedulable(self, pod_key: str, message: str) -> None:
        # Capped here, so that it compares equal to what an earlier write left on the pod.
        message = cap(message, CONDITION_LIMIT)
        pending = self._conditions.get(pod_key)
        if pending is None:
            self._conditions[pod_key] = _Pending(message, time.monotonic())
        else:
            pending.message = message

    def bound(self, pod_key: str) -> None:
        self._conditions.pop(pod_key, None)
        self._sent.pop(pod_key, None)

    def podgroup_status(self, key: str, status: dict[str, object], group: str = "scheduling.sigs.k8s.io") -> None:
        """The status a PodGroup should have. Coalesced: the latest one is written, at most once per
        STATUS_INTERVAL while its pods keep changing (a 20-pod gang goes 0, 1 ... 20 running in a
        few seconds), at once when the phase changes, and not at all when the object says it already."""
        self._statuses[f"{group} {key}"] = status

    def skip(self, kind: str, reason: str, count: int = 1) -> None:
        """Counts writes not made (``reason``: unchanged, coalesced...)."""
        self.skipped[(kind, reason)] = self.skipped.get((kind, reason), 0) + count
        if self.metrics is not None:
            self.metrics.api_writes_skipped.labels(kind, reason).inc(count)

    def flush(self, still_pending: Callable[[str], dict[str, str] | None],
              podgroup_now: Callable[[str, str], dict[str, object] | None] = lambda group, key: None) -> None:
        """Starts writing what has settled, in the background. ``still_pending(pod)`` gives the
        pod's uid and current condition message while it waits, or None when it is bound or gone;
        ``podgroup_now(group, key)`` the PodGroup's status as the cache holds it (None: unknown)."""
        now = time.monotonic()
        due = []
        for pod, pending in list(self._conditions.items()):
            info = still_pending(pod)
            if info is None:
                del self._conditions[pod]
                self._sent.pop(pod, None)
                continue
            if info["message"] == pending.message or self._sent.get(pod) == (pending.message, info["message"]):
                # On the pod already, or sent and not yet back on the watch: under a backlog of
                # reports a write can take longer than the cooldown to land, and the same message
                # went out again and again.
                del self._conditions[pod]
                self.skip("pod-status", "unchanged")
                continue
            if now - pending.first_seen < self.settle or now - self._last_written.get(pod, -1e9) < self.cooldown:
                continue
            del self._conditions[pod]
            self._last_written[pod] = now
            self._sent[pod] = (pending.message, info["message"])
            due.append(self._write_condition(pod, info["uid"], pending.message))
        if now - self._pruned >= self.cooldown:  # what is past its cooldown need not be remembered
            self._pruned = now
            self._last_written = {k: t for k, t in self._last_written.items() if now - t < self.cooldown}
        for k, st in list(self._statuses.items()):
            group, key = k.split(" ", 1)
            current = podgroup_now(group, key)
            if current is not None and _says_already(current, st):
                del self._statuses[k]  # the object says so already (a write in flight landed, say)
                self.skip("podgroup-status", "unchanged")
                continue
            last = self._status_sent.get(k)
            if last is not None and last[1:] == (st, current):
                del self._statuses[k]  # sent already, not yet back on the watch
                self.skip("podgroup-status", "unchanged")
                continue
            if last is not None and now - last[0] < STATUS_INTERVAL and last[1].get("phase") == st.get("phase"):
                continue  # written a moment ago in the same phase: the latest is written when due
            del self._statuses[k]
            self._status_sent[k] = (now, st, current)
            due.append(self._write_podgroup_status(group, key, st))
        if len(self._status_sent) > 10_000:  # groups long gone; the cache's answer is what counts
            self._status_sent = {k: v for k, v in self._status_sent.items() if now - v[0] < STATUS_INTERVAL}
        for coro in due:
            self.spawn(coro)

    async def drain(self, grace: float, flush: float = FLUSH_LIMIT, stall: float = FLUSH_STALL) -> None:
        """On a stop: waits up to ``grace`` seconds for every write in flight, then drops all but
        the owed ones (binds decided, and Events: see ``spawn_owed``), which are written on for up
        to ``flush`` seconds from the start (less once none has got through for ``stall``
        seconds), and finally cancels what is left. The caller still holds the Lease meanwhile.
        Conditions and statuses are rebuilt from the API server by whoever schedules next; an
        Event about a bind is not, and a bind cut off mid-request may have landed without its
        Event."""
        started = time.monotonic()
        at_stop = len(self._owed)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for task in self._tasks - self._owed:
            task.cancel()
        owed = len(self._owed)
        while self._owed:
            now = time.monotonic()
            left = started + flush - now
            if left <= 0 or now - self._owed_written_at >= stall:
                break
            await asyncio.wait(set(self._owed), timeout=min(left, stall), return_when=asyncio.FIRST_COMPLETED)
        if at_stop:  # said whenever the stop found writes owed, even if the grace saw them all through
            log.info("owed writes flushed on stop", at_stop=at_stop, after_grace=owed, dropped=len(self._owed),
                     seconds=round(time.monotonic() - started, 3))
        self.cancel()

    def cancel(self) -> None:
        """Drops every write in flight or queued: on a stop, what was not written is rebuilt
        from the API server by whoever schedules next."""
        for task in list(self._tasks):
            task.cancel()
        self._conditions.clear()
        self._statuses.clear()
        self._sent.clear()
        self._status_sent.clear()

    def spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def spawn_owed(self, coro: Awaitable[None]) -> None:
        """Like ``spawn``, for a write a stop finishes rather than drops (``drain``): a bind decided
        (and assumed), whose Event only this replica would write, or an Event about what was done."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        self._owed.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(self._owed.discard)

    async def _report(self, what: str, call: Callable[[], Awaitable[object]], kind: str = "status") -> bool:
        """One report write; a failure is logged, never raised: a lost report must not stop
        the scheduler. True when it was written."""
        async with self.report_sem:
            try:
                await self._call(kind, what, call)
                return True
            except (Gone, NotLeader):
                return False
            except Exception as exc:
                log.error("cannot write", what=what, error=str(exc))
                return False

    async def _write_condition(self, pod_key: str, uid: str, message: str) -> None:
        ns, name = pod_key.split("/", 1)
        body = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": cap(message, CONDITION_LIMIT),
            "lastTransitionTime": now_rfc3339(), "lastProbeTime": None}]}}
        if await self._report(f"condition of pod {pod_key}", lambda: self.core.patch_namespaced_pod_status(
                name, ns, body, _preload_content=False), kind="pod-status"):
            await self.event("Pod", pod_key, uid, "Warning", "FailedScheduling", message)
        elif (self._sent.get(pod_key) or ("",))[0] == message:
            del self._sent[pod_key]

    async def _write_podgroup_status(self, group: str, key: str, status: dict[str, object]) -> None:
        ns, name = key.split("/", 1)
        version = PODGROUP_VERSIONS[group]
        body = {"status": {k: (rfc3339(v) if k == "scheduleStartTime" and isinstance(v, int | float) else v)
                           for k, v in status.items() if v is not None}}
        written = await self._report(
            f"status of PodGroup {key}", lambda: self.custom.patch_namespaced_custom_object_status(
                group, version, ns, "podgroups", name, body, _content_type=MERGE_PATCH, _preload_content=False),
            kind="podgroup-status")
        if not written and (self._status_sent.get(f"{group} {key}") or (0.0, None))[1] is status:
            del self._status_sent[f"{group} {key}"]

    async def hypernode_status(self, name: str, status: dict[str, Any]) -> None:
        await self._report(f"status of HyperNode {name}", lambda: self.custom.patch_cluster_custom_object_status(
            "topology.volcano.sh", "v1alpha1", "hypernodes", name, {"status": status},
            _content_type=MERGE_PATCH, _preload_content=False), kind="hypernode-status")

    # -- one-off writes ------------------------------------------------------------------

    async def annotate(self, pod_key: str, key: str, value: str) -> None:
        ns, name = pod_key.split("/", 1)
        body = {"metadata": {"annotations": {key: value}}}
        await self._report(f"annotation {key} of pod {pod_key}", lambda: self.core.patch_namespaced_pod(
            name, ns, body, _preload_content=False), kind="pod")

    async def event(self, kind: str, obj: str, uid: str, type_: str, reason: str, message: str) -> None:
        """Reports an Event; a repeat of one written before raises its count instead (see
        controller/events.py). A failure is logged, never raised."""
        # Events of cluster-scoped objects live in "default", as kubectl describe expects.
        ns, name = obj.split("/", 1) if "/" in obj else ("default", obj)
        api_version = {"Pod": "v1", "PodGroup": "scheduling.sigs.k8s.io/v1alpha1",
                       "PriorityClass": "scheduling.k8s.io/v1",
                       "ClusterNetworkTopology": "scheduling.koordinator.sh/v1alpha1",
                       "HyperNode": "topology.volcano.sh/v1alpha1",
                       "VolcanoPodGroup": "scheduling.volcano.sh/v1beta1",
                       "KaiPodGroup": "scheduling.run.ai/v2alpha2", "Topology": "kueue.x-k8s.io/v1beta1",
                       "Job": "batch/v1", "ReplicaSet": "apps/v1", "Deployment": "apps/v1",
                       "StatefulSet": "apps/v1", "JobSet": "jobset.x-k8s.io/v1alpha2",
                       "StorageClass": "storage.k8s.io/v1", "CSINode": "storage.k8s.io/v1"}.get(kind, "v1")
        if kind in ("VolcanoPodGroup", "KaiPodGroup"):
            kind = "PodGroup"  # the cache's name for it; the object's kind is PodGroup
        # Capped before correlation, so that a repeat compares equal to what was written.
        report = Report(ns, Involved(kind, name, ns if "/" in obj else "", uid, api_version), type_, reason,
                        cap(message, EVENT_LIMIT), COMPONENT)
        try:
            outcome = await self.events.record(report, self)
        except Exception as exc:  # like any report: a lost Event must not stop the scheduler
            log.error("cannot write", what=f"{reason} event of {kind} {obj}", error=str(exc))
            return
        if outcome is Outcome.SKIPPED:
            log.debug("event dropped: too many about the object", reason=reason, kind=kind, object=obj)
            self.skip("event", "spam")

    async def create_event(self, report: Report, out: Outgoing) -> str | None:
        involved: dict[str, Any] = {"kind": report.involved.kind, "name": report.involved.name,
                                    "apiVersion": report.involved.api_version}
        if report.involved.namespace:
            involved["namespace"] = report.involved.namespace
        if report.involved.uid:
            involved["uid"] = report.involved.uid
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{report.involved.name}.", "namespace": report.namespace},
                "involvedObject": involved, "reason": report.reason, "message": cap(out.message, EVENT_LIMIT),
                "type": report.type, "source": {"component": report.component},
                "reportingComponent": report.component, "reportingInstance": self.instance,
                "firstTimestamp": rfc3339(out.first), "lastTimestamp": rfc3339(out.last), "count": out.count}
        what = f"{report.reason} event of {report.involved.kind} {report.involved.name}"
        async with self.event_sem:
            try:
                resp = await self._call("event", what, lambda: self.core.create_namespaced_event(
                    report.namespace, body, _preload_content=False))
                created = await resp.json() if isinstance(resp, aiohttp.ClientResponse) else resp
            except (Gone, NotLeader):  # Gone: its namespace is being deleted
                return None
            except Exception as exc:
                log.error("cannot write", what=what, error=str(exc))
                return None
        self._owed_written_at = time.monotonic()
        name = ((created or {}).get("metadata") or {}).get("name") if isinstance(created, dict) else None
        return str(name) if name else None

    async def patch_event(self, report: Report, out: Outgoing, name: str) -> Patched:
        # What a repeat changes; the message too, for the combined Event shows the latest one.
        body = {"count": out.count, "lastTimestamp": rfc3339(out.last), "message": cap(out.message, EVENT_LIMIT)}
        what = f"{report.reason} event {name} of {report.involved.kind} {report.involved.name}"
        async with self.event_sem:
            try:
                await self._call("event", what, lambda: self.core.patch_namespaced_event(
                    name, report.namespace, body, _content_type=MERGE_PATCH, _preload_content=False))
            except Gone:
                return Patched.GONE
            except NotLeader:
                return Patched.FAILED
            except Exception as exc:
                log.error("cannot write", what=what, error=str(exc))
                return Patched.FAILED
        self._owed_written_at = time.monotonic()
        return Patched.OK

    async def topology_status(self, status: dict[str, Any]) -> None:
        await self._report("status of ClusterNetworkTopology default",
                           lambda: self.custom.patch_cluster_custom_object_status(
                               "scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies", "default",
                               {"status": status}, _content_type=MERGE_PATCH, _preload_content=False),
                           kind="topology-status")
