"""One pod's binding cycle in the live scheduler: reserve, the pre-bind writes, bind, then confirm or
forget, each step with its undo.

Belongs here: what follows a ``Bind`` decision until the pod is bound or back in the queue, as
kube-scheduler's binding cycle runs it (Reserve, PreBind, Bind, and Unreserve on a failure): the pod
and what its pre-bind writes will say are assumed in the cache at once (the next scheduling cycle
must see the room and the volumes taken), the pre-bind steps write and wait in order (volumes, then
devices), and a failure at any step undoes every step (each was reserved), in reverse, and puts the pod back in
the queue. Not here: the bodies of the writes and their retries (``writer``, ``transport``), what the
cache holds (``cache``), which decisions a cycle makes (the core), the loop that starts a binding
cycle for each ``Bind`` (``loop``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import structlog

from koordpy.api.dra import DELETE_PROTECTION, Allocation, ResourceClaim
from koordpy.api.kinds import by_id
from koordpy.api.storage import ANN_SELECTED_NODE, ClaimRef
from koordpy.controller import claimwrites
from koordpy.controller.cache import Cache, ClaimAssumption
from koordpy.controller.metrics import Metrics
from koordpy.controller.writer import RESOURCE_CLAIMS, ApiWriter, Conflict, Gone
from koordpy.core.decisions import Bind, ClaimWrite, DeviceBinding, Event, EventReason, ExtendedClaim, VolumeBinding
from koordpy.core.messages import binding_conditions_pending

log = structlog.get_logger("koordpy.loop")
# How long a pod's binding waits for its claims to be bound once PreBind wrote them (kube-scheduler's
# VolumeBinding bindTimeoutSeconds default), and how often it looks.
PREBIND_TIMEOUT = 600.0
PREBIND_POLL = 0.5
# How long a pod's binding waits for its devices' binding conditions (kube-scheduler's DynamicResources
# bindingTimeout default), and how many times a claim's status write is tried again after a conflict
# (client-go's DefaultRetry, which kube-scheduler's bindClaim retries with).
BINDING_CONDITIONS_TIMEOUT = 600.0
# A pod whose binding cycle failed waits this long before it is tried again, doubling with each failure
# in a row (kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds): a write the API server
# keeps refusing is not made again at every cycle.
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
CONFLICT_RETRIES = 5
# How long a refused allocation waits for the watch to bring the claim as it is now, and how often it looks.
CONFLICT_WAIT = 5.0
CONFLICT_POLL = 0.05
_CLAIM = by_id(RESOURCE_CLAIMS).label  # what the cache files ResourceClaims' versions under


class PreBindStep(Protocol):
    """One pre-bind step of a pod's binding cycle (a kube-scheduler PreBind plugin, as the shell
    carries out what the core decided for it)."""

    plugin: str  # kube-scheduler's name for it: what the pod's condition says failed
    failed: str  # what the log says when it fails

    def reserve(self) -> None:
        """Shows in the cache at once what the step will write (no I/O)."""

    async def pre_bind(self, cycle: BindingCycle) -> None:
        """Writes, then waits until the pod may be bound; raises when it may not."""

    async def unreserve(self) -> None:
        """Undoes ``reserve`` and whatever ``pre_bind`` wrote so far (never raises)."""


class BindingCycle:
    """One pod's binding cycle. ``reserve`` runs as the decision is applied (the next scheduling
    cycle sees the pod on its node and its pre-bind writes made); ``run`` carries out the rest in
    the background."""

    def __init__(self, binder: Binder, decision: Bind) -> None:
        self.binder = binder
        self.decision = decision
        self.steps: list[PreBindStep] = []
        # kube-scheduler's PreBind order: VolumeBinding, then DynamicResources.
        if decision.volumes is not None:  # the pod holds its node while its claims bind
            self.steps.append(VolumeStep(binder.cache, binder.writer, decision.volumes))
        if decision.devices is not None and (decision.devices.claims or decision.devices.extended is not None):
            self.steps.append(ClaimStep(binder.cache, binder.writer, decision.devices, binder.allocating))
        self.reserved = False
        self.uid = ""  # the pod's, once ``run`` starts
        self._bind_failed = False  # the bind raised (not: the pod was gone, or bound already)

    def reserve(self) -> None:
        self.binder.cache.assume(self.decision.pod, self.decision.node, writing=True)
        for step in self.steps:
            step.reserve()
        self.reserved = True

    def hold(self) -> None:
        """Keeps the pod assumed on its node while a pre-bind step waits (whatever ASSUME_TTL says);
        raises when the pod is gone meanwhile."""
        d = self.decision
        if d.pod not in self.binder.cache.pods:
            raise LookupError("the pod is gone")
        self.binder.cache.assume(d.pod, d.node, writing=True)

    async def run(self, uid: str, started: float | None = None, event: Event | None = None) -> None:
        """Pre-bind steps in order, then the bind, and then ``event`` (the pod's Scheduled Event) if
        the bind was written. ``started``: when the scheduling cycle that chose it began
        (perf_counter), the start of the pod's attempt for the metrics. A step that fails, or the
        bind, undoes every step in reverse (each was reserved; those that never ran have only their
        assumptions to take back), and the pod goes back to the queue after its backoff, with kube-
        scheduler's message when a pre-bind step failed. A pod that ended or began to be deleted since
        it was placed (``_ended``) is dropped before the first step as before the bind: no claim is
        reserved for it, no volume bound to its node, and what was assumed is undone."""
        if not self.reserved:
            self.reserve()
        d = self.decision
        self.uid = uid
        if self.steps and self._ended("pre-bind"):
            await self._unreserve(self.steps)
            return
        for step in self.steps:
            try:
                await step.pre_bind(self)
            except Exception as exc:  # Unreserve: what was assumed is undone and the pod tried again
                log.error(step.failed, pod=d.pod, node=d.node, error=f"{type(exc).__name__}: {exc}")
                # Every step, those after the failed one included: each was reserved (its writes shown
                # in the cache, a claim's allocation announced to the pods sharing it) and owes its undo.
                await self._unreserve(self.steps)
                self.binder.writer.unschedulable(d.pod, f"running PreBind plugin \"{step.plugin}\": {exc}")
                self.binder.failed(d.pod, uid)
                return
        if await self._bind(uid, started):
            self.binder.failures.pop(d.pod, None)
            self._confirm(uid, event)
        else:
            await self._unreserve(self.steps)
            if self._bind_failed:
                self.binder.failed(d.pod, uid)

    def _ended(self, before: str) -> bool:
        """Whether the pod ended or is being deleted since it was placed, as the cache has it now
        (Kueue marks a pending pod Failed when its assigned node fails; its Job deletes every pod when
        suspended): then nothing more is written for it (said in the log, ``before`` which write).
        The binding subresource would accept a Failed pod all the same, and a kubelet would never
        run it; a claim's status would be reserved for it, a volume bound to its node."""
        d = self.decision
        pod = self.binder.cache.pods.get(d.pod)
        if pod is None or not (pod.terminal or pod.deleting):
            return False
        log.info("bind dropped: the pod ended or is being deleted since it was placed", pod=d.pod, node=d.node,
                 phase=pod.phase, deleting=pod.deleting, before=before)
        return True

    async def _bind(self, uid: str, started: float | None) -> bool:
        d = self.decision
        writer, metrics = self.binder.writer, self.binder.metrics
        failed = False
        if self._ended("bind"):  # again: the pre-bind steps may have waited long
            return False
        try:
            bound = await writer.bind(d.pod, uid, d.node)
        except Exception as exc:  # retries ran out (the API server unreachable, say): place it again
            log.error("bind failed", pod=d.pod, node=d.node, error=f"{type(exc).__name__}: {exc}")
            bound, failed = False, True
        self._bind_failed = failed
        if metrics is not None and started is not None and (bound or failed):
            # A pod gone or bound by someone else meanwhile (False, no error) ended no attempt of ours.
            found = self.binder.cache.pods.get(d.pod)
            profile = found.scheduler_name if found is not None else ""
            outcome = "scheduled" if bound else "error"
            metrics.attempts.labels(outcome, profile).inc()
            metrics.attempt_duration.labels(outcome, profile).observe(time.perf_counter() - started)
        return bound

    def _confirm(self, uid: str, event: Event | None) -> None:
        """The bind is written: ASSUME_TTL counts from now, the pod's pending report is dropped and its
        Scheduled Event goes out (kube-scheduler writes it after the bind, never for a refused one)."""
        cache, writer = self.binder.cache, self.binder.writer
        cache.bind_written(self.decision.pod)
        writer.bound(self.decision.pod)
        if event is not None:
            writer.spawn_owed(writer.event(event.kind, event.obj, uid, event.type, event.reason, event.message))

    async def _unreserve(self, steps: list[PreBindStep]) -> None:
        for step in reversed(steps):
            await step.unreserve()
        # Forgotten, the pod is pending again in the next snapshot and the cache's change brings that
        # cycle; left assumed, it would wait out ASSUME_TTL with no cycle to notice.
        self.binder.cache.forget(self.decision.pod)


class Binder:
    """Starts and carries out the pods' binding cycles for the loop: ``reserve`` as a ``Bind`` is
    applied, ``run`` in the background."""

    def __init__(self, cache: Cache, writer: ApiWriter, metrics: Metrics | None = None) -> None:
        self.cache = cache
        self.writer = writer
        self.metrics = metrics
        self._reserved: dict[str, BindingCycle] = {}  # pod -> its cycle, reserved and not yet run
        # Claims whose allocation a binding cycle is writing: the others sharing the claim (a gang's
        # members, pods naming one claim) write their reservations once it is written.
        self.allocating: dict[str, Allocating] = {}
        self.failures: dict[str, tuple[str, int]] = {}  # pod -> (its uid, binding cycles failed in a row)

    def failed(self, pod: str, uid: str) -> None:
        """The pod's binding cycle failed: it waits out a backoff before the next cycles see it."""
        was = self.failures.get(pod)
        count = was[1] + 1 if was is not None and was[0] == uid else 1
        self.failures[pod] = (uid, count)
        if len(self.failures) > 10_000:  # pods long gone are not remembered for ever
            self.failures = {pod: (uid, count)}
        delay = min(BACKOFF_INITIAL * 2 ** min(count - 1, 16), BACKOFF_MAX)
        self.cache.back_off(pod, time.monotonic() + delay)
        asyncio.get_running_loop().call_later(delay, self.cache.end_back_off, pod)

    def reserve(self, d: Bind) -> None:
        cycle = BindingCycle(self, d)
        cycle.reserve()
        self._reserved[d.pod] = cycle

    async def run(self, d: Bind, uid: str, started: float | None = None, event: Event | None = None) -> None:
        cycle = self._reserved.get(d.pod)
        if cycle is not None and cycle.decision is d:
            del self._reserved[d.pod]
        else:
            cycle = BindingCycle(self, d)
        await cycle.run(uid, started, event)


# -- volumes -------------------------------------------------------------------------------------

class VolumeStep:
    """kube-scheduler's VolumeBinding PreBind: writes the claimRefs and selected-nodes, waits (the
    pod assumed on its node, its room held) until every claim is Bound by the PV controller or the
    provisioner. A failed write, a binding undone meanwhile or a wait past PREBIND_TIMEOUT fails it."""

    plugin = "VolumeBinding"
    failed = "volume binding failed"

    def __init__(self, cache: Cache, writer: ApiWriter, vb: VolumeBinding) -> None:
        self.cache = cache
        self.writer = writer
        self.vb = vb
        self._undo: list[Callable[[], None]] = []

    def reserve(self) -> None:
        """PreBind's writes shown in the cache at once, so the next cycle gives no other claim the same
        PersistentVolume and sees the claim's node chosen (kube-scheduler's assume cache)."""
        vb = self.vb
        claims, pvs = self.cache.storage.claims, self.cache.storage.volumes
        for claim_key, pv_name in vb.static:
            claim, pv = claims.get(claim_key), pvs.get(pv_name)
            if claim is not None and pv is not None and not pv.bound_to(claim):
                self._undo.append(self.cache.assume_storage(pv.model_copy(update={"claim_ref": ClaimRef(
                    namespace=claim.namespace, name=claim.name, uid=claim.uid)})))
        for claim_key in vb.provision:
            claim = claims.get(claim_key)
            if claim is not None and claim.selected_node != vb.node:
                self._undo.append(self.cache.assume_storage(claim.model_copy(update={"annotations": {
                    **claim.annotations, ANN_SELECTED_NODE: vb.node}})))

    async def pre_bind(self, cycle: BindingCycle) -> None:
        vb = self.vb
        claims, pvs = self.cache.storage.claims, self.cache.storage.volumes
        for claim_key, pv_name in vb.static:
            claim = claims.get(claim_key)
            pv = pvs.get(pv_name)
            if claim is None or pv is None:
                raise LookupError(f"PersistentVolumeClaim {claim_key} or PersistentVolume {pv_name} is gone")
            version = self.cache.versions.get(("PersistentVolume", pv_name))
            await self.writer.claim_volume(pv_name, claim.namespace, claim.name, claim.uid,
                                           str(version) if version else "")
        for claim_key in vb.provision:
            await self.writer.select_node(claim_key, vb.node)
        deadline = time.monotonic() + PREBIND_TIMEOUT
        while not all(k in claims and claims[k].bound for k in vb.claims):
            given_up = self._undone()
            if given_up:  # as kube-scheduler's checkBindings: no use waiting for a bind that was undone
                raise LookupError(given_up)
            if time.monotonic() > deadline:
                raise TimeoutError(f"claims {', '.join(vb.claims)} not bound within {PREBIND_TIMEOUT:g}s")
            cycle.hold()
            await asyncio.sleep(PREBIND_POLL)

    async def unreserve(self) -> None:
        # What the watch brought meanwhile stays: each undo restores only its own assumption.
        for revert in reversed(self._undo):
            revert()
        self._undo.clear()

    def _undone(self) -> str | None:
        """Why a PreBind wait cannot succeed any more: a claim gone, a provisioner that reset the
        claim's selected node (it gives the pod back to scheduling that way), or a static volume whose
        claimRef no longer names its claim."""
        vb = self.vb
        claims, pvs = self.cache.storage.claims, self.cache.storage.volumes
        for key in vb.claims:
            if key not in claims:
                return f"PersistentVolumeClaim {key} is gone"
        for key in vb.provision:
            claim = claims[key]
            if not claim.bound and claim.selected_node != vb.node:
                return (f"the provisioner of PersistentVolumeClaim {key} reset its selected node "
                        f"(now {claim.selected_node or 'none'})")
        for key, pv_name in (*vb.static, *vb.prebound):
            claim, pv = claims[key], pvs.get(pv_name)
            if not claim.bound and (pv is None or not pv.bound_to(claim)):
                return f"PersistentVolume {pv_name} no longer names PersistentVolumeClaim {key}"
        return None


# -- devices (DRA) --------------------------------------------------------------------------------

def _reserved(claim: ResourceClaim, uid: str) -> bool:
    return any(c.uid == uid for c in claim.reserved_for)


def _with_write(w: ClaimWrite, claim: ResourceClaim) -> ResourceClaim:
    """The claim as ``w``'s writes leave it: protected, allocated, reserved for its consumer."""
    finalizers = claim.finalizers if DELETE_PROTECTION in claim.finalizers or w.allocation is None else (
        *claim.finalizers, DELETE_PROTECTION)
    reserved = claim.reserved_for if _reserved(claim, w.consumer.uid) else (*claim.reserved_for, w.consumer)
    allocation = w.allocation if w.allocation is not None and claim.allocation is None else claim.allocation
    return dataclasses.replace(claim, finalizers=finalizers, reserved_for=reserved, allocation=allocation)


def _shows_write(w: ClaimWrite, claim: ResourceClaim) -> bool:
    """The watch brought the claim as ``w`` wrote it (its reservation comes with its allocation)."""
    return _reserved(claim, w.consumer.uid) and claim.allocation is not None


def _without(uid: str, deallocate: bool, claim: ResourceClaim) -> ResourceClaim:
    """The claim once the reservation of ``uid`` is taken back (and the allocation with it)."""
    reserved = tuple(c for c in claim.reserved_for if c.uid != uid)
    if not deallocate:
        return dataclasses.replace(claim, reserved_for=reserved)
    return dataclasses.replace(claim, reserved_for=reserved, allocation=None,
                               finalizers=tuple(f for f in claim.finalizers if f != DELETE_PROTECTION))


def _unreserved(uid: str, deallocate: bool, claim: ResourceClaim) -> bool:
    return not _reserved(claim, uid) and (not deallocate or claim.allocation is None)


def _raw_reserved(raw: dict[str, Any], uid: str) -> bool:
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    entries = (status or {}).get("reservedFor") or []
    return any(isinstance(e, dict) and e.get("uid") == uid for e in entries)


class Allocating:
    """An allocation being written: those that share the claim wait for it (``done``) and go on only
    if it was written (``ok``)."""

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.ok = False

    def end(self, ok: bool) -> None:
        self.ok = ok
        self.done.set()


class ClaimStep:
    """kube-scheduler's DynamicResources PreBind: for each claim in the pod's order, the finalizer
    ``resource.kubernetes.io/delete-protection`` (with an allocation of ours), then ``status.allocation``
    with the pod's ``reservedFor`` entry in one status patch; then, if a device has binding conditions,
    a wait until all of them are True. Reserve shows every claim allocated and reserved in the cache at
    once; unreserve takes back what was written (the reservation, and the allocation and finalizer when
    nobody else holds the claim) and what was assumed."""

    plugin = "DynamicResources"
    failed = "device binding failed"

    def __init__(self, cache: Cache, writer: ApiWriter, devices: DeviceBinding,
                 allocating: dict[str, Allocating] | None = None) -> None:
        self.cache = cache
        self.writer = writer
        self.devices = devices
        self.allocating = {} if allocating is None else allocating  # shared by the Binder's cycles
        self._allocating: dict[str, Allocating] = {}  # ours, not yet ended
        self._assumed: list[tuple[ClaimWrite, ClaimAssumption]] = []
        self._protected: list[ClaimWrite] = []  # finalizers added, claims not (yet) written
        self._written: list[ClaimWrite] = []  # status written (allocation and reservation), or found so
        # Claims whose devices failed their binding conditions or timed out: unreserve deallocates them
        # even when an earlier cycle allocated them, if nobody else holds them (kube-scheduler's Filter
        # finds such a claim unavailable and its PostFilter deallocates it), else the pod waits on them
        # again on every attempt.
        self._unusable: set[str] = set()
        self._known: dict[str, tuple[int, frozenset[str], bool]] = {}  # claim -> ``_note``
        self._provisional = ""  # the extended resources' claim shown in the cache until created
        self._created: tuple[str, str] | None = None  # the extended resources' claim we created: (key, uid)

    def reserve(self) -> None:
        ext = self.devices.extended
        if ext is not None:
            # Shown under its generateName (no object's name ends with "-") with its devices in use.
            self._provisional = self.cache.assume_created(ResourceClaim(
                ext.namespace, ext.generate_name, spec=ext.spec, allocation=ext.allocation,
                reserved_for=(ext.consumer,)))
        for w in self.devices.claims:
            if w.allocation is not None:
                self._allocating[w.claim] = self.allocating[w.claim] = Allocating()
            assumed = self.cache.assume_claim(w.claim, partial(_with_write, w), partial(_shows_write, w))
            if assumed is not None:
                self._assumed.append((w, assumed))

    async def pre_bind(self, cycle: BindingCycle) -> None:
        for w in self.devices.claims:
            cycle.hold()  # a pod deleted meanwhile gets no more claims written for it
            await self._write(w)
        if self.devices.extended is not None:
            await self._create(self.devices.extended)
        # Every claim of the pod, allocated now or before (a restart finds its predecessor's allocation
        # written and the devices not ready yet): kube-scheduler's isPodReadyForBinding looks at all.
        waited = [(w, a) for w in self._written if (a := self._allocation(w)) is not None
                  and any(r.binding_conditions for r in a.results)]
        if not waited:
            return
        # kube-scheduler tells the pod before it waits (a Normal Event, through the Events' aggregation).
        d = cycle.decision
        said = binding_conditions_pending(d.node)
        self.writer.spawn_owed(self.writer.event("Pod", d.pod, cycle.uid, "Normal",
                                                 EventReason.BINDING_CONDITIONS_PENDING, said))
        # 600 s from the start of the wait, or from the allocation's timestamp when that is earlier.
        stamps = [a.timestamp for _, a in waited if a.timestamp is not None]
        deadline = min([time.time(), *stamps]) + BINDING_CONDITIONS_TIMEOUT
        while True:
            ready = True
            for w, a in waited:
                ready = self._ready(w, a) and ready
            if ready:
                return
            if time.time() > deadline:
                self._unusable.update(w.claim for w, a in waited if not self._ready(w, a))
                raise TimeoutError(f"binding conditions of ResourceClaims {', '.join(w.claim for w, _ in waited)} "
                                   f"not met within {BINDING_CONDITIONS_TIMEOUT:g}s")
            cycle.hold()
            await asyncio.sleep(PREBIND_POLL)

    def _allocation(self, w: ClaimWrite) -> Allocation | None:
        """The allocation ``w``'s claim holds: the one written now, or the one it had."""
        if w.allocation is not None:
            return w.allocation
        claim = self.cache.claim(w.claim)
        return claim.allocation if claim is not None else None

    def _ready(self, w: ClaimWrite, allocation: Allocation) -> bool:
        """Whether every binding condition of the claim's devices is True on the claim; raises when a
        binding failure condition is (kube-scheduler's isClaimReadyForBinding)."""
        claim = self.cache.claim(w.claim)
        if claim is None:
            raise LookupError(f"ResourceClaim {w.claim} is gone")
        conditions = {(c.driver, c.pool, c.device, c.type): c.status for c in claim.device_conditions}
        ready = True
        for r in allocation.results:
            for failure in r.binding_failure_conditions:
                if conditions.get((r.driver, r.pool, r.device, failure)) == "True":
                    self._unusable.add(w.claim)
                    raise RuntimeError(f"binding failure condition {failure} of device {r.device_id} is True "
                                       f"(ResourceClaim {w.claim})")
            if any(conditions.get((r.driver, r.pool, r.device, c)) != "True" for c in r.binding_conditions):
                ready = False
        return ready

    def _end(self, key: str, ok: bool) -> None:
        mine = self._allocating.pop(key, None)
        if mine is not None:
            mine.end(ok)
            if self.allocating.get(key) is mine:
                del self.allocating[key]

    async def _write(self, w: ClaimWrite) -> None:
        shared = self.allocating.get(w.claim) if w.allocation is None else None
        if shared is not None:
            # Its allocation is another binding cycle's, in flight: a reservation lands only on an
            # allocated claim (the API server refuses reservedFor without an allocation). Bounded, though
            # the waits follow the core's order (a pod shares only what a pod placed before it allocated).
            async with asyncio.timeout(PREBIND_TIMEOUT):
                await shared.done.wait()
            if not shared.ok:
                raise LookupError(f"the allocation of ResourceClaim {w.claim}, shared with another pod, "
                                  "was not written")
        claim = self.cache.claim(w.claim)
        if claim is None:
            raise LookupError(f"ResourceClaim {w.claim} is gone")
        if claim.deleting:
            raise LookupError(f"ResourceClaim {w.claim} got deleted in the meantime")
        if w.allocation is None and self._holds_already(w, claim):
            # Reserved for the consumer already (a PodGroup's claim another member wrote, an allocation
            # a predecessor wrote before a restart): kube-scheduler's PreBind skips it, and so does a
            # shared API server's load. Still ours to wait on, and to take back as its Unreserve does.
            self._written.append(w)
            return
        version = self.cache.versions.get((_CLAIM, w.claim))
        rv = str(version) if version else ""
        if w.allocation is not None and DELETE_PROTECTION not in claim.finalizers:
            self._protected.append(w)
            raw = await self.writer.patch_claim(w.claim, claimwrites.add_finalizer(claim.uid), "finalizer")
            self._note(w.claim, raw)
            # The claim as it is now: allocated meanwhile, or the version the allocation is written against.
            rv = self._unallocated(w, raw) or rv
        for attempt in range(CONFLICT_RETRIES):
            body = claimwrites.reserve(claim.uid, w.consumer, w.allocation, time.time(), rv)
            try:
                self._note(w.claim, await self.writer.patch_claim(w.claim, body, "allocation and reservation",
                                                                  status=True))
                break
            except Conflict:
                if w.allocation is None or attempt == CONFLICT_RETRIES - 1:
                    raise
            # The claim changed since that version: written anyway only if nobody allocated it, as the
            # watch shows it (kube-scheduler reads it again; the watch needs no more than list and watch).
            fresh, fresh_version = await self._fresher(w.claim, rv)
            if fresh.deleting or fresh.uid != claim.uid:  # recreated under its name: a claim we never chose
                raise LookupError(f"ResourceClaim {w.claim} got deleted in the meantime")
            if fresh.allocation is not None:
                if _reserved(fresh, w.consumer.uid):
                    break  # ours: an earlier attempt landed and its answer was lost
                raise LookupError(f"ResourceClaim {w.claim} got allocated elsewhere in the meantime")
            rv = fresh_version
        self._written.append(w)
        self._end(w.claim, True)
        if w in self._protected:
            self._protected.remove(w)
        for done, assumed in self._assumed:
            if done is w:
                self.cache.claim_written(assumed)

    def _holds_already(self, w: ClaimWrite, claim: ResourceClaim) -> bool:
        """Whether ``claim`` as the watch brought it is allocated and reserved for ``w``'s consumer,
        with no write of another binding cycle in flight on it (an unreserve taking the reservation
        back, which the watch has not shown yet: then the reservation is written again)."""
        if claim.allocation is None or not _reserved(claim, w.consumer.uid):
            return False
        mine = [a for _, a in self._assumed]
        return all(a in mine for a in self.cache.claim_assumptions(w.claim))

    async def _create(self, ext: ExtendedClaim) -> None:
        """The claim of the pod's DRA-backed extended resources, as kube-scheduler's PreBind makes it:
        created (then, as any claim allocated now, the finalizer, then the allocation with the pod in
        ``reservedFor``), then the pod's ``status.extendedResourceClaimStatus`` names it. Deleted again
        by ``unreserve`` when a later write or the bind fails."""
        raw = await self.writer.create_claim(ext.namespace, claimwrites.extended_claim(ext))
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        name, uid = str((meta or {}).get("name") or ""), str((meta or {}).get("uid") or "")
        if not name:
            raise LookupError(f"the API server gave the claim {ext.generate_name}* no name")
        key = f"{ext.namespace}/{name}"
        self._created = (key, uid)
        await self.writer.patch_claim(key, claimwrites.add_finalizer(uid), "finalizer")
        await self.writer.patch_claim(key, claimwrites.reserve(uid, ext.consumer, ext.allocation, time.time()),
                                      "allocation and reservation", status=True)
        self.cache.created(self._provisional, key)
        await self.writer.extended_claim_status(f"{ext.namespace}/{ext.pod}", ext.pod_uid,
                                                claimwrites.extended_status(ext, name))

    async def _fresher(self, key: str, than: str) -> tuple[ResourceClaim, str]:
        """The claim and its resourceVersion once the watch brought a version newer than ``than`` (a
        write made against ``than`` was refused as conflicting)."""
        deadline = time.monotonic() + CONFLICT_WAIT
        while True:
            claim = self.cache.claim(key)
            if claim is None:
                raise LookupError(f"ResourceClaim {key} is gone")
            version = self.cache.versions.get((_CLAIM, key), 0)
            if version > int(than or 0):
                return claim, str(version)
            if time.monotonic() > deadline:
                raise TimeoutError(f"ResourceClaim {key} changed and the watch did not bring it within "
                                   f"{CONFLICT_WAIT:g}s")
            await asyncio.sleep(CONFLICT_POLL)

    def _note(self, key: str, raw: dict[str, Any]) -> None:
        """The claim as one of our writes left it (the API server's answer): what an undo is made
        against when the watch has not brought it yet."""
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
        try:
            rv = int((meta or {}).get("resourceVersion") or 0)
        except (TypeError, ValueError):
            return
        entries = (status or {}).get("reservedFor") or []
        uids = frozenset(str(e.get("uid")) for e in entries if isinstance(e, dict))
        self._known[key] = (rv, uids, bool((status or {}).get("allocation")))

    def _latest(self, key: str) -> tuple[str, frozenset[str], bool] | None:
        """The claim's newest known state: (resourceVersion, the consumers' uids, allocated), from the
        watch or from our own writes' answers, whichever is newer; None when it is gone."""
        claim = self.cache.claim(key)
        if claim is None:
            return None
        version = self.cache.versions.get((_CLAIM, key), 0)
        known = self._known.get(key)
        if known is not None and known[0] > version:
            return str(known[0]), known[1], known[2]
        return (str(version) if version else "", frozenset(c.uid for c in claim.reserved_for),
                claim.allocation is not None)

    @staticmethod
    def _unallocated(w: ClaimWrite, raw: dict[str, Any]) -> str | None:
        """The resourceVersion of ``raw`` (the claim as the API server has it), which has no allocation;
        None when the allocation there is ours already; raises when it is being deleted or allocated
        elsewhere (kube-scheduler's bindClaim refuses both)."""
        meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
        status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
        if (meta or {}).get("deletionTimestamp"):
            raise LookupError(f"ResourceClaim {w.claim} got deleted in the meantime")
        if (status or {}).get("allocation"):
            if _raw_reserved(raw, w.consumer.uid):
                return None
            raise LookupError(f"ResourceClaim {w.claim} got allocated elsewhere in the meantime")
        return str((meta or {}).get("resourceVersion") or "")

    async def unreserve(self) -> None:
        for key in list(self._allocating):  # those waiting to share an allocation never written give up
            self._end(key, False)
        if self._provisional:
            self.cache.forget_created(self._provisional)
        if self._created is not None:  # kube-scheduler's Unreserve deletes the claim it created
            key, uid = self._created
            self._created = None
            await self._quietly(key, claimwrites.drop_finalizer(uid), "finalizer")
            try:
                await self.writer.delete_claim(key, uid)
            except Exception as exc:
                log.error("cannot delete a ResourceClaim we created", claim=key, error=f"{type(exc).__name__}: {exc}")
        for _, assumed in reversed(self._assumed):
            self.cache.forget_claim(assumed)
        self._assumed.clear()
        undo: list[tuple[ClaimWrite, bool, str, ClaimAssumption | None]] = []
        for w in reversed(self._written):
            latest = self._latest(w.claim)
            if latest is None:
                continue  # gone: nothing to take back
            if w.consumer.resource != "pods":
                # A PodGroup's reservation serves its other members too (bound, or binding): it stays, as
                # kube-scheduler leaves it, until the group is found unschedulable or done.
                continue
            rv, consumers, _ = latest
            # Only conditional on a version seen so: never an allocation someone reserved meanwhile.
            deallocate = bool(rv) and (w.allocation is not None or w.claim in self._unusable) and \
                not consumers - {w.consumer.uid}
            # Shown at once, so the next cycle finds the devices free (or the claim reserved for others).
            taken_back = self.cache.assume_claim(w.claim, partial(_without, w.consumer.uid, deallocate),
                                                 partial(_unreserved, w.consumer.uid, deallocate))
            undo.append((w, deallocate, rv, taken_back))
            if taken_back is not None:
                self.cache.claim_written(taken_back)
        self._written.clear()
        for w, deallocate, rv, taken_back in undo:
            if not await self._take_back(w, deallocate, rv) and taken_back is not None:
                # Not taken back (or only the reservation): the claim is shown as the watch brings it,
                # never as deallocated while the API server still holds its devices for it.
                self.cache.forget_claim(taken_back)
        for w in reversed(self._protected):  # a finalizer added for an allocation never written
            latest = self._latest(w.claim)
            claim = self.cache.claim(w.claim)
            if latest is not None and claim is not None and not latest[2]:
                # Conditional: a claim allocated by someone else meanwhile keeps the finalizer.
                await self._quietly(w.claim, claimwrites.drop_finalizer(claim.uid, latest[0]), "finalizer")
        self._protected.clear()

    async def _take_back(self, w: ClaimWrite, deallocate: bool, rv: str) -> bool:
        """Takes ``w``'s reservation back (and the allocation when ``deallocate``); False unless all of
        that was written."""
        claim = self.cache.claim(w.claim)
        uid = claim.uid if claim is not None else ""
        body = claimwrites.unreserve(uid, w.consumer.uid, deallocate, rv)
        try:
            raw = await self.writer.patch_claim(w.claim, body, "reservation", status=True)
        except Conflict:
            if not deallocate:
                log.error("cannot unreserve a ResourceClaim", claim=w.claim, error="conflict")
                return False
            # Changed meanwhile (someone reserved it too): only our entry goes, the allocation stays.
            await self._quietly(w.claim, claimwrites.unreserve(uid, w.consumer.uid, False), "reservation",
                                status=True)
            return False
        except Gone:
            return True
        except Exception as exc:
            log.error("cannot unreserve a ResourceClaim", claim=w.claim, error=f"{type(exc).__name__}: {exc}")
            return False
        if deallocate:
            self._note(w.claim, raw)
            known = self._known.get(w.claim)
            await self._quietly(w.claim, claimwrites.drop_finalizer(uid, str(known[0]) if known else ""),
                                "finalizer")
        return True

    async def _quietly(self, key: str, body: dict[str, Any], what: str, status: bool = False) -> None:
        """An undo's write: a failure is logged (the claim controller or the next attempt mends it)."""
        try:
            await self.writer.patch_claim(key, body, what, status=status)
        except Gone:
            pass
        except Exception as exc:
            log.error("cannot undo a ResourceClaim write", claim=key, what=what,
                      error=f"{type(exc).__name__}: {exc}")
