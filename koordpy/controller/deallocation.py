"""The live side of kube-scheduler's DynamicResources PostFilter: a ``Deallocate`` decision carried out.

Belongs here: the claim shown deallocated in the cache at once (the next cycle must find it to
allocate again, its devices free), the status patch (``claimwrites.deallocate``) conditional on the
claim's resourceVersion as the watch brought it, so that it lands only on the claim as the core saw
it (still allocated, held by nobody but the pod), and the assumption forgotten when the write does not
go through (a claim changed meanwhile is decided again by the next cycle). Not here: which claim is
given up (the core, ``koordpy.core.deallocation``), the bodies (``claimwrites``), the loop's ``match``.
A Workload PodGroup's claim (kube-scheduler's PodGroupPostFilter) is given up the same way when the
group's reservation is its only one; with ``unreserve``, only the group's entry of ``reservedFor`` is
deleted, by its uid (kube-scheduler's strategic merge), the allocation kept.
"""

from __future__ import annotations

import dataclasses

import structlog

from koordpy.api.dra import Consumer, ResourceClaim
from koordpy.api.kinds import by_id
from koordpy.controller import claimwrites
from koordpy.controller.cache import CLAIMS, Cache, ClaimAssumption
from koordpy.controller.writer import RESOURCE_CLAIMS, ApiWriter, Conflict, Gone
from koordpy.core.decisions import Deallocate

log = structlog.get_logger("koordpy.loop")
_CLAIM = by_id(RESOURCE_CLAIMS).label  # what the cache files ResourceClaims' versions under


def _deallocated(claim: ResourceClaim) -> ResourceClaim:
    return dataclasses.replace(claim, allocation=None, reserved_for=(), device_conditions=())


def _shows(claim: ResourceClaim) -> bool:
    """The watch brought the claim deallocated (by our write, or by anyone's)."""
    return claim.allocation is None


def _is(entry: Consumer, group: Consumer | None) -> bool:
    return group is not None and (entry.resource, entry.name, entry.api_group) == (
        group.resource, group.name, group.api_group)


class Deallocation:
    """One claim given up: ``assume`` (at once, in the loop), then ``write`` (in the background)."""

    def __init__(self, cache: Cache, writer: ApiWriter, decision: Deallocate) -> None:
        self.cache = cache
        self.writer = writer
        self.decision = decision
        self._version = ""
        self._who = ""
        self._assumed: ClaimAssumption | None = None

    def assume(self) -> bool:
        """Shows the claim deallocated (or, ``unreserve``, without the group's reservation); False
        (nothing to write) when it is no longer what the core saw: gone or made again, not allocated, or
        reserved meanwhile for someone else (a binding in flight)."""
        d = self.decision
        real = self.cache.claim(d.claim)
        shown = self.cache.stores[CLAIMS].get(d.claim)
        if real is None or real.allocation is None or (d.uid and real.uid != d.uid) or real.deleting:
            return False
        namespace = d.claim.split("/", 1)[0]
        if d.unreserve:  # the PodGroup's entry only: whatever else the claim holds stays
            entry = next((c for c in real.reserved_for if _is(c, d.group)), None)
            if entry is None or not entry.uid:
                return False
            self._who = entry.uid  # what the strategic merge deletes the entry by

            def dropped(claim: ResourceClaim) -> ResourceClaim:
                return dataclasses.replace(claim, reserved_for=tuple(c for c in claim.reserved_for
                                                                     if not _is(c, d.group)))

            self._assumed = self.cache.assume_claim(d.claim, dropped, lambda c: not any(
                _is(e, d.group) for e in c.reserved_for))
            return self._assumed is not None
        for seen in (real, shown):
            if seen is not None and any(not _is(c, d.group) and (
                    c.resource != "pods" or f"{namespace}/{c.name}" != d.pod) for c in seen.reserved_for):
                return False
        version = self.cache.versions.get((_CLAIM, d.claim))
        if not version:
            return False  # no version to make the write conditional on: left to a later cycle
        self._version = str(version)
        self._assumed = self.cache.assume_claim(d.claim, _deallocated, _shows)
        return self._assumed is not None

    async def write(self) -> None:
        d, assumed = self.decision, self._assumed
        assert assumed is not None
        real = self.cache.claim(d.claim)
        uid = d.uid or (real.uid if real is not None else "")
        try:
            if d.unreserve:  # not conditional: a strategic merge deletes the group's entry alone
                await self.writer.patch_claim(d.claim, claimwrites.unreserve(uid, self._who, False),
                                              "unreservation", status=True)
            else:
                await self.writer.patch_claim(d.claim, claimwrites.deallocate(uid, self._version), "deallocation",
                                              status=True)
        except (Conflict, Gone):
            # Changed since it was seen (or gone): the next cycle decides again on the claim as it is.
            self.cache.forget_claim(assumed)
            return
        except Exception as exc:
            log.error("cannot deallocate a ResourceClaim", claim=d.claim, pod=d.pod,
                      error=f"{type(exc).__name__}: {exc}")
            self.cache.forget_claim(assumed)
            return
        self.cache.claim_written(assumed)
