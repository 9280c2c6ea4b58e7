"""What the scheduler remembers between cycles, and every transition on it.

Belongs here: ``SchedulerState`` (the NonStrict reservations, the waits they start, the gangs that
met their minimum once, what was last said about a gang's dropped limits) and the named
transitions that are the only writes to it. Each transition records what undoes it in the open
transaction (``koordpy.core.txn``), the one that also holds the cluster's moves, so a job rolled
back, a dry run discarded or a what-if undone leaves the state as it found it. Code elsewhere reads
the fields and calls the transitions; it never assigns to them. Does not belong here: when to make
a transition (the gang rule, ``koordpy.core.gangrule``; the cycle, ``koordpy.core.cycle``), and the
standing view, which the state only carries (``view``: a cache outside the transaction, always
safe to drop).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, MutableSet
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from koordpy.core.gang import GangGroupId
from koordpy.core.txn import Txn
from koordpy.core.view import View

K = TypeVar("K")
V = TypeVar("V")
_ABSENT = object()


@dataclass(frozen=True)
class _Entry(Generic[K, V]):
    """A mapping's entry as it was before a transition (``old`` is ``_ABSENT``: there was none)."""

    mapping: MutableMapping[K, V]
    key: K
    old: object

    def undo(self) -> None:
        if self.old is _ABSENT:
            self.mapping.pop(self.key, None)
        else:
            self.mapping[self.key] = self.old  # type: ignore[assignment]  # what was there, of type V


@dataclass(frozen=True)
class _Member(Generic[K]):
    """Whether a set held a member before a transition."""

    members: MutableSet[K]
    key: K
    was: bool

    def undo(self) -> None:
        if self.was:
            self.members.add(self.key)
        else:
            self.members.discard(self.key)


