"""What is allocated: the devices claims hold (kube-scheduler's allocated state).

Belongs here: the devices allocated exclusively, the shares of devices that allow multiple
allocations (each with its shareID) and the capacity they consume, counted from claims'
allocations and from allocations in flight (``add`` / ``remove``, each returning its undo).
An admin-access result takes no device. Counters consumed by partitionable devices follow from
which devices are allocated, so the allocator derives them per pool from ``allocated`` (the pool
knows what each device consumes); ``version`` tells it when to derive them again, and, once asked to
``track``, ``changed_since`` which devices to look at again (a count kept per device need not recount all).
Not here: the pools (``pools``), the search (``allocator``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction

from koordpy.api.dra import Allocation, ResourceClaim

_LOG_MAX = 4096  # changes ``changed_since`` can still tell


class InUse:
    """Devices taken, by id "driver/pool/device"."""

    __slots__ = ("_capacity", "_exclusive", "_log", "_log_base", "_shares", "version")

    def __init__(self) -> None:
        self._exclusive: dict[str, int] = {}  # id -> how many allocations hold it (more than one is a conflict)
        self._shares: dict[str, dict[str, int]] = {}  # id -> shareID -> count
        self._capacity: dict[str, dict[str, Fraction]] = {}  # id -> capacity name -> consumed
        self.version = 0
        # The devices each of the latest changes touched: _log[i] made version _log_base + i + 1.
        # Kept once someone asks to ``track`` them (None before: most cycles never ask), bounded
        # (_LOG_MAX): a reader further behind counts again from scratch.
        self._log: list[list[str]] | None = None
        self._log_base = 0

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim]) -> InUse:
        self = cls()
        for claim in claims:
            if claim.allocation is not None:
                self._apply(claim.allocation, 1)
        return self

    def copy(self) -> InUse:
        other = InUse()
        other._exclusive = dict(self._exclusive)
        other._shares = {k: dict(v) for k, v in self._shares.items()}
        other._capacity = {k: dict(v) for k, v in self._capacity.items()}
        other.version = self.version
        return other

    def add(self, allocation: Allocation) -> Callable[[], None]:
        self._apply(allocation, 1)
        return lambda: self._apply(allocation, -1)

    def remove(self, allocation: Allocation) -> Callable[[], None]:
        self._apply(allocation, -1)
        return lambda: self._apply(allocation, 1)

    def exclusive(self, device_id: str) -> bool:
        """Whether an allocation holds the device for itself."""
        return device_id in self._exclusive

    def shared(self, device_id: str) -> bool:
        """Whether the device has shares (it allows multiple allocations and some are made)."""
        return device_id in self._shares or device_id in self._capacity

    def allocated(self, device_id: str) -> bool:
        """Whether the device is allocated in any way (its counters are consumed)."""
        return device_id in self._exclusive or device_id in self._shares or device_id in self._capacity

    def consumed(self, device_id: str) -> dict[str, Fraction] | None:
        """The capacity the device's shares consume, by capacity name (None: no share consumes any)."""
        return self._capacity.get(device_id)

    def track(self) -> None:
        """Keeps, from now on, the devices each change touches (``changed_since``)."""
        if self._log is None:
            self._log, self._log_base = [], self.version

    def changed_since(self, version: int) -> set[str] | None:
        """The devices whose allocation changed after ``version`` (added, removed, either way), or None
        when that is too long ago to say (or before ``track``)."""
        if self._log is None or version < self._log_base or version > self.version:
            return None
        return {d for ids in self._log[version - self._log_base:] for d in ids}

    def allocated_ids(self) -> set[str]:
        return set(self._exclusive) | set(self._shares) | set(self._capacity)

    def _apply(self, allocation: Allocation, sign: int) -> None:
        self.version += 1
        log = self._log
        touched: list[str] | None = None
        if log is not None:
            touched = []
            log.append(touched)
            if len(log) > _LOG_MAX:
                drop = len(log) // 2
                del log[:drop]
                self._log_base += drop
        for r in allocation.results:
            if r.admin_access:
                continue
            did = r.device_id
            if touched is not None:
                touched.append(did)
            if r.share_id:
                shares = self._shares.setdefault(did, {})
                n = shares.get(r.share_id, 0) + sign
                if n > 0:
                    shares[r.share_id] = n
                else:
                    shares.pop(r.share_id, None)
                    if not shares:
                        del self._shares[did]
                if r.consumed_capacity:
                    cap = self._capacity.setdefault(did, {})
                    for name, q in r.consumed_capacity.items():
                        v = cap.get(name, Fraction(0)) + sign * q.value
                        cap[name] = v
                    if sign < 0 and did not in self._shares:
                        del self._capacity[did]
                continue
            n = self._exclusive.get(did, 0) + sign
            if n > 0:
                self._exclusive[did] = n
            else:
                self._exclusive.pop(did, None)
