"""Stale gangs: which gangs run below their minimum, since when, for how long they may, and what is
evicted when that grace runs out (KAI-Scheduler's stale gang eviction is the reference).

A gang is stale when it has at least one live bound member (``koordpy.core.liveness`` says it
still counts), no member that Succeeded (a job that finished a part of its work is left alone, as
KAI's ``IsStale``), and its live bound members are below its minimum: for a gang of parts
(``Gang.parts``, a CompositePodGroup's children, as KAI's pod-sets) fewer parts than it needs
meet their own minimum. Members placed this cycle count; pending replacements do not until they
bind; a member being deleted does not count (it will not come back) and is not evicted again. A
gang whose members are all gone or terminating has nothing left to evict: not stale.

After its grace (``grace``: the job's own setting, else ``Snapshot.admitted_stale_grace`` for a
gang a controller in front of koordpy admitted, Kueue, which recovers it itself, else
``Snapshot.stale_grace``) every live bound member not already terminating is evicted, so the job's
controller starts it again whole; a negative grace only reports. A gang whose pending members
hold nominations (a preemption made room for them and the victims still terminate) is not evicted
until they bind or lose them.

Belongs here: that rule as pure functions (``health``), the grace (``grace``) and its end
(``due``). Does not belong here: which bound members still count (``koordpy.core.liveness``, recorded on each gang by
the view, ``Gang.lost``, which also rebuilds the gangs whose members count differently when nodes
change or a toleration ends), where stale-since is kept (per dialect, ``Staleness.stale_since`` /
``stale_marks``), the decisions the cycle makes from a reading and which gangs it reads
(``koordpy.core.cycle``), the words (``koordpy.core.messages``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from koordpy.api.objects import Pod
from koordpy.core import dialects
from koordpy.core.dialects.base import Admitted
from koordpy.core.model import Gang
from koordpy.core.snapshot import Snapshot
from koordpy.core.verdicts import GangStale


@dataclass(frozen=True, slots=True)
class Health:
    """One gang's reading at a time: its live bound members against its minimum."""

    live: int  # bound members that still count (this cycle's binds included)
    minimum: int
    stale: bool
    # Members bound and not terminating: what an eviction deletes (a member whose node is gone or
    # failed included: the pod is still there and still holds its claims). Only for a stale gang.
    evictable: tuple[str, ...] = ()
    # For a gang of parts: (parts meeting their minimum, parts needed).
    parts: tuple[int, int] | None = None
    arriving: int = 0  # members bound this cycle: replacements arriving, the eviction waits a cycle


def health(gang: Gang, bound_now: Mapping[str, str], succeeded: bool | None = None) -> Health | None:
    """The gang's reading; None for a gang that has no rule to hold it to (no config, an error).
    Which bound members still count is ``Gang.lost`` (the view records it from ``koordpy.core.liveness``
    at the cycle's time); ``bound_now``: the pods bound this cycle (they count); ``succeeded``: whether
    a member Succeeded (None: ``Gang.succeeded`` says)."""
    cfg = gang.config
    if cfg is None or gang.error:
        return None
    minimum = cfg.min_member
    lost = gang.lost
    live: list[Pod] = []
    arriving: list[Pod] = []
    for pod in gang.pods:
        if not pod.node_name:
            if bound_now and pod.key in bound_now:  # bound this cycle, on a node the cycle saw
                arriving.append(pod)
        elif pod.key not in lost:
            live.append(pod)
    count = len(live) + len(arriving)
    parts = None
    short = count < minimum
    if gang.parts is not None:
        need, members = gang.parts
        alive = {p.key for p in live} | {p.key for p in arriving}
        met = sum(1 for keys, least in members if len(keys & alive) >= least)
        parts = (met, need)
        short = short or met < need
    done = gang.succeeded > 0 if succeeded is None else succeeded
    stale = bool(count) and short and not done
    evictable = tuple(p.key for p in (*arriving, *(p for p in gang.pods if p.node_name and not p.deleting))) \
        if stale else ()
    return Health(count, minimum, stale, evictable, parts, len(arriving))


def grace(gang: Gang, snapshot: Snapshot) -> tuple[float, Admitted | None]:
    """A stale gang's grace, and who admitted it in front of koordpy when that decided the grace
    (None: the job's own grace did, or nobody admitted it): the job's own grace when it sets one;
    else, for a gang a controller in front of koordpy admitted a member of (Kueue: it holds the
    job's quota and requeues a broken one itself, and an eviction of koordpy's would bring the pods
    back into the same admission, counted as failures of the job),
    ``admittedStaleGangGracePeriodSeconds``; else ``staleGangGracePeriodSeconds``. Messages credit
    only the controller returned (``told``): a job whose own negative grace keeps its gang is not
    said to be recovered by that controller."""
    own = dialects.stale_grace(gang.key, gang.pods, snapshot)
    if own is not None:
        return own, None
    by = dialects.first_admitted(gang.pods)
    return (snapshot.stale_grace if by is None else snapshot.admitted_stale_grace), by


def told(said: GangStale, by: Admitted | None) -> GangStale:
    """``said`` naming the controller that admitted the gang (it recovers it), when one did."""
    return said if by is None else replace(said, by=by.by, what=by.what, recovers=by.recovers)


def due(since: float, grace: float) -> float | None:
    """When a gang stale since ``since`` is evicted: None for a negative grace (never: only reported)."""
    return None if grace < 0 else since + grace


def since_when(had: float | None, kept: float | None, cleared: float | None, now: float) -> float:
    """Since when a gang stale now is: the earliest of the scheduler's memory (``had``) and what its
    object or members say (``kept``), else ``now``. A ``kept`` no later than the stale-since this
    scheduler ``cleared`` when the gang was whole again is that ended clock, its clear not seen yet
    (the stamp is whole seconds, hence the second); a restart has no memory and reads ``kept``."""
    if kept is not None and cleared is not None and kept < cleared + 1:
        kept = None
    return min((t for t in (had, kept) if t is not None), default=now)