@dataclass
class SchedulerState:
    """What the scheduler remembers between cycles; all of it can be lost safely.

    ``reserved`` holds NonStrict members placed while their gang waits (kube-scheduler's
    assumed pods in Permit); nothing is bound for them, so a restart only forgets a wait.
    """

    reserved: dict[str, str] = field(default_factory=dict)  # pod -> node
    wait_since: dict[GangGroupId, float] = field(default_factory=dict)  # GangGroup -> first reservation
    satisfied: set[str] = field(default_factory=set)  # gangs that met their minimum once
    # What was last said about each gang's dropped limits (Requirement.dropped): the Event is written
    # when it changes, not each time the job is tried.
    told: dict[str, str] = field(default_factory=dict)
    # What was last said about a gang's (or lone pod's) minimum runtime or preemption delay that
    # cannot be used as written: its Event is written when that changes, not each time it is read.
    told_settings: dict[tuple[str, str], str] = field(default_factory=dict)  # (key, which setting) -> message
    # Stale gangs (koordpy.core.stale) -> since when: what the gang's object or members say once
    # the write is seen, kept here until then (and read from there after a restart).
    stale_since: dict[str, float] = field(default_factory=dict)
    # Stale gangs whose stale-since this scheduler cleared -> the one it cleared, until the object or
    # members no longer say it: a gang stale again before the clear is seen starts a new clock.
    stale_cleared: dict[str, float] = field(default_factory=dict)
    # The cycle's standing view of the cluster (koordpy.core.view); rebuilt when missing.
    view: View | None = field(default=None, repr=False, compare=False)
    # The open transaction the transitions record into (None: nothing records them).
    txn: Txn | None = field(default=None, repr=False, compare=False)

    # -- the log -------------------------------------------------------------------------------

    def _set(self, mapping: MutableMapping[K, V], key: K, value: V) -> None:
        if self.txn is not None:
            self.txn.record(_Entry(mapping, key, mapping.get(key, _ABSENT)))
        mapping[key] = value

    def _pop(self, mapping: MutableMapping[K, V], key: K) -> V | None:
        if key not in mapping:
            return None
        if self.txn is not None:
            self.txn.record(_Entry(mapping, key, mapping[key]))
        return mapping.pop(key)

    def _keep_only(self, mapping: MutableMapping[K, V], keys: Iterable[K]) -> None:
        """Pops every entry whose key is not among ``keys``, in the mapping's order."""
        keep = set(keys)
        for key in [k for k in mapping if k not in keep]:
            self._pop(mapping, key)

    def _add(self, members: MutableSet[K], key: K) -> None:
        if key not in members:
            if self.txn is not None:
                self.txn.record(_Member(members, key, False))
            members.add(key)

    def _discard(self, members: MutableSet[K], key: K) -> None:
        if key in members:
            if self.txn is not None:
                self.txn.record(_Member(members, key, True))
            members.discard(key)

    # -- reservations (a NonStrict gang's members placed while it waits) -----------------------

    def reserve(self, pod: str, node: str) -> None:
        """``pod`` is held on ``node`` while its GangGroup waits for the rest."""
        self._set(self.reserved, pod, node)

    def release(self, pod: str) -> str | None:
        """The reservation of ``pod`` ends (it binds, its pod or node is gone, its room is taken, its
        wait timed out); the node it held, or None when it held none."""
        return self._pop(self.reserved, pod)

    # -- waits (from a GangGroup's first reservation) -----------------------------------------

    def start_wait(self, group: GangGroupId, now: float) -> None:
        """The GangGroup holds reservations: its wait starts now, unless it started already."""
        if group not in self.wait_since:
            self._set(self.wait_since, group, now)

    def end_wait(self, group: GangGroupId) -> None:
        """The GangGroup binds, or its wait timed out."""
        self._pop(self.wait_since, group)

    def forget_waits(self, standing: Iterable[GangGroupId]) -> None:
        """Waits of GangGroups that no longer stand as they did end: nothing is left to wait for."""
        self._keep_only(self.wait_since, standing)

    # -- gangs satisfied once ------------------------------------------------------------------

    def mark_satisfied(self, gangs: Iterable[str]) -> None:
        """The gangs met their minimum (their GangGroup passed permit)."""
        for key in gangs:
            self._add(self.satisfied, key)

    def keep_satisfied(self, gangs: Iterable[str]) -> None:
        """Only gangs that still exist stay satisfied (a gang recreated under its name starts over)."""
        keep = set(gangs)
        for key in [k for k in self.satisfied if k not in keep]:
            self._discard(self.satisfied, key)

    # -- what was told about dropped limits ----------------------------------------------------

    def tell(self, gang: str, message: str) -> bool:
        """Remembers ``message`` as said about ``gang``; whether it differs from what was said last
        (only then is it said again)."""
        if self.told.get(gang) == message:
            return False
        self._set(self.told, gang, message)
        return True

    def untell(self, gang: str) -> None:
        """Nothing is said about ``gang`` any more."""
        self._pop(self.told, gang)

    def forget_told(self, gangs: Iterable[str]) -> None:
        """What was said about gangs that are gone is forgotten."""
        self._keep_only(self.told, gangs)

    def tell_setting(self, key: str, which: str, message: str) -> bool:
        """``tell`` for a bad setting ``which`` (minimum runtime, preemption delay) of gang (or lone
        pod) ``key``."""
        if self.told_settings.get((key, which)) == message:
            return False
        self._set(self.told_settings, (key, which), message)
        return True

    def forget_settings(self, keys: AbstractSet[str]) -> None:
        """What was said about the settings of gangs and pods not among ``keys`` (gone) is forgotten."""
        self._keep_only(self.told_settings, [k for k in self.told_settings if k[0] in keys])

    # -- stale gangs ---------------------------------------------------------------------------

    def mark_stale(self, gang: str, since: float) -> None:
        """``gang`` runs below its minimum since ``since``."""
        if self.stale_since.get(gang) != since:
            self._set(self.stale_since, gang, since)

    def clear_stale(self, gang: str) -> float | None:
        """``gang`` is not stale (any more, or is gone); since when it was, if it was (remembered as
        cleared until ``cleared_seen``)."""
        was = self._pop(self.stale_since, gang)
        if was is not None:
            self._set(self.stale_cleared, gang, was)
        return was

    def cleared_seen(self, gang: str) -> None:
        """Where ``gang`` keeps its stale-since no longer says the one cleared (or the gang is gone)."""
        self._pop(self.stale_cleared, gang)

    # -- the standing view (a cache, outside the transaction) ----------------------------------

    def standing_view(self) -> View:
        """The standing view, a new one when there is none (dropping it is always safe)."""
        if self.view is None:
            self.view = View()
        return self.view
