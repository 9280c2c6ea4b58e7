"""Stale gangs: which gangs run below their minimum, since when, for how long they may, and what is
evicted when that grace runs out (KAI-Scheduler's stale gang eviction is the reference).

A gang is stale when it has at least one live bound member (``koordpy.core.liveness`` says it
still counts), no member that Succeeded (a job that finished a part of its work is left alone, as
KAI's ``IsStale``), and its live bound members are below its minimum: for a gang of parts
(``Gang.parts``, a CompositePodGroup's children, as KAI's pod-sets) fewer parts than it needs
meet their own minimum. Members placed this cycle count; pending replacements do not until they
bind; a member being deleted does not count (it will not come back) and is not evicted again. A
gang whose members are all gone or terminating has nothing left to evict: not stale.

After its grace (the job's own setting, else ``Snapshot.stale_grace``) every live bound member not
already terminating is evicted, so the job's controller starts it again whole; a negative grace
only reports. A gang whose pending members hold nominations (a preemption made room for them and
the victims still terminate) is not evicted until they bind or lose them.

Belongs here: that rule as pure functions (``health``), the grace's end (``due``), and ``Watch``, the
cache that keeps the per-cycle cost proportional to the gangs that changed or are stale (their
nodes, the times a member will stop counting). Does not belong here: where stale-since is kept
(per dialect, ``Statuses.stale_since`` / ``stale_marks``), the decisions the cycle makes from a
reading (``koordpy.core.cycle``), the words (``koordpy.core.messages``).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from koordpy.api.objects import Node, Pod
from koordpy.core.liveness import Loss, loss, lost_later
from koordpy.core.model import Gang


@dataclass(frozen=True, slots=True)
class Health:
    """One gang's reading at a time: its live bound members against its minimum."""

    live: int  # bound members that still count (this cycle's binds included)
    minimum: int
    stale: bool
    # Members bound and not terminating: what an eviction deletes (a member whose node is gone or
    # failed included: the pod is still there and still holds its claims).
    evictable: tuple[str, ...] = ()
    lost: tuple[tuple[str, Loss], ...] = ()  # bound members that no longer count, and why
    wake: float | None = None  # the earliest time a member that counts now stops counting
    nodes: frozenset[str] = frozenset()  # the nodes its bound members are on
    # For a gang of parts: (parts meeting their minimum, parts needed).
    parts: tuple[int, int] | None = None
    arriving: int = 0  # members bound this cycle: replacements arriving, the eviction waits a cycle


def noexecute_nodes(nodes: Mapping[str, Node]) -> frozenset[str]:
    """The nodes with a ``NoExecute`` taint: only a member bound there needs ``liveness`` asked."""
    return frozenset(name for name, n in nodes.items() if any(t.effect == "NoExecute" for t in n.taints))


def health(gang: Gang, finished: Iterable[Pod], nodes: Mapping[str, Node], bound_now: Mapping[str, str],
           now: float, tainted: AbstractSet[str] | None = None) -> Health | None:
    """The gang's reading at ``now``; None for a gang that has no rule to hold it to (no config, an
    error). ``finished``: the members that finished (a Succeeded one keeps the gang from being
    stale); ``bound_now``: the pods bound this cycle (they count); ``tainted``: the nodes with a
    ``NoExecute`` taint (``noexecute_nodes``; None: found here)."""
    cfg = gang.config
    if cfg is None or gang.error:
        return None
    if tainted is None:
        tainted = noexecute_nodes(nodes)
    minimum = cfg.min_member
    # One pass that asks ``liveness`` only of what may be lost (a gang of thousands, all running on
    # healthy nodes, is read each time it changes): a member being deleted, or bound to a node that
    # is gone or has a NoExecute taint.
    live: list[Pod] = []
    lost: list[tuple[str, Loss]] = []
    on: set[str] = set()
    wake: float | None = None
    arriving: list[Pod] = []
    for pod in gang.pods:
        name = pod.node_name
        if not name:
            if bound_now and pod.key in bound_now:  # bound this cycle, on a node the cycle saw
                arriving.append(pod)
                on.add(bound_now[pod.key])
            continue
        on.add(name)
        if not pod.deleting and name not in tainted and name in nodes:
            live.append(pod)
            continue
        node = nodes.get(name)
        why = loss(pod, node, now)
        if why is None:
            live.append(pod)
            later = lost_later(pod, node, now)
            if later is not None and (wake is None or later < wake):
                wake = later
        else:
            lost.append((pod.key, why))
    count = len(live) + len(arriving)
    parts = None
    short = count < minimum
    if gang.parts is not None:
        need, members = gang.parts
        alive = {p.key for p in live} | {p.key for p in arriving}
        met = sum(1 for keys, least in members if len(keys & alive) >= least)
        parts = (met, need)
        short = short or met < need
    stale = bool(count) and short and not any(p.phase == "Succeeded" for p in finished)
    # What an eviction deletes: every bound member not being deleted (one whose node is gone or
    # failed included: the pod is still there and holds its claims); asked only of a stale gang.
    evictable = tuple(p.key for p in (*arriving, *(p for p in gang.pods if p.node_name and not p.deleting))) \
        if stale else ()
    return Health(count, minimum, stale, evictable, tuple(lost), wake, frozenset(on), parts, len(arriving))


