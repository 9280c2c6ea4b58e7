"""Writes the core's decisions to the API server: the bodies of the writes and their concurrency.

What to write when is ``reports`` (the pacing policy, pure); how one write gets through (retries,
the leader fence, metrics) is ``transport``. This module joins the two with the bodies.

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

PreBind's writes (a PersistentVolume's claimRef, a claim's selected node, a ResourceClaim's finalizer
and status) share the binds' connections; what they say for a claim is ``claimwrites``, when they are
made the binding cycle's (``binding``).

Preemption's writes (a victim's DisruptionTarget condition and its deletion, a pending pod's
nominatedNodeName) are one-off, never coalesced, and have connections of their own: a flood of
binds or reports must not hold up the room a higher-priority job waits for. Each names the pod's
UID, so a pod recreated under the same name is never evicted or nominated in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import aiohttp
import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import Kind, by_id, by_name
from koordpy.api.objects import PREEMPTION_REASON
from koordpy.api.raw import rfc3339
from koordpy.controller import transport
from koordpy.controller.events import EventRecorder, Involved, Outcome, Outgoing, Patched, Report
from koordpy.controller.metrics import Metrics
from koordpy.controller.reports import STATUS_INTERVAL as STATUS_INTERVAL  # re-exported: callers knew it here
from koordpy.controller.reports import Reports
from koordpy.controller.transport import Conflict as Conflict  # re-exported, as are the next: callers knew them here
from koordpy.controller.transport import Gone as Gone
from koordpy.controller.transport import NotLeader as NotLeader
from koordpy.controller.transport import raise_for_status as raise_for_status
from koordpy.controller.transport import with_retries as with_retries
from koordpy.controller.wire import Response

log = structlog.get_logger("koordpy.writer")
T = TypeVar("T")
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
RESOURCE_CLAIMS = "resourceclaims.resource.k8s.io"  # the registry's id of ResourceClaims
COMPONENT = "koordpy"
CONDITION_LIMIT = 4096
EVENT_LIMIT = 1024  # what the API server keeps of an event's note
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


def now_rfc3339() -> str:
    return rfc3339(time.time())


class ClaimRefused(Exception):
    """The API server refused a ResourceClaim's write other than as a conflict or a 404; the message
    is what it said, not the client's dump of the response."""


def _already_bound(exc: ApiException) -> bool:
    """A nomination refused because the pod is bound: written in the background, it can land after
    the pod's own bind (its victims went before the write did), and then there is nothing to nominate."""
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    return exc.status == 422 and "already bound" in body


# What a bind refused as a conflict (409) met, by the words the API server's pods/binding uses for
# it, and what the log says: only the first is "already bound".
_BIND_CONFLICTS = (
    ("is already assigned to node", "bind conflict: the pod is already bound"),
    ("is being deleted", "bind refused: the pod is being deleted"),
    ("schedulingGates", "bind refused: the pod has scheduling gates"),
    ("Precondition failed: UID", "bind refused: the pod was recreated under its name (another UID)"),
)


def bind_conflict(message: str) -> str:
    """What the log says of a bind the API server refused with 409 and ``message``."""
    return next((said for words, said in _BIND_CONFLICTS if words in message), "bind conflict")


def _uid_mismatch(exc: ApiException) -> bool:
    """A patch naming the pod's UID was refused because the pod under that name is another one."""
    body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else str(exc.body or "")
    return exc.status == 422 and "metadata.uid" in body


