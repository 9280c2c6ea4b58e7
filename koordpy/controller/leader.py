"""Leader election on a ``coordination.k8s.io`` Lease, with client-go's rules.

Every replica keeps its cache warm; only the holder of the Lease schedules and writes. A
candidate takes the Lease when it is free or when its holder has not renewed it for
``leaseDurationSeconds`` *as this candidate observed it* (its own clock: clocks of two machines
are never compared). The holder renews every ``retryPeriodSeconds``; if it has not renewed for
``renewDeadlineSeconds`` it stops writing at once (``may_write`` turns false on its own clock,
whatever the network is doing) and gives up: the deadline is shorter than the lease, so it is
silent before anyone else may start. Losing the lease ends the process, as kube-scheduler's
does: a fresh start rebuilds everything from the API server instead of trusting what a
demoted leader assumed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
import structlog
from kubernetes_asyncio.client import ApiClient, CoordinationV1Api
from kubernetes_asyncio.client.exceptions import ApiException

log = structlog.get_logger("koordpy.leader")


def _micro_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(self, api: ApiClient, name: str, namespace: str, identity: str, lease_duration: float,
                 renew_deadline: float, retry_period: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.api = CoordinationV1Api(api)
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.renewed_at: float | None = None  # our clock, when we last renewed (None: not leading)
        # What we last saw of someone else's record, and when (our clock).
        self._observed: tuple[str, str, int] | None = None  # holder, renewTime, transitions
        self._observed_at = 0.0
        self._holder = ""  # the holder the last read showed
        self.lost = asyncio.Event()
        self._keeping: asyncio.Task[None] | None = None

    def may_write(self) -> bool:
        """True while this replica leads and its last renewal is younger than the renew deadline."""
        return self.renewed_at is not None and self.clock() - self.renewed_at < self.renew_deadline

    async def acquire(self) -> None:
        """Returns once this replica holds the Lease."""
        logged = False
        while True:
            started = self.clock()
            try:
                if await self._try():
                    log.info("leading", lease=f"{self.namespace}/{self.name}", identity=self.identity)
                    return
            except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("cannot read or take the lease", lease=f"{self.namespace}/{self.name}",
                            error=str(getattr(exc, "reason", None) or exc))
            if not logged and self._observed is not None:
                log.info("standing by", lease=f"{self.namespace}/{self.name}", leader=self._observed[0])
                logged = True
            await asyncio.sleep(max(0.0, self.retry_period - (self.clock() - started)))

    def start_keeping(self) -> asyncio.Task[None]:
        """``keep()`` in a task of its own, which ``release()`` ends."""
        self._keeping = asyncio.ensure_future(self.keep())
        return self._keeping

    async def keep(self) -> None:
        """Renews every retry period; returns (with ``lost`` set) once the renew deadline passes
        without a renewal, or when another holder shows up in the Lease."""
        assert self.renewed_at is not None
        while True:
            deadline = self.renewed_at + self.renew_deadline
            wait = min(self.retry_period, max(0.0, deadline - self.clock()))
            await asyncio.sleep(wait)
            if self.clock() >= deadline:
                break
            try:
                # The renewal may not outlive the deadline: a request stuck on a dead connection
                # must not keep us "leading" past it.
                # asyncio.timeout, not wait_for, which on Python 3.11 can lose release()'s cancel.
                async with asyncio.timeout(max(0.01, deadline - self.clock())):
                    ok = await self._try()
            except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                log.warning("lease renewal failed", error=str(getattr(exc, "reason", None) or exc))
                continue
            if not ok:
                if self._holder not in ("", self.identity):
                    break  # someone else holds it: we lost it, stop at once
                # A write conflict on our own Lease (a request of ours the server took after all,
                # a stale read): as client-go does, try again until the deadline.
                log.warning("lease renewal conflicted; retrying", lease=f"{self.namespace}/{self.name}")
        self.renewed_at = None
        self.lost.set()
        log.error("leadership lost: stopped writing", lease=f"{self.namespace}/{self.name}", identity=self.identity)

    async def release(self, budget: float = 2.0) -> None:
        """Gives the Lease up on a clean stop, so the standby need not wait for it to expire;
        best effort, within ``budget`` seconds (the lease expires anyway). Renewals stop first."""
        keeping, self._keeping = self._keeping, None
        if keeping is not None:
            keeping.cancel()
            await asyncio.gather(keeping, return_exceptions=True)
        if self.renewed_at is None:
            log.info("lease not released", lease=f"{self.namespace}/{self.name}", error="not leading")
            return
        self.renewed_at = None
        try:
            if await asyncio.wait_for(self._release(), budget):
                log.info("lease released", lease=f"{self.namespace}/{self.name}")
            else:
                log.info("lease not released", lease=f"{self.namespace}/{self.name}", error="held by another")
        except Exception as exc:
            log.info("lease not released", lease=f"{self.namespace}/{self.name}", error=str(exc) or type(exc).__name__)

    async def _release(self) -> bool:
        lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        if lease.spec is None or lease.spec.holder_identity != self.identity:
            return False  # someone else holds it already
        # No holder and a one-second lease: a standby takes it at its next retry.
        body = {"metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": lease.metadata.resource_version},
                "spec": {"leaseDurationSeconds": 1, "leaseTransitions": lease.spec.lease_transitions or 0}}
        await self.api.replace_namespaced_lease(self.name, self.namespace, body)
        return True

    async def _try(self) -> bool:
        """One try to take or renew the Lease: True when we hold it afterwards."""
        now_wall = time.time()
        try:
            lease = await self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
            body = {"metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(now_wall, acquired=now_wall, transitions=0)}
            try:
                await self.api.create_namespaced_lease(self.namespace, body)
            except ApiException as exc2:
                if exc2.status == 409:  # another replica created it first
                    return False
                raise
            self.renewed_at = self.clock()
            return True
        spec = lease.spec
        holder = (spec.holder_identity or "") if spec is not None else ""
        self._holder = holder
        renew = spec.renew_time if spec is not None else None
        transitions = (spec.lease_transitions or 0) if spec is not None else 0
        duration = float((spec.lease_duration_seconds or 0) if spec is not None else 0) or self.lease_duration
        record = (holder, str(renew), transitions)
        if record != self._observed:
            self._observed = record
            self._observed_at = self.clock()
        ours = holder == self.identity
        if holder and not ours and self.clock() < self._observed_at + duration:
            return False  # held, and not yet expired as far as we have watched it
        acquired = spec.acquire_time.timestamp() if ours and spec is not None and spec.acquire_time else now_wall
        body = {"metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": lease.metadata.resource_version},
                "spec": self._spec(now_wall, acquired=acquired, transitions=transitions if ours else transitions + 1)}
        try:
            await self.api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as exc:
            if exc.status == 409:  # someone else wrote it in between: they won this round
                return False
            raise
        self.renewed_at = self.clock()
        self._observed = None
        return True

    def _spec(self, now_wall: float, acquired: float, transitions: int) -> dict[str, Any]:
        return {"holderIdentity": self.identity, "leaseDurationSeconds": max(1, round(self.lease_duration)),
                "acquireTime": _micro_time(acquired), "renewTime": _micro_time(now_wall),
                "leaseTransitions": transitions}

