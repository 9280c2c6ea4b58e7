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


def health(gang: Gang, finished: Iterable[Pod], nodes: Mapping[str, Node], bound_now: Mapping[str, str],
           now: float) -> Health | None:
    """The gang's reading at ``now``; None for a gang that has no rule to hold it to (no config, an
    error). ``finished``: the members that finished (a Succeeded one keeps the gang from being
    stale); ``bound_now``: the pods bound this cycle (they count)."""
    cfg = gang.config
    if cfg is None or gang.error:
        return None
    minimum = cfg.min_member
    live: list[str] = []
    lost: list[tuple[str, Loss]] = []
    evictable: list[str] = []
    on: set[str] = set()
    wake: float | None = None
    arriving = 0
    for pod in gang.pods:
        name = pod.node_name or bound_now.get(pod.key, "")
        if not name:
            continue
        on.add(name)
        node = nodes.get(name)
        if not pod.node_name:  # bound this cycle: placed on a node the cycle saw
            live.append(pod.key)
            evictable.append(pod.key)
            arriving += 1
            continue
        why = loss(pod, node, now)
        if why is None:
            live.append(pod.key)
            later = lost_later(pod, node, now)
            if later is not None and (wake is None or later < wake):
                wake = later
        else:
            lost.append((pod.key, why))
        if not pod.deleting:
            evictable.append(pod.key)
    finished = list(finished)
    succeeded = any(p.phase == "Succeeded" for p in finished)
    parts = None
    short = len(live) < minimum
    if gang.parts is not None:
        need, members = gang.parts
        alive = set(live)
        met = sum(1 for keys, least in members if sum(1 for k in keys if k in alive) >= least)
        parts = (met, need)
        short = short or met < need
    stale = bool(live) and not succeeded and short
    return Health(len(live), minimum, stale, tuple(evictable), tuple(lost), wake, frozenset(on), parts, arriving)


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
    on_node: dict[str, set[str]] = field(default_factory=dict)  # node -> gangs with a member bound there
    gang_nodes: dict[str, frozenset[str]] = field(default_factory=dict)
    wakes: dict[str, float] = field(default_factory=dict)  # gang -> when a member stops counting
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
            self.by_name = {n.name: n for n in nodes}
            moved = {name for name, n in self.by_name.items() if before.get(name) is not n}
            moved.update(name for name in before if name not in self.by_name)
            for name in moved:
                out.update(self.on_node.get(name, ()))
            self.nodes = list(nodes)
        out.update(k for k, at in self.wakes.items() if at <= now)
        return out

    def note(self, key: str, reading: Health | None) -> None:
        """What ``key``'s reading says to watch for it (nothing: the gang is gone or has no rule)."""
        was = self.gang_nodes.pop(key, frozenset())
        now = reading.nodes if reading is not None else frozenset()
        for name in was - now:
            gangs = self.on_node.get(name)
            if gangs is not None:
                gangs.discard(key)
                if not gangs:
                    del self.on_node[name]
        for name in now - was:
            self.on_node.setdefault(name, set()).add(key)
        if now:
            self.gang_nodes[key] = now
        if reading is not None and reading.wake is not None:
            self.wakes[key] = reading.wake
        else:
            self.wakes.pop(key, None)

    def next_wake(self) -> float | None:
        return min(self.wakes.values(), default=None)