def due(since: float, grace: float) -> float | None:
    """When a gang stale since ``since`` is evicted: None for a negative grace (never: only reported)."""
    return None if grace < 0 else since + grace


@dataclass
class Watch:
    """Which gangs a cycle reads again: those that changed, those stale, those whose member stops
    counting by now (a taint's toleration running out) and those with a member on a node that
    changed. A cache beside the view's (``View.stale``): dropping it makes the next cycle read
    every gang again."""

    nodes: list[Node] = field(default_factory=list)  # the last snapshot's nodes, as they were
    by_name: dict[str, Node] = field(default_factory=dict)
    gang_nodes: dict[str, frozenset[str]] = field(default_factory=dict)  # gang -> the nodes its members are on
    wakes: dict[str, float] = field(default_factory=dict)  # gang -> when a member stops counting
    tainted: frozenset[str] = frozenset()  # the nodes with a NoExecute taint (``noexecute_nodes``)
    fresh: bool = True  # nothing read yet: every gang is read

    def due(self, nodes: list[Node], changed: Iterable[str], gangs: Mapping[str, object],
            stale: Iterable[str], now: float) -> set[str]:
        """The gangs to read at ``now`` (only those that exist, or that were stale and may be gone)."""
        out = set(changed)
        out.update(stale)
        if self.fresh:
            out.update(gangs)
            self.fresh = False
        old = self.nodes
        if len(nodes) != len(old) or any(map(operator.is_not, nodes, old)):
            before = self.by_name
            self.by_name = by_name = {n.name: n for n in nodes}
            if before:
                # A node replaced by an equal object (a heartbeat the shell did not filter) moves nothing.
                moved = {name for name, n in by_name.items() if (was := before.get(name)) is not n and was != n}
                moved.update(name for name in before if name not in by_name)
            else:
                moved = set(by_name)
            if moved:
                now_tainted = noexecute_nodes({name: by_name[name] for name in moved if name in by_name})
                self.tainted = (self.tainted - moved) | now_tainted
                if self.gang_nodes:  # rare (a taint, a node gone): each gang's nodes asked, in C
                    out.update(k for k, on in self.gang_nodes.items() if not moved.isdisjoint(on))
            self.nodes = list(nodes)
        out.update(k for k, at in self.wakes.items() if at <= now)
        return out

    def note(self, key: str, reading: Health | None) -> None:
        """What ``key``'s reading says to watch for it (nothing: the gang is gone or has no rule)."""
        if reading is not None and reading.nodes:
            self.gang_nodes[key] = reading.nodes
        else:
            self.gang_nodes.pop(key, None)
        if reading is not None and reading.wake is not None:
            self.wakes[key] = reading.wake
        else:
            self.wakes.pop(key, None)

    def next_wake(self) -> float | None:
        return min(self.wakes.values(), default=None)