class ApiWriter:
    def __init__(self, api: ApiClient, concurrency: int = 64, report_concurrency: int = 8,
                 settle: float = 1.0, cooldown: float = 5.0, metrics: Metrics | None = None,
                 fence: Callable[[], bool] | None = None, event_concurrency: int = EVENT_CONCURRENCY) -> None:
        self.metrics = metrics
        # Asked before every write: false once this replica is not (or no longer) the leader.
        self.fence = fence
        # The generated clients, with the writes a bound pod costs sent directly (``transport``).
        self.core: Any = transport.DirectCore(api)
        self.custom: Any = transport.DirectCustom(api)
        self.sem = asyncio.Semaphore(concurrency)  # binds
        # Reports (conditions, events, statuses) have their own, smaller share of connections
        # so that a queue of unschedulable pods never delays a bind.
        self.report_sem = asyncio.Semaphore(report_concurrency)
        self.preempt_sem = asyncio.Semaphore(report_concurrency)  # victims
        # Nominations do not queue behind victims: a job's 1,000 victims are 2,000 writes, and a
        # nomination behind them landed after its pod was bound (62 of 100 in GangPreemptionPodGroups,
        # each refused); kube-scheduler sets the nominated node as it starts deleting the victims.
        self.nominate_sem = asyncio.Semaphore(report_concurrency)
        self.event_sem = asyncio.Semaphore(event_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()  # every write in the background
        # Those a stop finishes (``drain``): binds decided, whose Events follow them, and Events.
        self._owed: set[asyncio.Task[None]] = set()
        self._owed_written_at = time.monotonic()  # when one of them last got a write through
        self.instance = f"{COMPONENT}-{socket.gethostname()}-{os.getpid()}"
        # What to write when (conditions and PodGroup statuses, coalesced): the pure policy, on this clock.
        self.reports = Reports(settle, cooldown, time.monotonic())
        self.skipped: dict[tuple[str, str], int] = {}  # (kind, reason) -> writes not made
        self.events = EventRecorder()

    @property
    def settle(self) -> float:
        return self.reports.settle

    @settle.setter
    def settle(self, value: float) -> None:
        self.reports.settle = value

    @property
    def cooldown(self) -> float:
        return self.reports.cooldown

    @cooldown.setter
    def cooldown(self, value: float) -> None:
        self.reports.cooldown = value

    async def _call(self, kind: str, what: str, op: Callable[[], Awaitable[T]]) -> T:
        """One write, retried, fenced and counted by ``kind`` (bind, status, event...)."""
        return await transport.call(kind, what, op, fence=self.fence, metrics=self.metrics)

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
                log.warning(bind_conflict(exc.message), pod=pod_key, node=node, error=str(exc))
                return False
            except NotLeader:
                return False
            if self.metrics is not None:
                self.metrics.bind_duration.observe(time.perf_counter() - started)
        self._owed_written_at = time.monotonic()
        self.reports.bind_written(pod_key)
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

    # -- PreBind: devices ---------------------------------------------------------------------

    async def patch_claim(self, claim_key: str, body: dict[str, Any], what: str,
                          status: bool = False) -> dict[str, Any]:
        """A strategic merge patch of a ResourceClaim (``status``: of its status subresource), as
        PreBind's DynamicResources writes it (``claimwrites`` makes the bodies); returns the claim as
        written. Raises when the write fails: Conflict when a resourceVersion in the body no longer
        holds, Gone when the claim is, ClaimRefused with the API server's own words for any other
        refusal (a 403 for a missing RBAC rule, a 422): the pod's condition quotes it."""
        ns, name = claim_key.split("/", 1)
        rc = by_id(RESOURCE_CLAIMS)
        custom = self.custom
        patch = custom.patch_namespaced_custom_object_status if status else custom.patch_namespaced_custom_object
        what = f"{what} of ResourceClaim {claim_key}"
        async with self.sem:
            try:
                resp = await self._call("claim", what, lambda: patch(
                    rc.group, rc.version, ns, rc.plural, name, body, _content_type=STRATEGIC_MERGE,
                    _preload_content=False))
            except ApiException as exc:
                said = transport.status_message(exc.body) or str(exc.reason or "")
                raise ClaimRefused(f"{what}: {said} ({exc.status})") from exc
            written = await resp.json() if isinstance(resp, aiohttp.ClientResponse) else \
                resp.json() if isinstance(resp, Response) else resp
        return written if isinstance(written, dict) else {}

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Creates a ResourceClaim (the claim of a pod's DRA-backed extended resources, named by the
        API server from its generateName); returns it as created. Raises when the write fails."""
        rc = by_id(RESOURCE_CLAIMS)
        async with self.sem:
            resp = await self._call("claim", f"ResourceClaim {body['metadata'].get('generateName', '')}* in "
                                             f"{namespace}", lambda: self.custom.create_namespaced_custom_object(
                rc.group, rc.version, namespace, rc.plural, body, _preload_content=False))
            written = await resp.json() if isinstance(resp, aiohttp.ClientResponse) else \
                resp.json() if isinstance(resp, Response) else resp
        return written if isinstance(written, dict) else {}

    async def delete_claim(self, claim_key: str, uid: str) -> None:
        """Deletes a ResourceClaim we created (the uid a precondition); a claim gone already is no
        failure. Raises when the write fails."""
        ns, name = claim_key.split("/", 1)
        rc = by_id(RESOURCE_CLAIMS)
        body: dict[str, Any] = {"preconditions": {"uid": uid}} if uid else {}
        async with self.sem:
            with contextlib.suppress(Gone):  # gone already
                await self._call("claim", f"delete ResourceClaim {claim_key}",
                                 lambda: self.custom.delete_namespaced_custom_object(
                                     rc.group, rc.version, ns, rc.plural, name, body=body, _preload_content=False))

    async def extended_claim_status(self, pod_key: str, uid: str, status: dict[str, Any]) -> None:
        """The pod's ``status.extendedResourceClaimStatus`` (a merge patch of that field alone, the
        pod's uid a precondition). Raises when the write fails."""
        ns, name = pod_key.split("/", 1)
        body: dict[str, Any] = {"status": {"extendedResourceClaimStatus": status}}
        if uid:
            body["metadata"] = {"uid": uid}
        async with self.sem:
            await self._call("pod-status", f"extendedResourceClaimStatus of pod {pod_key}",
                             lambda: self.core.patch_namespaced_pod_status(
                                 name, ns, body, _content_type=MERGE_PATCH, _preload_content=False))

    # -- preemption -----------------------------------------------------------------------

    async def preempt(self, pod_key: str, uid: str, message: str, reason: str = PREEMPTION_REASON) -> bool:
        """Marks the victim ``DisruptionTarget=True`` (``reason``: preemption's, or a stale gang's
        eviction's) and then deletes it with its own grace period. True when it is being deleted or
        already gone; False when a write failed, so the caller can undo what it assumed."""
        ns, name = pod_key.split("/", 1)
        # The condition goes first: whoever sees the pod terminating can tell why, and a scheduler
        # restarted between the two writes sees a victim it already chose, not a running pod.
        body: dict[str, Any] = {"status": {"conditions": [{
            "type": "DisruptionTarget", "status": "True", "reason": reason,
            "message": cap(message, CONDITION_LIMIT), "lastTransitionTime": now_rfc3339()}]}}
        if uid:
            body["metadata"] = {"uid": uid}  # refused (422) if the name now belongs to another pod
        options: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if uid:
            options["preconditions"] = {"uid": uid}
        failed = "cannot preempt" if reason == PREEMPTION_REASON else "cannot evict"
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
                    log.error(failed, pod=pod_key, reason=reason, status=exc.status, error=str(exc.reason))
                    return False
                log.info("victim already gone: the name belongs to another pod", pod=pod_key)
            except Exception as exc:
                log.error(failed, pod=pod_key, reason=reason, error=str(exc))
                return False
        return True

    async def nominate(self, pod_key: str, uid: str, node: str, moot: Callable[[], bool] | None = None) -> bool:
        """Sets the pending pod's ``status.nominatedNodeName`` (clears it when ``node`` is "").
        True when written, or when the pod is gone or ``moot()`` says, when the write's turn comes,
        that it need not be made (the pod is bound: nothing is left to nominate); False when the
        write failed."""
        ns, name = pod_key.split("/", 1)
        body: dict[str, Any] = {"status": {"nominatedNodeName": node or None}}  # null removes it
        if uid:
            body["metadata"] = {"uid": uid}
        async with self.nominate_sem:
            if moot is not None and moot():
                self.skip("pod-status", "moot")
                return True
            try:
                await self._call("pod-status", f"nominatedNodeName of pod {pod_key}",
                                 lambda: self.core.patch_namespaced_pod_status(
                                     name, ns, body, _content_type=MERGE_PATCH, _preload_content=False))
            except Gone:
                return True
            except ApiException as exc:
                if _uid_mismatch(exc):
                    return True
                if _already_bound(exc):
                    log.info("nomination moot: the pod is bound already", pod=pod_key, node=node)
                    return True
                log.error("cannot nominate", pod=pod_key, node=node, status=exc.status, error=str(exc.reason))
                return False
            except Exception as exc:
                log.error("cannot nominate", pod=pod_key, node=node, error=str(exc))
                return False
        return True

    # -- coalesced conditions, events and statuses -----------------------------------------

    def unschedulable(self, pod_key: str, message: str, reason: str = "Unschedulable") -> None:
        # Capped here, so that it compares equal to what an earlier write left on the pod.
        self.reports.unschedulable(pod_key, cap(message, CONDITION_LIMIT), time.monotonic(), reason)

    def bound(self, pod_key: str) -> None:
        self.reports.bound(pod_key)

    def gang_status(self, key: str, status: dict[str, object], kind: Kind) -> None:
        """The status the object ``key`` (of ``kind``) that declares a gang should have. Coalesced: the
        latest one is written, at most once per STATUS_INTERVAL while its pods keep changing (a 20-pod
        gang goes 0, 1 ... 20 running in a few seconds), at once when the phase changes, and not at all
        when the object says it already."""
        self.reports.gang_status(key, status, kind.id)

    def skip(self, kind: str, reason: str, count: int = 1) -> None:
        """Counts writes not made (``reason``: unchanged, coalesced...)."""
        self.skipped[(kind, reason)] = self.skipped.get((kind, reason), 0) + count
        if self.metrics is not None:
            self.metrics.api_writes_skipped.labels(kind, reason).inc(count)

    def flush(self, still_pending: Callable[[str], dict[str, str] | None],
              status_now: Callable[[str, str], Mapping[str, object] | None] = lambda kind, key: None) -> None:
        """Starts writing what has settled, in the background. ``still_pending(pod)`` gives the
        pod's uid and current condition message while it waits, or None when it is bound or gone;
        ``status_now(kind, key)`` the status of the gang's object ``key`` of kind ``kind`` (``Kind.id``)
        as the cache holds it (None: unknown; one that raises costs that status's write, logged)."""
        due = self.reports.due(time.monotonic(), still_pending, status_now)
        for kind, key, error in due.failed:
            log.error("cannot compare a status with its object's; not written", kind=kind, object=key, error=error)
        for kind, reason in due.skipped:
            self.skip(kind, reason)
        for pod, uid, message, reason in due.conditions:
            self.spawn(self._write_condition(pod, uid, message, reason))
        for kind, key, status in due.statuses:
            self.spawn(self._write_gang_status(by_id(kind), key, status))

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
        self.reports.clear()

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

    async def _write_condition(self, pod_key: str, uid: str, message: str, reason: str = "Unschedulable") -> None:
        ns, name = pod_key.split("/", 1)
        body = {"status": {"conditions": [{
            "type": "PodScheduled", "status": "False",
            "reason": reason,
            "message": cap(message, CONDITION_LIMIT),
            "lastTransitionTime": now_rfc3339(), "lastProbeTime": None}]}}
        if await self._report(f"condition of pod {pod_key}", lambda: self.core.patch_namespaced_pod_status(
                name, ns, body, _preload_content=False), kind="pod-status"):
            await self.event("Pod", pod_key, uid, "Warning", "FailedScheduling", message)
        else:
            self.reports.condition_failed(pod_key, message)

    async def _write_gang_status(self, kind: Kind, key: str, status: dict[str, object]) -> None:
        ns, name = key.split("/", 1)
        body = {"status": {k: v for k, v in status.items() if v is not None}}
        try:
            written = await self._report(
                f"status of {kind.kind} {key}", lambda: self.custom.patch_namespaced_custom_object_status(
                    kind.group, kind.version, ns, kind.plural, name, body, _content_type=MERGE_PATCH,
                    _preload_content=False),
                kind="podgroup-status")
        finally:
            self.reports.status_done(kind.id, key)
        if not written:
            self.reports.status_failed(kind.id, key, status)

    async def object_status(self, kind: Kind, name: str, status: dict[str, Any], write: str) -> None:
        """The status of a cluster-scoped object (a topology object), by merge patch; counted in
        ``koordpy_api_writes_total`` as ``write``."""
        await self._report(f"status of {kind.kind} {name}", lambda: self.custom.patch_cluster_custom_object_status(
            kind.group, kind.version, kind.plural, name, {"status": status},
            _content_type=MERGE_PATCH, _preload_content=False), kind=write)

    # -- one-off writes ------------------------------------------------------------------

    async def annotate(self, pod_key: str, key: str, value: str | None) -> None:
        """Sets a pod's annotation (None removes it)."""
        ns, name = pod_key.split("/", 1)
        body = {"metadata": {"annotations": {key: value}}}
        await self._report(f"annotation {key} of pod {pod_key}", lambda: self.core.patch_namespaced_pod(
            name, ns, body, _preload_content=False), kind="pod")

    async def annotate_object(self, kind: Kind, key: str, annotation: str, value: str | None) -> None:
        """Sets an annotation of a namespaced custom object (a gang's PodGroup; None removes it) by a
        merge patch of its metadata, which touches nothing else."""
        ns, name = key.split("/", 1)
        body = {"metadata": {"annotations": {annotation: value}}}
        await self._report(f"annotation {annotation} of {kind.kind} {key}",
                           lambda: self.custom.patch_namespaced_custom_object(
                               kind.group, kind.version, ns, kind.plural, name, body, _content_type=MERGE_PATCH,
                               _preload_content=False), kind="gang-annotation")

    async def event(self, kind: str, obj: str, uid: str, type_: str, reason: str, message: str) -> None:
        """Reports an Event; a repeat of one written before raises its count instead (see
        controller/events.py). A failure is logged, never raised."""
        # Events of cluster-scoped objects live in "default", as kubectl describe expects.
        ns, name = obj.split("/", 1) if "/" in obj else ("default", obj)
        # The involved object as the API names it: the registry's kind under the cache's name for it
        # (a VolcanoPodGroup's kind is PodGroup).
        found = by_name(kind)
        api_version = found.api_version if found is not None else "v1"
        kind = found.kind if found is not None else kind
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
                created = await resp.json() if isinstance(resp, aiohttp.ClientResponse) else \
                    resp.json() if isinstance(resp, Response) else resp
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

